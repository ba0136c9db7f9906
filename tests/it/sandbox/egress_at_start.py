"""A tiny MCP stdio server (legacy era, standard library only) that reaches out at start, as a
server that fetches a model list or a token at start does, for tests/it/everyday.rs.

Run as `/usr/bin/python3 egress_at_start.py TARGETS`: TARGETS is a file of `HOST:PORT` lines.
At start it asks the egress proxy (`HTTPS_PROXY`, which mcpsum's sandbox sets) to `CONNECT` to
each of them and reads the proxy's status line, nothing more (no byte goes through a tunnel).
When any is refused it says so on stderr and exits 1 before reading stdin; otherwise it serves
`initialize` and empty lists. Only refused targets are meant to be listed: a target the proxy
admits would be connected to.
"""

import json
import os
import socket
import sys
import urllib.parse


def connect_status(proxy, target):
    u = urllib.parse.urlsplit(proxy)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
    return head.split(b"\r\n")[0].decode(errors="replace")


def main():
    with open(sys.argv[1]) as f:
        targets = [line.strip() for line in f if line.strip()]
    proxy = os.environ.get("HTTPS_PROXY", "")
    refused = False
    for target in targets:
        status = connect_status(proxy, target) if proxy else "no HTTPS_PROXY"
        if " 200 " not in f"{status} ":
            sys.stderr.write(f"egress_at_start: cannot reach {target}: {status}\n")
            refused = True
    sys.stderr.flush()
    if refused:
        sys.exit(1)
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        method = msg.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "egress-at-start", "version": "1.0.0"},
            }
        elif method == "tools/list":
            result = {"tools": []}
        else:
            error = {"code": -32601, "message": f"unknown method {method}"}
            answer = {"jsonrpc": "2.0", "id": msg["id"], "error": error}
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
            continue
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
