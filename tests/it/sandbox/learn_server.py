"""A tiny MCP stdio server (legacy era, standard library only) for tests/it/learn.rs: each tool
does one thing a real server does, so that `mcpsum proxy --learn` can watch it and the policy
`mcpsum sandbox suggest` proposes can be checked against it.

Run as `/usr/bin/python3 learn_server.py`. Tools, each answering one JSON text
`{"ok": true, "value": ...}` or `{"ok": false, "errno": "EACCES", "error": ...}`:

- `read {path}`: the first 200 bytes of a file, or a folder's sorted names.
- `write {path, text}`: writes the file (through a temporary beside it, then a rename, as
  editors and git do).
- `mkdir {path}`: creates the folder (and its parents).
- `run {argv}`: runs a program, answering its exit status and stdout.
- `fetch {url}`: `urllib.request.urlopen` (honours `HTTPS_PROXY`; the CA comes from
  `SSL_CERT_FILE`).
"""

import errno
import json
import os
import subprocess
import sys
import urllib.request

LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
OBJ = {"type": "object"}
TOOLS = [{"name": n, "inputSchema": OBJ} for n in ("read", "write", "mkdir", "run", "fetch")]


def attempt(fn):
    try:
        return {"ok": True, "value": fn()}
    except OSError as e:
        return {"ok": False, "errno": errno.errorcode.get(e.errno, str(e.errno)), "error": str(e)}
    except Exception as e:  # noqa: BLE001 - every failure is an observation
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def read(a):
    path = a["path"]
    if os.path.isdir(path):
        return sorted(os.listdir(path))
    with open(path, "rb") as f:
        return f.read(200).decode("utf-8", "replace")


def write(a):
    path = a["path"]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(a.get("text", ""))
    os.rename(tmp, path)
    return len(a.get("text", ""))


def mkdir(a):
    os.makedirs(a["path"], exist_ok=True)
    return a["path"]


def run(a):
    p = subprocess.run(a["argv"], capture_output=True, timeout=30, check=False)
    return {"status": p.returncode, "stdout": p.stdout.decode("utf-8", "replace")[:400]}


def fetch(a):
    with urllib.request.urlopen(a["url"], timeout=a.get("timeout", 15)) as resp:
        return {"status": resp.status, "body": resp.read(4096).decode("utf-8", "replace")}


HANDLERS = {"read": read, "write": write, "mkdir": mkdir, "run": run, "fetch": fetch}


def answer(msg):
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in LEGACY else LEGACY[-1],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "learn", "version": "1.0.0"},
        }, None
    if method == "ping":
        return {}, None
    if method == "tools/list":
        return {"tools": TOOLS}, None
    if method == "tools/call":
        fn = HANDLERS.get(params.get("name"))
        if fn is None:
            return None, {"code": -32602, "message": "unknown tool"}
        args = params.get("arguments") or {}
        text = json.dumps(attempt(lambda: fn(args)))
        return {"content": [{"type": "text", "text": text}]}, None
    return None, {"code": -32601, "message": f"method not found: {method}"}


def main():
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
