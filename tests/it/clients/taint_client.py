"""Drives one or more `mcpsum proxy` processes from ONE client process with the official Python
`mcp` SDK, for tests/it/taint.rs. Every proxy started here has this process as its parent, so
they all belong to one client session (SPEC §6).

Usage: python taint_client.py PLAN.json

PLAN = {"mcpsum": BIN, "lockfile": PATH, "env": {NAME: VALUE},
        "clients": {ID: {"server": NAME, "mode": "legacy" | "2026-07-28", "elicit": bool}},
        "steps": [{"client": ID, "op": "call", "name": TOOL, "arguments": {...},
                   "answer": "accept" | "deny" | "decline" | "cancel"},
                  {"client": ID, "op": "read", "uri": URI},
                  {"client": ID, "op": "prompt", "name": NAME, "arguments": {...}},
                  {"op": "run", "args": [mcpsum args...]}]}

`answer` is how the elicitation callback answers mcpsum's approval prompts during that step
(`accept` = accept with approve true, `deny` = accept with approve false; default `decline`).
Clients with `"elicit": false` have no callback, so they declare no elicitation capability.
`run` executes mcpsum (same env) as a child of this process while the proxies still run.

Prints one JSON document: one entry per step with `result`, `error` (a JSON-RPC error) or
`exception` (anything else the SDK raised, such as a result it cannot parse) and `prompts`
(every elicitation this client was shown during the step: message and requested schema).
"""

import asyncio
import json
import sys
from contextlib import AsyncExitStack

from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Asker:
    """The person behind the client: answers prompts as the current step says, and remembers them."""

    def __init__(self):
        self.answer = "decline"
        self.prompts = []

    async def __call__(self, ctx, params):
        schema = getattr(params, "requested_schema", None)
        if hasattr(schema, "model_dump"):
            schema = dump(schema)
        self.prompts.append({"message": getattr(params, "message", None), "requestedSchema": schema})
        if self.answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        if self.answer == "deny":
            return types.ElicitResult(action="accept", content={"approve": False})
        if self.answer == "cancel":
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action="decline")


async def main(plan):
    env = plan.get("env") or {}
    base = [plan["mcpsum"], "--lockfile", plan["lockfile"], "proxy", "--name"]
    out = {"steps": []}
    async with AsyncExitStack() as stack:
        clients, askers = {}, {}
        for cid, spec in plan["clients"].items():
            asker = Asker()
            params = StdioServerParameters(
                command=base[0], args=base[1:] + [spec["server"]], env=env
            )
            client = Client(
                params,
                mode=spec["mode"],
                cache=None,
                read_timeout_seconds=60,
                elicitation_callback=asker if spec.get("elicit") else None,
            )
            clients[cid] = await stack.enter_async_context(client)
            askers[cid] = asker
        for step in plan["steps"]:
            op = step["op"]
            rec = {"op": op}
            if op == "run":
                proc = await asyncio.create_subprocess_exec(
                    plan["mcpsum"],
                    "--lockfile",
                    plan["lockfile"],
                    *step["args"],
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                so, se = await proc.communicate()
                rec.update(code=proc.returncode, stdout=so.decode(), stderr=se.decode())
                out["steps"].append(rec)
                continue
            client, asker = clients[step["client"]], askers[step["client"]]
            asker.answer = step.get("answer", "decline")
            asker.prompts = []
            try:
                if op == "call":
                    rec["result"] = dump(
                        await client.call_tool(step["name"], step.get("arguments") or {})
                    )
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
            except Exception as e:  # e.g. a result the SDK cannot parse: report it, go on
                rec["exception"] = f"{type(e).__name__}: {e}"
            rec["prompts"] = asker.prompts
            out["steps"].append(rec)
    print(json.dumps(out))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
