"""Runs a command under a seccomp filter that refuses `unshare(2)` with EPERM, as a container's
profile can (x86_64 numbers), for tests/it/sandbox.rs: `no_unshare.py COMMAND ARGS...`."""

import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def ins(code, jt, jf, k): return struct.pack("HBBI", code, jt, jf, k)
prog = b"".join([
    ins(0x20, 0, 0, 0),            # ld nr
    ins(0x15, 0, 1, 272),          # jeq unshare
    ins(0x06, 0, 0, 0x00050000 | 1),  # errno EPERM
    ins(0x06, 0, 0, 0x7fff0000),   # allow
])
buf = ctypes.create_string_buffer(prog)
class FProg(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fp = FProg(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(fp), 0, 0) == 0, ctypes.get_errno()
os.execvp(sys.argv[1], sys.argv[1:])
