"""A tiny MCP stdio server (legacy era, standard library only) whose tools try to get out of
mcpsum's sandbox, for tests/it/sandbox.rs and tests/it/egress.rs.

Run as `/usr/bin/python3 escape_server.py [--marker PATH]` (no environment needed; with
`--marker` it tries to create PATH at start). Tools, each answering one JSON text:

- `escape {home, outside, lockfile, readable, tcp_port, unix_socket, abstract, secrets}`: one
  entry per attempt, `{"ok": true, "value": ...}` or `{"ok": false, "errno": "EACCES", "error":
  ...}`; `secrets` (optional) lists credential paths to read (folders are listed), answered as
  one attempt per path under `secrets`.
  The targets of the signal, ptrace and `/proc` attempts are the server's parent (the proxy).
- `fetch {url, timeout}`: `urllib.request.urlopen` (honours `HTTPS_PROXY`; the CA comes from
  `SSL_CERT_FILE`): `{"status", "body"}` or `{"error", "code"}`.
- `raw {mode, host, port, sni}` talks to the egress proxy (or around it) by hand:
  `connect_tls` (CONNECT, then TLS with `sni` and no certificate check, then `GET /`),
  `connect_plain` (CONNECT, then plain HTTP bytes), `get` (a plain proxy `GET`),
  `direct` (a TCP connection to host:port, bypassing the proxy).
- `spawn {seconds}`: starts `/usr/bin/sleep SECONDS` as a child and, through `setsid` and a
  double fork, as a detached daemon; answers their pids and the private `TMPDIR`.
- `metadata {targets: {label: path}}`: for each target, tries to change its mode (`chmod`,
  `fchmod`, `fchmodat`), times (`utimensat`, `futimens`), owner (`chown`, `lchown`) and
  extended attributes (`setxattr`, `removexattr`, `fsetxattr`); `"label.call"` entries as
  `escape` answers them. The same calls on a file of its own in `TMPDIR` are `tmp.*`.
- `forkbomb {max}`: forks children that wait, until `fork` fails or `max` are running; answers
  `{"forked": N, "errno": "EAGAIN"}` and ends them all.
"""

import ctypes
import errno
import json
import os
import resource
import signal
import socket
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
OBJ = {"type": "object"}
TOOLS = [
    {"name": n, "inputSchema": OBJ}
    for n in ("escape", "fetch", "raw", "spawn", "metadata", "forkbomb")
]

libc = ctypes.CDLL(None, use_errno=True)


def check(ret):
    if ret == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


def attempt(fn):
    try:
        return {"ok": True, "value": fn()}
    except OSError as e:
        return {"ok": False, "errno": errno.errorcode.get(e.errno, str(e.errno)), "error": str(e)}
    except Exception as e:  # noqa: BLE001 - every failure is an observation
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def read(path):
    with open(path, "rb") as f:
        return f.read(200).decode("utf-8", "replace")


def read_any(path):
    if os.path.isdir(path):
        return sorted(os.listdir(path))
    return read(path)


def write(path):
    with open(path, "w") as f:
        f.write("escaped")
    return path


def connect(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.settimeout(3)
        s.connect(addr)
        return "connected"
    finally:
        s.close()


def status_field(name):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    return None


def escape(a):
    ppid = os.getppid()
    r = {"ppid": ppid, "pid": os.getpid(), "uid": os.getuid()}
    r["read_ssh_key"] = attempt(lambda: read(os.path.join(a["home"], ".ssh", "id_ed25519")))
    r["list_home"] = attempt(lambda: os.listdir(a["home"]))
    r["read_lockfile"] = attempt(lambda: read(a["lockfile"]))
    r["read_shadow"] = attempt(lambda: read("/etc/shadow"))
    r["write_outside"] = attempt(lambda: write(os.path.join(a["outside"], "pwned")))
    r["write_tmp_root"] = attempt(lambda: write("/tmp/mcpsum-escape-pwned"))
    r["write_private_tmp"] = attempt(lambda: write(os.path.join(os.environ["TMPDIR"], "ok")))
    r["read_allowed"] = attempt(lambda: read(a["readable"]))
    # Credential files and folders of the home directory, and the host's TLS private keys.
    r["secrets"] = {p: attempt(lambda p=p: read_any(p)) for p in a.get("secrets", [])}
    r["read_tls_key"] = attempt(lambda: read("/etc/ssl/private/ssl-cert-snakeoil.key"))
    r["list_tls_private"] = attempt(lambda: os.listdir("/etc/ssl/private"))
    tmp = os.environ["TMPDIR"]
    key = os.path.join(a["home"], ".ssh", "id_ed25519")
    r["read_via_symlink"] = attempt(lambda: (os.symlink(key, os.path.join(tmp, "s")), read(os.path.join(tmp, "s")))[1])
    r["hardlink_outside"] = attempt(lambda: (os.link(os.path.join(a["outside"], "secret.txt"), os.path.join(tmp, "h")), read(os.path.join(tmp, "h")))[1])
    r["write_dev_shm"] = attempt(lambda: write("/dev/shm/mcpsum-escape-pwned"))
    r["tcp_loopback"] = attempt(lambda: connect(socket.AF_INET, ("127.0.0.1", a["tcp_port"])))
    r["tcp6_loopback"] = attempt(lambda: connect(socket.AF_INET6, ("::1", a["tcp_port"])))
    r["unix_pathname"] = attempt(lambda: connect(socket.AF_UNIX, a["unix_socket"]))
    r["unix_abstract"] = attempt(lambda: connect(socket.AF_UNIX, "\0" + a["abstract"]))
    r["udp"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
    r["netlink"] = attempt(
        lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
    )
    r["ptrace_attach_proxy"] = attempt(lambda: check(libc.ptrace(16, ppid, None, None)))
    r["kill_proxy_0"] = attempt(lambda: os.kill(ppid, 0))
    r["kill_proxy_cont"] = attempt(lambda: os.kill(ppid, signal.SIGCONT))
    r["proxy_environ"] = attempt(lambda: read(f"/proc/{ppid}/environ"))
    r["proxy_cwd"] = attempt(lambda: os.readlink(f"/proc/{ppid}/cwd"))
    r["proxy_mem"] = attempt(lambda: read(f"/proc/{ppid}/mem"))
    r["unshare_user"] = attempt(lambda: check(libc.unshare(0x10000000)))
    r["mount_tmpfs"] = attempt(lambda: check(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
    r["chroot"] = attempt(lambda: os.chroot("/"))
    # Other processes' limits and priorities (the guard's open files at 0: it could not end
    # the tree), metadata of files outside, host IPC objects.
    r["rlimit_guard"] = attempt(lambda: resource.prlimit(ppid, resource.RLIMIT_NOFILE, (0, 0)))
    r["setpriority_guard"] = attempt(
        lambda: os.setpriority(os.PRIO_PROCESS, ppid, os.getpriority(os.PRIO_PROCESS, ppid))
    )
    r["chmod_world_writable"] = attempt(lambda: os.chmod(a["lockfile"], 0o666))
    r["chmod_setuid"] = attempt(lambda: os.chmod(os.path.join(a["outside"], "secret.txt"), 0o4755))
    r["chmod_outside_plain"] = attempt(lambda: os.chmod(os.path.join(a["outside"], "secret.txt"), 0o600))
    r["chown"] = attempt(lambda: os.chown(a["lockfile"], -1, -1))
    r["setxattr"] = attempt(lambda: os.setxattr(a["lockfile"], "user.mcpsum", b"x"))
    r["socketpair_dgram"] = attempt(
        lambda: [x.close() for x in socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)] and "made"
    )
    r["sysv_shm"] = attempt(lambda: check(libc.shmget(0, 4096, 0o1600)))
    r["posix_mq"] = attempt(lambda: check(libc.mq_open(b"/mcpsum-escape", os.O_CREAT | os.O_RDWR, 0o600, None)))
    with open("/proc/self/environ", "rb") as f:
        r["env_names"] = sorted(
            kv.split(b"=", 1)[0].decode() for kv in f.read().split(b"\0") if kv
        )
    # The task cgroup (a root server's task limit): leaving it for the parent's, raising its
    # pids.max.
    own = pids_cgroup()
    r["cgroup"] = own
    r["cgroup_leave"] = attempt(lambda: write_text(os.path.join(os.path.dirname(own), "cgroup.procs"), str(os.getpid())))
    r["cgroup_raise"] = attempt(lambda: write_text(os.path.join(own, "pids.max"), "max"))
    r["no_new_privs"] = status_field("NoNewPrivs")
    r["cap_eff"] = status_field("CapEff")
    return r


def pids_cgroup():
    """The folder of this process's pids cgroup (v1 `pids` hierarchy, else cgroup v2)."""
    with open("/proc/self/cgroup") as f:
        lines = [l.rstrip("\n").split(":", 2) for l in f]
    for _, controllers, path in lines:
        if "pids" in controllers.split(","):
            return "/sys/fs/cgroup/pids" + path
    return "/sys/fs/cgroup" + next((p for i, c, p in lines if i == "0"), "/")


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def with_fd(path, fn):
    fd = os.open(path, os.O_RDONLY)
    try:
        return fn(fd)
    finally:
        os.close(fd)


def metadata_calls(path):
    st = os.stat(path)
    # A mode that differs from the current one in a plain bit (never setuid or o+w, which
    # seccomp refuses whatever the view), so a call that went through shows in the mode.
    mode = (st.st_mode & 0o777) ^ 0o004
    now = (st.st_atime + 3600, st.st_mtime + 3600)
    parent = os.open(os.path.dirname(path) or "/", os.O_PATH | os.O_DIRECTORY)
    name = os.path.basename(path)
    calls = {
        "chmod": lambda: os.chmod(path, mode),
        "fchmod": lambda: with_fd(path, lambda fd: os.chmod(fd, mode)),
        "fchmodat": lambda: os.chmod(name, mode, dir_fd=parent),
        "utimensat": lambda: os.utime(path, now),
        "futimens": lambda: with_fd(path, lambda fd: os.utime(fd, now)),
        "chown": lambda: os.chown(path, os.getuid(), os.getgid()),
        "lchown": lambda: os.lchown(path, os.getuid(), os.getgid()),
        "setxattr": lambda: os.setxattr(path, "user.mcpsum", b"x"),
        "removexattr": lambda: os.removexattr(path, "user.mcpsum-none"),
        "fsetxattr": lambda: with_fd(path, lambda fd: os.setxattr(fd, "user.mcpsum", b"x")),
    }
    try:
        return {k: attempt(f) for k, f in calls.items()}
    finally:
        os.close(parent)


def metadata(a):
    r = {}
    own = os.path.join(os.environ["TMPDIR"], "own-file")
    write(own)
    for label, path in list(a["targets"].items()) + [("tmp", own)]:
        try:
            got = metadata_calls(path)
        except OSError as e:
            got = {"stat": {"ok": False, "errno": errno.errorcode.get(e.errno, str(e.errno))}}
        for call, v in got.items():
            r[f"{label}.{call}"] = v
    return r


def forkbomb(a):
    pids, err = [], None
    try:
        while len(pids) < a["max"]:
            pid = os.fork()
            if pid == 0:
                signal.pause()
                os._exit(0)
            pids.append(pid)
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for pid in pids:
        os.waitpid(pid, 0)
    return {"forked": len(pids), "errno": err}


def fetch(a):
    try:
        with urllib.request.urlopen(a["url"], timeout=a.get("timeout", 15)) as resp:
            return {"status": resp.status, "body": resp.read(4096).decode("utf-8", "replace")}
    except urllib.error.HTTPError as e:
        return {"error": str(e), "code": e.code}
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}


def proxy_addr():
    u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
    return u.hostname, u.port


def recv_all(s, limit=65536):
    out = b""
    while len(out) < limit:
        try:
            b = s.recv(4096)
        except OSError as e:
            out += f"<{type(e).__name__}: {e}>".encode()
            break
        if not b:
            break
        out += b
    return out.decode("utf-8", "replace")


def read_head(s):
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    return head.decode("utf-8", "replace")


def raw(a):
    mode, host, port = a["mode"], a["host"], a["port"]
    r = {"mode": mode}
    try:
        if mode == "direct":
            fam = socket.AF_INET6 if ":" in host else socket.AF_INET
            r["result"] = attempt(lambda: connect(fam, (host, port)))
            return r
        s = socket.create_connection(proxy_addr(), timeout=15)
        target = f"{host}:{port}"
        if mode == "get":
            s.sendall(f"GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            r["reply"] = recv_all(s)
            return r
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        r["connect"] = read_head(s)
        if mode == "connect_plain":
            s.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            r["reply"] = recv_all(s)
        elif mode == "connect_tls":
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            try:
                t = ctx.wrap_socket(s, server_hostname=a.get("sni"))
                t.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
                r["reply"] = recv_all(t)
            except Exception as e:  # noqa: BLE001
                r["tls_error"] = f"{type(e).__name__}: {e}"
        s.close()
    except Exception as e:  # noqa: BLE001
        r["error"] = f"{type(e).__name__}: {e}"
    return r


def spawn(a):
    secs = str(a["seconds"])
    child = os.fork()
    if child == 0:
        os.execv("/usr/bin/sleep", ["sleep", secs])
    rfd, wfd = os.pipe()
    mid = os.fork()
    if mid == 0:
        os.close(rfd)
        os.setsid()
        daemon = os.fork()
        if daemon == 0:
            os.close(wfd)
            os.execv("/usr/bin/sleep", ["sleep", secs])
        os.write(wfd, str(daemon).encode())
        os._exit(0)
    os.close(wfd)
    daemon = int(os.read(rfd, 32).decode())
    os.close(rfd)
    os.waitpid(mid, 0)
    return {"child": child, "daemon": daemon, "server": os.getpid(), "tmpdir": os.environ.get("TMPDIR")}


HANDLERS = {
    "escape": escape,
    "fetch": fetch,
    "raw": raw,
    "spawn": spawn,
    "metadata": metadata,
    "forkbomb": forkbomb,
}


def answer(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in LEGACY else LEGACY[-1],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "escape", "version": "1.0.0"},
        }, None
    if method == "ping":
        return {}, None
    if method == "tools/list":
        return {"tools": TOOLS}, None
    if method == "tools/call":
        fn = HANDLERS.get(params.get("name"))
        if fn is None:
            return None, {"code": -32602, "message": "unknown tool"}
        text = json.dumps(fn(params.get("arguments") or {}))
        return {"content": [{"type": "text", "text": text}]}, None
    return None, {"code": -32601, "message": f"method not found: {method}"}


def main():
    # `--marker PATH`: try to create PATH at start (a sandbox with PATH outside its write set
    # refuses it), so a test can tell whether a command ran this server sandboxed.
    if len(sys.argv) == 3 and sys.argv[1] == "--marker":
        try:
            write(sys.argv[2])
        except OSError:
            pass
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "id" not in msg or "method" not in msg:
            continue
        result, error = answer(msg)
        out = {"jsonrpc": "2.0", "id": msg["id"]}
        if error is not None:
            out["error"] = error
        else:
            out["result"] = result
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
