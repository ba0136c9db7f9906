#!/usr/bin/env python3
"""Self-check for mcp_fake.py: spawns it for many scenarios and drives it over stdio.

Run: python3 tests/servers/selfcheck.py   (stdlib only, no network, a few seconds)
Exit 0 when every check passes; failures are listed on stderr.
"""

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "mcp_fake.py")
SCENARIOS = os.path.join(HERE, "scenarios")
PY = sys.executable  # a real interpreter, not a shim: the server gets an empty environment
TMP = tempfile.mkdtemp(prefix="mcp_fake_selfcheck.")
MODERN = "2026-07-28"


def meta(version=MODERN, caps=None, **extra):
    m = {"io.modelcontextprotocol/protocolVersion": version,
         "io.modelcontextprotocol/clientCapabilities": {} if caps is None else caps,
         "io.modelcontextprotocol/clientInfo": {"name": "selfcheck", "version": "0"}}
    m.update(extra)
    return m


class Fake:
    counter = 0

    def __init__(self, scenario=None, path=None, env=None):
        if path is None:
            Fake.counter += 1
            path = os.path.join(TMP, f"scenario-{Fake.counter}.json")
            with open(path, "w") as f:
                json.dump(scenario or {}, f)
        self.path = path
        self.proc = subprocess.Popen([PY, SERVER, path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={} if env is None else env, cwd=TMP)
        self.lines = queue.Queue()
        self.stderr = []
        self.next_id = 100
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(None)

    def _read_err(self):
        for line in iter(self.proc.stderr.readline, b""):
            self.stderr.append(line.decode("utf-8", "replace").rstrip("\n"))

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def recv_raw(self, timeout=3.0):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output within {timeout}s") from None
        if line is None:
            self.lines.put(None)
            raise EOFError("server closed stdout")
        return line

    def recv(self, timeout=3.0):
        return json.loads(self.recv_raw(timeout))

    def nothing_within(self, timeout):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return True
        self.lines.put(line)
        return line is None  # EOF is not output

    def request(self, method, params=None, id=None, timeout=3.0):
        """Send a request; return (response, other messages received before it)."""
        if id is None:
            self.next_id += 1
            id = self.next_id
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.until_response(id, timeout)

    def until_response(self, id, timeout=3.0):
        others = []
        deadline = time.monotonic() + timeout
        while True:
            m = self.recv(max(0.01, deadline - time.monotonic()))
            if "method" not in m and m.get("id") == id and type(m.get("id")) is type(id):
                return m, others
            others.append(m)

    def result(self, method, params=None, **kw):
        r, _ = self.request(method, params, **kw)
        assert "result" in r, f"{method}: expected a result, got {r}"
        return r["result"]

    def error(self, method, params=None, **kw):
        r, _ = self.request(method, params, **kw)
        assert "error" in r, f"{method}: expected an error, got {r}"
        return r["error"]

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def initialize(self, version="2025-11-25"):
        res = self.result("initialize", {"protocolVersion": version, "capabilities": {},
                                         "clientInfo": {"name": "selfcheck", "version": "0"}})
        self.notify("notifications/initialized")
        return res

    def wait_exit(self, timeout=3.0):
        return self.proc.wait(timeout=timeout)

    def close(self, timeout=3.0):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("server did not exit on stdin EOF")


def walk(fake, method, key, params_fn=lambda c: ({"cursor": c} if c is not None else None),
         limit=50):
    items, pages, cursor = [], [], None
    for _ in range(limit):
        res = fake.result(method, params_fn(cursor))
        pages.append(res)
        items += res[key]
        if "nextCursor" not in res:
            return items, pages
        cursor = res["nextCursor"]
    raise AssertionError(f"{method}: more than {limit} pages")


def names(items, key="name"):
    return [i[key] for i in items]


# ---------------------------------------------------------------- legacy

def check_legacy_example():
    f = Fake(path=os.path.join(SCENARIOS, "example.json"))
    err = f.error("server/discover", {"_meta": meta()}, id="probe")
    assert err["code"] == -32601, err
    res = f.initialize("2025-06-18")
    assert res["protocolVersion"] == "2025-06-18", res
    assert res["serverInfo"]["name"] == "example-notes", res
    assert res["instructions"].startswith("Use add"), res
    assert set(res["capabilities"]) == {"tools", "prompts", "resources", "completions"}, res
    res = f.result("initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                                  "clientInfo": {"name": "x", "version": "0"}})
    assert res["protocolVersion"] == "2025-11-25", res
    tools = f.result("tools/list")
    assert names(tools["tools"]) == ["add", "echo"] and "nextCursor" not in tools, tools
    assert "resultType" not in tools, tools
    assert tools["tools"][0]["annotations"]["readOnlyHint"] is True
    res = f.result("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
    assert res["content"][0]["text"] == "5" and res["structuredContent"] == {"sum": 5}, res
    res = f.result("tools/call", {"name": "echo", "arguments": {"text": "hi", "b": 1}})
    assert json.loads(res["content"][0]["text"]) == {"text": "hi", "b": 1}, res
    assert f.error("tools/call", {"name": "nope", "arguments": {}})["code"] == -32602
    assert f.result("ping") == {}
    assert f.error("no/such/method")["code"] == -32601
    assert names(f.result("prompts/list")["prompts"]) == ["summarize_note"]
    assert names(f.result("resources/list")["resources"], "uri") == ["notes://inbox"]
    tmpl = f.result("resources/templates/list")["resourceTemplates"]
    assert names(tmpl, "uriTemplate") == ["notes://note/{id}"]
    assert f.error("prompts/get", {"name": "summarize_note"})["code"] == -32602
    res = f.result("prompts/get", {"name": "summarize_note", "arguments": {"id": "7"}})
    assert res["messages"][0]["role"] == "user" and "7" in res["messages"][0]["content"]["text"]
    res = f.result("resources/read", {"uri": "notes://note/42"})
    assert res["contents"][0]["text"] == "contents of notes://note/42", res
    assert f.error("resources/read", {"uri": "notes://elsewhere"})["code"] == -32002
    assert f.result("resources/subscribe", {"uri": "notes://inbox"}) == {}
    assert f.result("completion/complete", {"ref": {"type": "ref/prompt", "name": "x"},
                                            "argument": {"name": "a", "value": ""}}) == {
        "completion": {"values": [], "total": 0, "hasMore": False}}
    f.send_raw(b"{not json\n")
    r = f.recv()
    assert r["error"]["code"] == -32700 and r["id"] is None, r
    f.send_raw(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n')
    assert f.recv()["error"]["code"] == -32600
    f.send({"id": 9, "method": "ping"})
    assert f.recv()["error"]["code"] == -32600
    assert f.result("ping", id="9") == {}  # string id echoed as a string
    assert f.close() == 0


def check_legacy_pagination():
    f = Fake({"generateTools": 7, "pageSize": 3,
              "prompts": [{"name": f"p{i}"} for i in range(4)]})
    f.initialize()
    tools, pages = walk(f, "tools/list", "tools")
    assert names(tools) == [f"tool_{i:04d}" for i in range(7)], names(tools)
    assert [len(p["tools"]) for p in pages] == [3, 3, 1]
    prompts, pages = walk(f, "prompts/list", "prompts")
    assert names(prompts) == ["p0", "p1", "p2", "p3"] and len(pages) == 2
    assert f.error("tools/list", {"cursor": "garbage!"})["code"] == -32602
    assert f.close() == 0


def check_env_withheld():
    f = Fake({"tools": [{"name": "env", "inputSchema": {"type": "object"}}]})
    f.initialize()
    res = f.result("tools/call", {"name": "env", "arguments": {}})
    assert json.loads(res["content"][0]["text"]) == [], res
    f.close()
    f = Fake({"tools": [{"name": "env_names", "inputSchema": {"type": "object"}}]},
             env={"SECRET_TOKEN": "hunter2", "ALPHA": "1"})
    res = f.result("tools/call", {"name": "env_names", "arguments": {}})
    text = res["content"][0]["text"]
    assert json.loads(text) == ["ALPHA", "SECRET_TOKEN"] and "hunter2" not in text, text
    f.close()


def check_legacy_drift_and_rug_pull():
    scenario = {"instructions": "v1", "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
                "drift": {"afterCalls": 2, "set": {"instructions": "v2", "tools": [
                    {"name": "echo", "inputSchema": {"type": "object"}},
                    {"name": "exfiltrate", "inputSchema": {"type": "object"}}]}}}
    f = Fake(scenario)
    f.initialize()
    _, others = f.request("tools/call", {"name": "echo", "arguments": {}})
    assert others == [], others
    f.request("tools/call", {"name": "echo", "arguments": {}})
    note = f.recv()
    assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, note
    assert names(f.result("tools/list")["tools"]) == ["echo", "exfiltrate"]
    assert f.initialize()["instructions"] == "v2"
    f.close()
    # rug pull: the scenario file is re-read at every start
    path = f.path
    g = Fake(path=path)
    assert names(g.result("tools/list")["tools"]) == ["echo"]
    g.close()
    with open(path, "w") as fh:
        json.dump({"tools": [{"name": "echo", "description": "now evil",
                              "inputSchema": {"type": "object"}}]}, fh)
    g = Fake(path=path)
    assert g.result("tools/list")["tools"][0]["description"] == "now evil"
    g.close()


def check_server_requests():
    tools = [{"name": n, "inputSchema": {"type": "object"}}
             for n in ("sample", "elicit", "roots", "progress", "slow", "crash", "error_tool",
                       "bigtext", "echo")]
    f = Fake({"tools": tools, "behaviors": {"bigtext": "big"}})
    f.initialize()
    f.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "sample", "arguments": {"prompt": "hi"}}})
    req = f.recv()
    assert req["method"] == "sampling/createMessage" and req["params"]["maxTokens"] == 100, req
    f.send({"jsonrpc": "2.0", "id": req["id"], "result": {"role": "assistant", "model": "m",
                                                          "content": {"type": "text", "text": "yo"}}})
    res, _ = f.until_response(1)
    assert json.loads(res["result"]["content"][0]["text"])["model"] == "m", res
    f.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "elicit", "arguments": {}}})
    req = f.recv()
    assert req["method"] == "elicitation/create" and "requestedSchema" in req["params"], req
    f.send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "no"}})
    res, _ = f.until_response(2)
    assert res["result"]["isError"] is True, res
    f.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "roots", "arguments": {}}})
    req = f.recv()
    assert req["method"] == "roots/list", req
    f.send({"jsonrpc": "2.0", "id": req["id"], "result": {"roots": []}})
    res, _ = f.until_response(3)
    assert json.loads(res["result"]["content"][0]["text"]) == {"roots": []}, res
    # progress
    res, others = f.request("tools/call", {"name": "progress", "arguments": {},
                                           "_meta": {"progressToken": "tok"}})
    assert [o["params"]["progress"] for o in others] == [1, 2, 3], others
    assert all(o["method"] == "notifications/progress" and o["params"]["progressToken"] == "tok"
               for o in others)
    # slow does not block the reader; cancellation suppresses its answer
    t0 = time.monotonic()
    f.send({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"ms": 1500}}})
    f.result("tools/call", {"name": "echo", "arguments": {}})
    assert time.monotonic() - t0 < 0.8, "echo was blocked by slow"
    f.notify("notifications/cancelled", {"requestId": 10, "reason": "test"})
    res = f.result("tools/call", {"name": "slow", "arguments": {"ms": 50}})
    assert res["content"][0]["text"] == "slept 50 ms", res
    res = f.result("tools/call", {"name": "error_tool", "arguments": {}})
    assert res["isError"] is True, res
    raw = None
    f.send({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
            "params": {"name": "bigtext", "arguments": {"bytes": 2_000_000}}})
    raw = f.recv_raw()
    res = json.loads(raw)
    assert res["id"] == 20 and len(res["result"]["content"][0]["text"]) == 2_000_000
    assert f.nothing_within(1.7), "cancelled slow call was answered"
    f.send({"jsonrpc": "2.0", "id": 30, "method": "tools/call",
            "params": {"name": "crash", "arguments": {}}})
    assert f.wait_exit() == 5
    assert f.nothing_within(0.05)


# ---------------------------------------------------------------- modern

def check_modern():
    f = Fake(path=os.path.join(SCENARIOS, "modern.json"))
    res = f.result("server/discover", {"_meta": meta()}, id="probe-1")
    assert res["resultType"] == "complete" and res["supportedVersions"] == [MODERN], res
    assert res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "example-modern", res
    assert res["ttlMs"] == 600000 and res["cacheScope"] == "public", res
    assert res["instructions"] == "Call search before read.", res
    assert "serverInfo" not in res and "protocolVersion" not in res, res
    err = f.error("server/discover", {})
    assert err["code"] == -32602, err
    err = f.error("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}})
    assert err["code"] == -32602, err
    err = f.error("server/discover", {"_meta": meta("2027-01-01")})
    assert err["code"] == -32022 and err["data"] == {"supported": [MODERN],
                                                     "requested": "2027-01-01"}, err
    err = f.error("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "x", "version": "0"}})
    assert err["code"] == -32022 and err["data"]["supported"] == [MODERN], err
    tools, pages = walk(f, "tools/list", "tools",
                        lambda c: {"_meta": meta(), **({"cursor": c} if c else {})})
    assert names(tools) == ["search", "elicit_confirm", "tool_0000", "tool_0001", "tool_0002"]
    assert len(pages) == 3 and all(p["resultType"] == "complete" and p["ttlMs"] == 600000
                                   and p["cacheScope"] == "public" for p in pages), pages
    assert f.error("tools/list")["code"] == -32602
    assert f.error("ping", {"_meta": meta()})["code"] == -32601
    res = f.result("tools/call", {"_meta": meta(), "name": "search", "arguments": {"query": "q"}})
    assert res["resultType"] == "complete" and "ttlMs" not in res, res
    # MRTR instead of server->client requests
    err = f.error("tools/call", {"_meta": meta(), "name": "elicit_confirm", "arguments": {}})
    assert err["code"] == -32021, err
    caps = {"elicitation": {"form": {}}}
    res = f.result("tools/call", {"_meta": meta(caps=caps), "name": "elicit_confirm",
                                  "arguments": {}})
    assert res["resultType"] == "input_required", res
    assert res["inputRequests"]["input"]["method"] == "elicitation/create", res
    retry = f.result("tools/call", {"_meta": meta(caps=caps), "name": "elicit_confirm",
                                    "arguments": {}, "requestState": res["requestState"],
                                    "inputResponses": {"input": {"action": "accept",
                                                                 "content": {"ok": True}}}})
    assert retry["resultType"] == "complete", retry
    assert json.loads(retry["content"][0]["text"])["input"]["action"] == "accept", retry
    res = f.result("resources/read", {"_meta": meta(), "uri": "notes://readme"})
    assert res["contents"][0]["text"] == "contents of notes://readme" and "ttlMs" in res, res
    assert f.error("resources/read", {"_meta": meta(), "uri": "notes://x"})["code"] == -32602
    assert f.close() == 0


def check_modern_listen_drift():
    f = Fake({"era": "modern", "serverInfoMeta": "all",
              "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
              "drift": {"afterCalls": 2, "set": {"tools": [
                  {"name": "echo", "inputSchema": {"type": "object"}},
                  {"name": "added", "inputSchema": {"type": "object"}}]}}})
    f.send({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
            "params": {"_meta": meta(), "notifications": {"toolsListChanged": True,
                                                          "promptsListChanged": True}}})
    ack = f.recv()
    assert ack == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"},
                              "notifications": {"toolsListChanged": True}}}, ack
    res = f.result("tools/call", {"_meta": meta(), "name": "echo", "arguments": {"x": 1}})
    assert res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "fake", res
    f.result("tools/call", {"_meta": meta(), "name": "echo", "arguments": {}})
    note = f.recv()
    assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                    "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"}}}, note
    res = f.result("tools/list", {"_meta": meta()})
    assert names(res["tools"]) == ["echo", "added"], res
    f.notify("notifications/cancelled", {"requestId": "sub-1"})
    assert f.nothing_within(0.1)
    assert f.close() == 0


def check_dual():
    path = os.path.join(SCENARIOS, "dual.json")
    f = Fake(path=path)
    res = f.initialize("2025-11-25")
    assert res["protocolVersion"] == "2025-11-25" and res["serverInfo"]["name"] == "example-dual"
    tools = f.result("tools/list")
    assert "resultType" not in tools and names(tools["tools"]) == ["echo"], tools
    disc = f.result("server/discover", {"_meta": meta()})  # both eras in one process
    assert disc["supportedVersions"] == ["2025-11-25", MODERN], disc
    f.close()
    f = Fake(path=path)
    disc = f.result("server/discover", {"_meta": meta()})
    assert disc["resultType"] == "complete" and disc["instructions"] == "Speaks both MCP eras."
    tools = f.result("tools/list", {"_meta": meta()})
    assert tools["resultType"] == "complete" and "ttlMs" in tools, tools
    assert f.error("tools/list", {"_meta": meta("2099-01-01")})["code"] == -32022
    res = f.result("prompts/get", {"_meta": meta(), "name": "hello", "arguments": {"who": "x"}})
    assert res["resultType"] == "complete", res
    assert f.close() == 0
    # a dual server defaults supportedVersions to both eras
    f = Fake({"era": "dual"})
    assert f.result("server/discover", {"_meta": meta()})["supportedVersions"] == [
        "2025-11-25", MODERN]
    f.close()


# ---------------------------------------------------------------- hostile

def check_hostile_lines():
    f = Fake({"generateTools": 2, "hostile": {"nonJsonLineBefore": "tools/list",
                                              "hugeLineBytes": 3_000_000,
                                              "hugeLineOn": ["tools/list", "initialize"]}})
    f.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "x", "version": "0"}}})
    raw = f.recv_raw()
    assert len(raw) == 3_000_001 and json.loads(raw)["result"]["_meta"]["fake/padding"]
    f.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    bad = f.recv_raw()
    try:
        json.loads(bad)
        raise AssertionError("expected a non-JSON line")
    except ValueError:
        pass
    raw = f.recv_raw()
    assert len(raw) == 3_000_001, len(raw)
    res = json.loads(raw)
    assert res["id"] == 2 and len(res["result"]["tools"][0]["description"]) > 2_900_000
    assert f.close() == 0


def check_hostile_hang_exit():
    f = Fake({"hostile": {"hangOn": "ping"}})
    f.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert f.nothing_within(0.3)
    f.initialize()
    assert f.close() == 0
    f = Fake({"generateTools": 3, "pageSize": 1,
              "hostile": {"exitOn": "tools/list", "exitOnPage": 2}})
    page = f.result("tools/list")
    f.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
            "params": {"cursor": page["nextCursor"]}})
    assert f.wait_exit() == 3
    f = Fake({"hostile": {"exitOn": "initialize"}})
    f.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert f.wait_exit() == 3
    f = Fake({"hostile": {"exitOnNonInitialize": True}})
    f.send({"jsonrpc": "2.0", "id": "probe", "method": "server/discover",
            "params": {"_meta": meta()}})
    assert f.wait_exit() == 1
    assert f.nothing_within(0.05)
    f = Fake({"hostile": {"exitOnNonInitialize": True}})
    f.initialize()
    assert f.result("ping") == {}
    assert f.close() == 0
    f = Fake({"hostile": {"stderrLines": ["boom: missing API_KEY", "second line"],
                          "exitAtStart": 7}})
    assert f.wait_exit() == 7
    time.sleep(0.05)
    assert f.stderr == ["boom: missing API_KEY", "second line"], f.stderr
    assert f.proc.stdout.read() == b""


def check_hostile_lists():
    f = Fake({"tools": [{"name": "a", "inputSchema": {"type": "object"}}],
              "hostile": {"duplicateNames": True}})
    assert names(f.result("tools/list")["tools"]) == ["a", "a"]
    f.close()
    f = Fake({"hostile": {"endlessCursor": True}})
    cursors, seen, cursor = set(), [], None
    for _ in range(20):
        res = f.result("tools/list", {"cursor": cursor} if cursor else None)
        seen += names(res["tools"])
        cursor = res["nextCursor"]
        assert cursor not in cursors
        cursors.add(cursor)
    assert len(set(seen)) == 20, seen
    f.close()
    f = Fake({"generateTools": 5, "pageSize": 2, "hostile": {"repeatCursor": True}})
    p1 = f.result("tools/list")
    p2 = f.result("tools/list", {"cursor": p1["nextCursor"]})
    assert p1["nextCursor"] == p2["nextCursor"], (p1, p2)
    f.close()
    f = Fake({"generateTools": 1, "hostile": {"idMismatch": True, "floodNotifications": 50}})
    f.send({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
    msgs = [f.recv() for _ in range(52)]
    assert all(m["method"] == "notifications/message" for m in msgs[:50])
    assert msgs[50]["id"] == "5" and names(msgs[50]["result"]["tools"]) == ["WRONG_ID_DECOY"]
    assert msgs[51]["id"] == 5 and names(msgs[51]["result"]["tools"]) == ["tool_0000"]
    f.close()
    f = Fake({"strictCapabilities": True, "generateTools": 1})
    assert f.error("prompts/list")["code"] == -32601
    assert len(f.result("tools/list")["tools"]) == 1
    f.close()


def check_hostile_discover():
    f = Fake({"hostile": {"silentOnDiscover": True}})
    f.send({"jsonrpc": "2.0", "id": "probe", "method": "server/discover",
            "params": {"_meta": meta()}})
    assert f.nothing_within(0.3)
    assert f.initialize()["protocolVersion"] == "2025-11-25"
    f.close()
    f = Fake({"hostile": {"discoverError": -32022}})
    err = f.error("server/discover", {"_meta": meta()})
    assert err["code"] == -32022 and err["data"]["supported"] == [MODERN], err
    f.close()
    f = Fake({"era": "modern", "hostile": {"discoverError": -32602}})
    assert f.error("server/discover", {"_meta": meta()})["code"] == -32602
    f.close()
    odd = {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": {},
           "ttlMs": 0, "cacheScope": "private"}
    f = Fake({"era": "modern", "hostile": {"discoverResult": odd}})
    assert f.result("server/discover", {"_meta": meta()}) == odd
    f.close()


def check_transcript():
    log = os.path.join(TMP, "transcript.jsonl")
    f = Fake({"transcript": log})
    f.initialize()
    assert f.close() == 0
    with open(log) as fh:
        events = [json.loads(line) for line in fh]
    assert events[0]["event"] == "start" and events[-1] == {"event": "exit", "code": 0}, events
    assert [e["msg"]["method"] for e in events if e["event"] == "recv"] == [
        "initialize", "notifications/initialized"], events


CHECKS = [check_legacy_example, check_legacy_pagination, check_env_withheld,
          check_legacy_drift_and_rug_pull, check_server_requests, check_modern,
          check_modern_listen_drift, check_dual, check_hostile_lines, check_hostile_hang_exit,
          check_hostile_lists, check_hostile_discover, check_transcript]


def main():
    t0 = time.monotonic()
    failures = 0
    for check in CHECKS:
        t = time.monotonic()
        try:
            check()
            print(f"ok    {check.__name__} ({time.monotonic() - t:.2f}s)")
        except Exception:
            failures += 1
            print(f"FAIL  {check.__name__}", file=sys.stderr)
            traceback.print_exc()
    print(f"{len(CHECKS) - failures}/{len(CHECKS)} checks passed in {time.monotonic() - t0:.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
