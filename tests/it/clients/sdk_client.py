"""Drives `mcpsum proxy` with the official Python `mcp` SDK client, for tests/it/proxy.rs.

Usage: python sdk_client.py PLAN.json

PLAN = {"mode": "legacy" | "auto" | "2026-07-28",
        "command": [argv of the proxy...], "env": {NAME: VALUE},
        "steps": [{"op": "list_all"},
                  {"op": "call", "name": TOOL, "arguments": {...}, "progress": true},
                  {"op": "read", "uri": URI},
                  {"op": "prompt", "name": NAME, "arguments": {...}}]}

Prints one JSON document on stdout: the negotiated protocol version, serverInfo, instructions,
and one entry per step (lists as plain JSON items; calls with their result or error and the
progress notifications that arrived). The SDK runs with only the environment given in PLAN.env
(`StdioServerParameters.env` is merged over the SDK's safe defaults taken from our own
environment, which the test sets explicitly).
"""

import asyncio
import json
import sys

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def walk(fetch, field):
    items, cursor, pages = [], None, 0
    while True:
        page = await fetch(cursor=cursor)
        pages += 1
        items.extend(dump(x) for x in getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            return items, pages


async def main(plan):
    params = StdioServerParameters(
        command=plan["command"][0], args=plan["command"][1:], env=plan.get("env") or {}
    )
    out = {"steps": []}
    async with Client(params, mode=plan["mode"], cache=None, read_timeout_seconds=60) as client:
        out["protocolVersion"] = client.protocol_version
        info = client.server_info
        out["serverInfo"] = dump(info) if info is not None else None
        out["instructions"] = client.instructions
        out["capabilities"] = dump(client.server_capabilities)
        for step in plan["steps"]:
            op = step["op"]
            rec = {"op": op}
            try:
                if op == "list_all":
                    caps = client.server_capabilities
                    if caps.tools is not None:
                        rec["tools"], rec["toolPages"] = await walk(client.list_tools, "tools")
                    if caps.prompts is not None:
                        rec["prompts"], _ = await walk(client.list_prompts, "prompts")
                    if caps.resources is not None:
                        rec["resources"], _ = await walk(client.list_resources, "resources")
                        rec["resourceTemplates"], _ = await walk(
                            client.list_resource_templates, "resource_templates"
                        )
                elif op == "call":
                    progress = []

                    async def on_progress(p, total, message):
                        progress.append({"progress": p, "total": total, "message": message})

                    result = await client.call_tool(
                        step["name"],
                        step.get("arguments") or {},
                        progress_callback=on_progress if step.get("progress") else None,
                    )
                    rec["result"] = dump(result)
                    rec["progress"] = progress
                elif op == "read":
                    rec["result"] = dump(await client.read_resource(step["uri"]))
                elif op == "prompt":
                    rec["result"] = dump(
                        await client.get_prompt(step["name"], step.get("arguments") or {})
                    )
                else:
                    rec["error"] = {"message": f"unknown op {op}"}
            except MCPError as e:
                rec["error"] = {"code": e.error.code, "message": e.error.message}
            out["steps"].append(rec)
    print(json.dumps(out))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
