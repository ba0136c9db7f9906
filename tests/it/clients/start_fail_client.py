"""Connects the official Python `mcp` SDK client to a `mcpsum proxy` that cannot start, for
tests/it/everyday.rs: what a person's client shows then.

Usage: python start_fail_client.py PLAN.json
PLAN = {"command": [argv of the proxy...], "env": {NAME: VALUE}}

Prints one JSON document: {"error": {"code", "message"}} when the SDK received a JSON-RPC error
(at `initialize`, or at `tools/list` after a handshake answered from the lock), else
{"exception": TEXT} for anything else (such as a closed connection), or {"listed": true}.
"""

import asyncio
import json
import sys

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError


def find_mcp_error(exc):
    if isinstance(exc, MCPError):
        return exc
    for inner in getattr(exc, "exceptions", ()) or ():
        found = find_mcp_error(inner)
        if found is not None:
            return found
    return None


async def main(plan):
    params = StdioServerParameters(
        command=plan["command"][0], args=plan["command"][1:], env=plan.get("env") or {}
    )
    out = {}
    try:
        async with Client(params, mode="legacy", cache=None, read_timeout_seconds=30) as client:
            await client.list_tools()
            out["listed"] = True
    except BaseException as e:  # noqa: BLE001 - the report is the point
        found = find_mcp_error(e)
        if found is not None:
            out["error"] = {"code": found.error.code, "message": found.error.message}
        else:
            out["exception"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
