"""A tiny 2026-07-28 stdio server that ends `subscriptions/listen` streams on demand, for
tests/it/proxy.rs (the fake server keeps every stream open). Standard library only.

Tools: `end_streams` {"how": "cancel" | "result"} ends every open stream, by
`notifications/cancelled` (the cancellation page) or by answering the listen request (the
subscriptions page); `listens` reports how many listen requests arrived so far.
"""

import json
import sys

SUB = "io.modelcontextprotocol/subscriptionId"
TOOLS = [
    {"name": "end_streams", "inputSchema": {"type": "object"}},
    {"name": "listens", "inputSchema": {"type": "object"}},
]


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def result(msg_id, res):
    send({"jsonrpc": "2.0", "id": msg_id, "result": dict(res, resultType="complete")})


def main():
    streams, listens = [], 0
    for line in sys.stdin:
        msg = json.loads(line)
        method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if msg_id is None:
            if method == "notifications/cancelled":
                streams = [s for s in streams if s != params.get("requestId")]
            continue
        if method == "server/discover":
            result(msg_id, {"supportedVersions": ["2026-07-28"],
                            "capabilities": {"tools": {"listChanged": True}},
                            "ttlMs": 0, "cacheScope": "public",
                            "_meta": {"io.modelcontextprotocol/serverInfo":
                                      {"name": "listen-server", "version": "1"}}})
        elif method == "tools/list":
            result(msg_id, {"tools": TOOLS, "ttlMs": 0, "cacheScope": "public"})
        elif method == "subscriptions/listen":
            listens += 1
            streams.append(msg_id)
            send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                  "params": {"_meta": {SUB: msg_id},
                             "notifications": params.get("notifications") or {}}})
        elif method == "tools/call" and params.get("name") == "end_streams":
            how = (params.get("arguments") or {}).get("how")
            for s in streams:
                if how == "cancel":
                    send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": s, "_meta": {SUB: s}}})
                else:
                    result(s, {"_meta": {SUB: s}})
            n, streams = len(streams), []
            result(msg_id, {"content": [{"type": "text", "text": f"ended {n}"}]})
        elif method == "tools/call" and params.get("name") == "listens":
            result(msg_id, {"content": [{"type": "text", "text": str(listens)}]})
        else:
            send({"jsonrpc": "2.0", "id": msg_id,
                  "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
