#!/usr/bin/env python3
"""mcp_fake.py: a scriptable MCP stdio server for mcpsum's tests (Python 3.11, stdlib only).

Usage:
    /usr/bin/python3 tests/servers/mcp_fake.py /abs/path/SCENARIO.json

The scenario path comes from argv because mcpsum withholds the environment (not even PATH or
HOME reach the server); this script never reads environment variables. Give an absolute
interpreter path (a pyenv shim is a shell script that needs PATH and injects PYENV_* variables)
and an absolute scenario path (the server's working directory is not guaranteed). Without an
argument every key takes its default. The scenario is read at every start, so a test can edit it
between `mcpsum lock` and `mcpsum verify` to simulate a rug pull.

Wire: newline-delimited JSON-RPC 2.0 on stdin/stdout, one compact object per line, flushed after
each; diagnostics only on stderr. Exits 0 on stdin EOF. Exit codes: 0 EOF, 1 exitOnNonInitialize,
2 bad scenario, 3 hostile.exitOn, 5 a `crash` tool, N hostile.exitAtStart.

Scenario keys (JSON object; every key optional):

era                "legacy" (default) | "modern" | "dual".
                   legacy: initialize handshake only; server/discover gets -32601 and the server
                     keeps running; requests before initialize are answered anyway.
                   modern (2026-07-28): server/discover, subscriptions/listen; initialize,
                     ping, logging/setLevel, resources/(un)subscribe get errors. Every request
                     needs params._meta with "io.modelcontextprotocol/protocolVersion" and
                     "io.modelcontextprotocol/clientCapabilities" (missing key: -32602 with
                     data {missing, supported}); a version not in supportedVersions: -32022 with
                     data {supported, requested}. Every result carries resultType "complete"
                     (lists, discover and resources/read also ttlMs and cacheScope).
                   dual: decided per message: initialize is legacy, server/discover and
                     subscriptions/listen are modern, any other request is modern when its
                     _meta has the protocolVersion key, legacy otherwise. Both at once is fine.
protocolVersion    legacy initialize answer when the client's version is not in legacyVersions
                   (default "2025-11-25"); a requested version in legacyVersions is echoed.
legacyVersions     default ["2024-11-05","2025-03-26","2025-06-18","2025-11-25"].
supportedVersions  modern discover list and accepted _meta versions; default ["2026-07-28"],
                   for dual ["2025-11-25","2026-07-28"].
serverInfo         default {"name":"fake","version":"1.0.0"} (legacy InitializeResult.serverInfo;
                   modern discover result _meta["io.modelcontextprotocol/serverInfo"]).
serverInfoMeta     "discover" (default): only the discover result carries serverInfo in _meta;
                   "all": every modern result does.
instructions       string, or absent/null for none.
capabilities       verbatim if given. Default derived: tools (or generateTools/endlessCursor)
                   -> tools {listChanged:true}; prompts -> prompts {listChanged:true}; resources
                   or resourceTemplates -> resources {subscribe:true, listChanged:true};
                   prompts or resourceTemplates -> completions {}.
strictCapabilities true: methods of a capability that is not advertised get -32601
                   (default false: every list is answered, empty if nothing is configured).
tools, prompts, resources, resourceTemplates
                   arrays of item objects, returned verbatim (keys: name, name, uri, uriTemplate).
generateTools      N: append N synthetic tools tool_0000, tool_0001, ... (small schemas).
behaviors          {toolName: behavior}: overrides the name-prefix rule (see below).
pageSize           items per page of every list (default 0 = one page). Cursors are opaque
                   base64 strings; a bad cursor gets -32602.
ttlMs, cacheScope  modern caching fields (default 60000, "public").
clientRequestTimeoutMs
                   how long sample/elicit/roots wait for the client (default 30000).
transcript         path: append one JSON line per event: {"event":"start","pid","argv"},
                   {"event":"recv","msg":...} for every message read, {"event":"exit","code"}.
rootsOnInitialized true: on notifications/initialized, send roots/list (id
                   "fake-roots-initialized") to the client; its answer is in the transcript.
verbose            true: log traffic summaries to stderr.
batchAnswers       true: once initialize negotiated 2025-03-26 (the one version with JSON-RPC
                   batches), every answer is sent as a batch: [notifications/message, answer].
startDelayMs       sleep this long after start, before reading anything (a slow first start,
                   such as a package download by uvx or npx).
listDelayMs        sleep this long before answering each page of a list.
hostile            dict of misbehaviours. METHOD values may be a string, a list, or "*":
  nonJsonLineBefore: METHOD   write a line that is not JSON before answering METHOD.
  hugeLineBytes: N, hugeLineOn: METHOD
                              answer METHOD with one line of exactly N bytes (excluding "\\n"),
                              streamed in 64 KiB chunks: tools/list pads the first tool's
                              description, other methods pad result._meta["fake/padding"].
  hangOn: METHOD              never answer METHOD; keep reading.
  exitOn: METHOD              exit(3) on receiving METHOD (also matches notifications);
  exitOnPage: K               ... only when the list request asks for page K (first page = 1).
  duplicateNames: true        tools list ends with a copy of its first tool.
  endlessCursor: true         tools/list never ends: every page has one new tool
                              (endless_000000, ...) and a fresh nextCursor.
  repeatCursor: true          tools/list: page 2 returns the same nextCursor as page 1 (page 1
                              always has a nextCursor; pageSize 0 counts as 1).
  hugeCursorBytes: N          every nextCursor of every list is padded with "~" to N bytes (one
                              that is longer already stays as it is); a cursor sent back is
                              unpadded first, so the lists page as usual (set pageSize).
  exitOnNonInitialize: true   legacy: exit(1) at once if the first message is not initialize.
  silentOnDiscover: true      ignore server/discover without answering (any era).
  stubborn: true              ignore SIGTERM, and on stdin EOF keep running (sleeping) until
                              killed: a wedged server that only SIGKILL ends.
  discoverError: CODE         answer server/discover with this error code (any era); -32022
                              carries data {supported, requested}, -32021 data
                              {requiredCapabilities: {}}; override with discoverErrorData.
  discoverResult: {...}       answer server/discover with exactly this result (any era).
  initializeError: CODE       modern: error code for initialize (default -32022 with data
                              {supported, requested}).
  stderrLines: [..]           print these lines to stderr at start.
  bannerLines: [..]           print these lines to stdout at start, before reading anything
                              (a banner that is not JSON-RPC).
  stderrFloodBytes: N         at start, on a thread (serving goes on): write N bytes of "x"
                              to stderr without a newline, then "\nmcp_fake: stderr flood done\n".
  exitAtStart: CODE           print stderrLines, then exit with CODE before reading anything.
  idMismatch: true            before each tools/list answer, send an answer with a wrong id
                              (an int id N becomes the string "N", a string id gets "-wrong")
                              listing a decoy tool WRONG_ID_DECOY.
  floodNotifications: N       send N notifications/message before answering tools/list.
drift              {"afterCalls": K, "set": {...}}: once the K-th tools/call (K >= 1) has been
                   answered, shallow-merge `set` into the live scenario, then announce it:
                   legacy (or dual after an initialize): notifications/<kind>/list_changed for
                   tools/prompts/resources as touched by `set` (tools if none);
                   modern: the same notifications on every open subscriptions/listen stream
                   that asked for that kind, tagged with _meta subscriptionId = listen id.

tools/call behaviour: behaviors[name], else the first of these the tool name starts with,
else echo. A tool must be listed; an unknown tool gets -32602.
  echo      text: json.dumps(arguments, sort_keys=True)
  add       (behaviors map only) sum of the numeric argument values: text + structuredContent
            {"sum": n}
  env       text: JSON array of the sorted NAMES of the environment the process was started
            with (/proc/self/environ when readable; never values)
  progress  with _meta.progressToken: 3 notifications/progress first; text "done"
  slow      sleep arguments.ms (default 1000) without blocking the reader; a
            notifications/cancelled for it suppresses the answer. With arguments.log, then
            send notifications/message (data = log) and, with _meta.progressToken, one
            notifications/progress before answering
  big       text of arguments.bytes (default 1024) "x" characters, streamed
  error     isError result (text arguments.message or "fake tool error")
  sample / elicit / roots
            legacy: after arguments.delayMs (default 0), send sampling/createMessage /
            elicitation/create / roots/list to the client,
            then answer with its result as JSON text (an error answer or a timeout gives an
            isError result). Modern (MRTR): without the matching clientCapabilities key
            (sampling / elicitation / roots) -32021; otherwise resultType "input_required" with
            inputRequests {"input": {...}} and requestState "fake-state:<tool>"; the retry with
            inputResponses gets JSON text of inputResponses.
  update    (behaviors map only) notifications/resources/updated for arguments.uri or every
            subscribed URI (legacy subscribe / modern listen resourceSubscriptions); text
            "updated N"
  crash     exit(5) without answering
  raw       (behaviors map only) write arguments.line verbatim as the whole answer, with each
            "@ID@" replaced by the request's id as JSON: for answers a well-behaved server would
            never write (duplicate keys, members in any order, ids deep inside a result)

Other methods: prompts/get (messages with one user text; unknown prompt or a missing required
argument -32602), resources/read (listed uri or template match -> text "contents of URI";
otherwise legacy -32002, modern -32602), resources/subscribe and unsubscribe (legacy: {}),
completion/complete (empty completion), ping and logging/setLevel (legacy: {}), notifications
ignored (except notifications/cancelled and notifications/initialized), unknown method -32601,
invalid JSON -32700, a batch (JSON array) or a malformed request -32600.
"""

import base64
import copy
import json
import os
import re
import signal
import sys
import threading
import time

MODERN = "2026-07-28"
DEFAULT_LEGACY_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_SERVERINFO = "io.modelcontextprotocol/serverInfo"
META_SUBID = "io.modelcontextprotocol/subscriptionId"
PAD_MARKER = "@@MCP-FAKE-PADDING@@"
CHUNK = 64 * 1024

LIST_METHODS = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
PREFIX_BEHAVIORS = ["echo", "env", "progress", "slow", "big", "error", "sample", "elicit",
                    "roots", "crash"]
ALL_BEHAVIORS = set(PREFIX_BEHAVIORS) | {"add", "update", "raw"}
THREADED = {"slow", "sample", "elicit", "roots"}
METHOD_CAPABILITY = {
    "tools/list": "tools", "tools/call": "tools",
    "prompts/list": "prompts", "prompts/get": "prompts",
    "resources/list": "resources", "resources/templates/list": "resources",
    "resources/read": "resources", "resources/subscribe": "resources",
    "resources/unsubscribe": "resources", "completion/complete": "completions",
    "logging/setLevel": "logging",
}


class RpcError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def idkey(value):
    return dumps(value)


def method_matches(knob, method):
    if knob is None or knob is False:
        return False
    if knob == "*":
        return True
    if isinstance(knob, list):
        return method in knob or "*" in knob
    return knob == method


def encode_cursor(kind, offset):
    return base64.urlsafe_b64encode(f"fake:{kind}:{offset}".encode()).decode()


def decode_cursor(kind, cursor):
    if not isinstance(cursor, str):
        raise RpcError(-32602, "Invalid cursor: not a string")
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        tag, ckind, offset = text.split(":")
        offset = int(offset)
    except Exception:
        raise RpcError(-32602, f"Invalid cursor: {cursor!r}") from None
    if tag != "fake" or ckind != kind or offset < 0:
        raise RpcError(-32602, f"Invalid cursor for {kind}: {cursor!r}")
    return offset


def template_regex(template):
    out, pos = "", 0
    for m in re.finditer(r"\{([^}]*)\}", template):
        out += re.escape(template[pos:m.start()])
        op = m.group(1)[:1]
        out += ".*" if op in "+#./;?&" else "[^/]*"
        pos = m.end()
    out += re.escape(template[pos:])
    return re.compile(out)


def environment_names():
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
        names = {entry.split(b"=", 1)[0].decode("utf-8", "replace")
                 for entry in raw.split(b"\0") if entry}
    except OSError:
        # Python may add LC_CTYPE itself (PEP 538); /proc shows what we were given.
        names = set(os.environ)
    return sorted(names)


def synthetic_tool(i):
    return {
        "name": f"tool_{i:04d}",
        "description": f"Synthetic tool number {i}",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}},
    }


class Server:
    def __init__(self, scenario, argv):
        self.sc = scenario
        self.argv = argv
        self.state = threading.RLock()
        self.wlock = threading.Lock()
        self.out = sys.stdout.buffer
        self.first_seen = False
        self.legacy_session = False
        self.batching = False
        self.calls = 0
        self.drift_done = False
        self.next_out_id = 0
        self.pending = {}    # idkey(our request id) -> [Event, response]
        self.inflight = {}   # idkey(client request id) -> cancel Event
        self.listens = {}    # idkey(listen id) -> (listen id, honoured filter)
        self.subscribed = set()
        self.transcript_lock = threading.Lock()
        self.transcript = None
        path = scenario.get("transcript")
        if isinstance(path, str):
            self.transcript = open(path, "a", encoding="utf-8")

    # ---------- small helpers ----------

    def hostile(self, name, default=None):
        h = self.sc.get("hostile")
        return h.get(name, default) if isinstance(h, dict) else default

    def log(self, text):
        try:
            sys.stderr.write(f"mcp_fake: {text}\n")
            sys.stderr.flush()
        except Exception:
            pass

    def record(self, event):
        if self.transcript is None:
            return
        with self.transcript_lock:
            try:
                self.transcript.write(dumps(event) + "\n")
                self.transcript.flush()
            except Exception:
                pass

    def exit(self, code, why):
        if why:
            self.log(why)
        self.record({"event": "exit", "code": code})
        try:
            with self.wlock:
                self.out.flush()
        except Exception:
            pass
        try:
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(code)

    def write_bytes(self, *parts):
        try:
            with self.wlock:
                for p in parts:
                    self.out.write(p)
                self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            os._exit(0)

    def send(self, obj):
        if self.sc.get("verbose"):
            summary = obj.get("method") or ("error" if "error" in obj else "result")
            self.log(f"send {summary} id={obj.get('id')!r}")
        if self.batching and "method" not in obj:
            note = {"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": "batched with an answer"}}
            obj = [note, obj]
        self.write_bytes(dumps(obj).encode("utf-8"), b"\n")

    def send_padded(self, obj, pad_len):
        """Write obj (which contains PAD_MARKER once) with the marker replaced by pad_len 'x'."""
        text = dumps(obj)
        i = text.index(PAD_MARKER)
        prefix = text[:i].encode("utf-8")
        suffix = text[i + len(PAD_MARKER):].encode("utf-8")
        chunk = b"x" * CHUNK
        try:
            with self.wlock:
                self.out.write(prefix)
                left = pad_len
                while left > 0:
                    n = min(left, CHUNK)
                    self.out.write(chunk if n == CHUNK else chunk[:n])
                    left -= n
                self.out.write(suffix + b"\n")
                self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            os._exit(0)

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def send_error(self, msg_id, code, message, data=None):
        err = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        self.send({"jsonrpc": "2.0", "id": msg_id, "error": err})

    # ---------- scenario views ----------

    def era_mode(self):
        era = self.sc.get("era", "legacy")
        return era if era in ("legacy", "modern", "dual") else "legacy"

    def server_info(self):
        return self.sc.get("serverInfo", {"name": "fake", "version": "1.0.0"})

    def supported_versions(self):
        if "supportedVersions" in self.sc:
            return self.sc["supportedVersions"]
        if self.era_mode() == "dual":
            return ["2025-11-25", MODERN]
        return [MODERN]

    def items(self, kind):
        items = list(self.sc.get(kind) or [])
        if kind == "tools":
            items += [synthetic_tool(i) for i in range(int(self.sc.get("generateTools", 0) or 0))]
            if self.hostile("duplicateNames"):
                if items:
                    items.append(copy.deepcopy(items[0]))
                else:
                    dup = {"name": "dup", "inputSchema": {"type": "object"}}
                    items += [dup, copy.deepcopy(dup)]
        return items

    def capabilities(self):
        if "capabilities" in self.sc:
            return self.sc["capabilities"]
        caps = {}
        if self.items("tools") or self.hostile("endlessCursor"):
            caps["tools"] = {"listChanged": True}
        if self.items("prompts"):
            caps["prompts"] = {"listChanged": True}
        if self.items("resources") or self.items("resourceTemplates"):
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self.items("prompts") or self.items("resourceTemplates"):
            caps["completions"] = {}
        return caps

    def instructions(self):
        value = self.sc.get("instructions")
        return value if isinstance(value, str) else None

    def page_size(self):
        return int(self.sc.get("pageSize", 0) or 0)

    def behavior_for(self, name):
        behaviors = self.sc.get("behaviors") or {}
        if name in behaviors:
            b = behaviors[name]
            if b in ALL_BEHAVIORS:
                return b
            self.log(f"unknown behavior {b!r} for {name!r}; using echo")
            return "echo"
        for prefix in PREFIX_BEHAVIORS:
            if name.startswith(prefix):
                return prefix
        return "echo"

    # ---------- main dispatch ----------

    def handle_line(self, raw):
        try:
            msg = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            self.record({"event": "recv-invalid", "bytes": len(raw)})
            self.send_error(None, -32700, "Parse error")
            return
        self.record({"event": "recv", "msg": msg})
        if self.sc.get("verbose"):
            self.log(f"recv {dumps(msg)[:300]}")
        if isinstance(msg, list):
            self.send_error(None, -32600, "Invalid Request: batches are not supported")
            return
        if not isinstance(msg, dict):
            self.send_error(None, -32600, "Invalid Request: not an object")
            return
        first = not self.first_seen
        self.first_seen = True
        if "method" not in msg:
            if "id" in msg and ("result" in msg or "error" in msg):
                self.route_response(msg)
            else:
                self.send_error(msg.get("id"), -32600, "Invalid Request")
            return
        method = msg["method"]
        is_request = "id" in msg
        msg_id = msg.get("id")
        if not isinstance(method, str) or msg.get("jsonrpc") != "2.0":
            if is_request:
                self.send_error(msg_id, -32600, "Invalid Request")
            return
        if is_request and (isinstance(msg_id, bool) or not isinstance(msg_id, (str, int))):
            self.send_error(None, -32600, "Invalid Request: id must be a string or an integer")
            return
        params = msg.get("params")
        if params is not None and not isinstance(params, dict):
            if is_request:
                self.send_error(msg_id, -32602, "Invalid params: params must be an object")
            return
        params = params or {}

        if (first and self.era_mode() == "legacy" and self.hostile("exitOnNonInitialize")
                and method != "initialize"):
            self.exit(1, f"expected initialize as the first message, got {method}; exiting")
        if method_matches(self.hostile("exitOn"), method):
            want = self.hostile("exitOnPage")
            if want is None or (is_request and self.page_of(method, params) == want):
                self.exit(3, f"hostile exitOn {method}")
        if not is_request:
            self.handle_notification(method, params)
            return
        if method_matches(self.hostile("hangOn"), method):
            return
        if method_matches(self.hostile("nonJsonLineBefore"), method):
            self.write_bytes(b"this line is not JSON (mcp_fake nonJsonLineBefore)\n")
        try:
            if self.era_for(method, params) == "modern":
                self.handle_modern(msg_id, method, params)
            else:
                self.handle_legacy(msg_id, method, params)
        except RpcError as e:
            self.send_error(msg_id, e.code, e.message, e.data)

    def era_for(self, method, params):
        era = self.era_mode()
        if era != "dual":
            return era
        if method == "initialize":
            return "legacy"
        if method in ("server/discover", "subscriptions/listen"):
            return "modern"
        meta = params.get("_meta")
        return "modern" if isinstance(meta, dict) and META_VERSION in meta else "legacy"

    def handle_notification(self, method, params):
        if method == "notifications/cancelled":
            key = idkey(params.get("requestId"))
            with self.state:
                ev = self.inflight.get(key)
                self.listens.pop(key, None)
            if ev is not None:
                ev.set()
        elif method == "notifications/initialized":
            self.legacy_session = True
            if self.sc.get("rootsOnInitialized"):
                # As server-filesystem does: ask the client's roots at once (the answer is in
                # the transcript).
                self.send({"jsonrpc": "2.0", "id": "fake-roots-initialized",
                           "method": "roots/list"})

    def route_response(self, msg):
        with self.state:
            slot = self.pending.get(idkey(msg["id"]))
        if slot is None:
            self.log(f"response for unknown id {msg['id']!r} ignored")
            return
        slot[1] = msg
        slot[0].set()

    def reply(self, msg_id, method, result, modern, cacheable=False):
        if modern:
            result.setdefault("resultType", "complete")
            if cacheable and result["resultType"] == "complete":
                result.setdefault("ttlMs", self.sc.get("ttlMs", 60000))
                result.setdefault("cacheScope", self.sc.get("cacheScope", "public"))
            if self.sc.get("serverInfoMeta") == "all":
                result.setdefault("_meta", {})[META_SERVERINFO] = self.server_info()
        response = {"jsonrpc": "2.0", "id": msg_id, "result": result}
        size = self.hostile("hugeLineBytes")
        if size and method_matches(self.hostile("hugeLineOn"), method):
            tools = result.get("tools") if method == "tools/list" else None
            if tools:
                tools[0] = dict(tools[0], description=PAD_MARKER)
            else:
                result.setdefault("_meta", {})["fake/padding"] = PAD_MARKER
            base = len(dumps(response).encode("utf-8")) - len(PAD_MARKER)
            self.send_padded(response, max(0, int(size) - base))
            return
        self.send(response)

    # ---------- discover / era-specific ----------

    def discover_override(self, msg_id):
        """Hostile discover knobs, any era. Returns True when the request was dealt with."""
        if self.hostile("silentOnDiscover"):
            return True
        if isinstance(self.hostile("discoverResult"), dict):
            self.send({"jsonrpc": "2.0", "id": msg_id, "result": self.hostile("discoverResult")})
            return True
        code = self.hostile("discoverError")
        if code is not None:
            data = self.hostile("discoverErrorData")
            if data is None and code == -32022:
                data = {"supported": self.supported_versions(), "requested": MODERN}
            if data is None and code == -32021:
                data = {"requiredCapabilities": {}}
            self.send_error(msg_id, int(code), f"mcp_fake discoverError {code}", data)
            return True
        return False

    def handle_legacy(self, msg_id, method, params):
        if method == "server/discover":
            if not self.discover_override(msg_id):
                self.send_error(msg_id, -32601, "Method not found: server/discover")
            return
        if method == "initialize":
            requested = params.get("protocolVersion")
            versions = self.sc.get("legacyVersions", DEFAULT_LEGACY_VERSIONS)
            version = requested if requested in versions else self.sc.get("protocolVersion",
                                                                          "2025-11-25")
            result = {"protocolVersion": version, "capabilities": self.capabilities(),
                      "serverInfo": self.server_info()}
            if self.instructions() is not None:
                result["instructions"] = self.instructions()
            self.legacy_session = True
            self.reply(msg_id, method, result, modern=False)
            self.batching = bool(self.sc.get("batchAnswers")) and version == "2025-03-26"
            return
        self.check_capability(method)
        if method in ("ping", "logging/setLevel"):
            self.reply(msg_id, method, {}, modern=False)
        elif method in ("resources/subscribe", "resources/unsubscribe"):
            uri = params.get("uri")
            if not isinstance(uri, str):
                raise RpcError(-32602, "Invalid params: uri must be a string")
            with self.state:
                if method == "resources/subscribe":
                    self.subscribed.add(uri)
                else:
                    self.subscribed.discard(uri)
            self.reply(msg_id, method, {}, modern=False)
        elif method == "subscriptions/listen":
            raise RpcError(-32601, f"Method not found: {method}")
        else:
            self.handle_common(msg_id, method, params, modern=False)

    def check_modern_meta(self, params):
        meta = params.get("_meta")
        supported = self.supported_versions()
        missing = [k for k in (META_VERSION, META_CAPS)
                   if not isinstance(meta, dict) or k not in meta]
        if missing:
            raise RpcError(-32602, "Invalid params: missing required _meta " + ", ".join(missing),
                           {"missing": missing, "supported": supported})
        if not isinstance(meta[META_CAPS], dict):
            raise RpcError(-32602, f"Invalid params: _meta {META_CAPS} must be an object")
        requested = meta[META_VERSION]
        if requested not in supported:
            raise RpcError(-32022, "Unsupported protocol version",
                           {"supported": supported, "requested": requested})
        return meta

    def handle_modern(self, msg_id, method, params):
        if method == "initialize":
            code = int(self.hostile("initializeError", -32022))
            data = {"supported": self.supported_versions(),
                    "requested": params.get("protocolVersion")}
            raise RpcError(code, "This server speaks only MCP " + ", ".join(
                self.supported_versions()) + ": use server/discover, not initialize", data)
        if method == "server/discover" and self.discover_override(msg_id):
            return
        self.check_modern_meta(params)
        if method == "server/discover":
            result = {"resultType": "complete", "supportedVersions": self.supported_versions(),
                      "capabilities": self.capabilities()}
            if self.instructions() is not None:
                result["instructions"] = self.instructions()
            result["_meta"] = {META_SERVERINFO: self.server_info()}
            self.reply(msg_id, method, result, modern=True, cacheable=True)
        elif method == "subscriptions/listen":
            self.listen(msg_id, params)
        elif method in ("ping", "logging/setLevel", "resources/subscribe",
                        "resources/unsubscribe", "initialize"):
            raise RpcError(-32601, f"Method not found: {method} (removed in {MODERN})")
        else:
            self.check_capability(method)
            self.handle_common(msg_id, method, params, modern=True)

    def check_capability(self, method):
        if not self.sc.get("strictCapabilities"):
            return
        cap = METHOD_CAPABILITY.get(method)
        if cap is not None and cap not in self.capabilities():
            raise RpcError(-32601, f"Method not found: {method} (capability {cap} not advertised)")

    def listen(self, msg_id, params):
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            raise RpcError(-32602, "Invalid params: notifications must be an object")
        caps = self.capabilities()
        honoured = {}
        for kind in ("tools", "prompts", "resources"):
            key = f"{kind}ListChanged"
            cap = caps.get(kind)
            if wanted.get(key) is True and isinstance(cap, dict) and cap.get("listChanged"):
                honoured[key] = True
        subs = wanted.get("resourceSubscriptions")
        if isinstance(subs, list) and isinstance(caps.get("resources"), dict):
            honoured["resourceSubscriptions"] = subs
        with self.state:
            self.listens[idkey(msg_id)] = (msg_id, honoured)
        self.notify("notifications/subscriptions/acknowledged",
                    {"_meta": {META_SUBID: msg_id}, "notifications": honoured})

    # ---------- methods shared by both eras ----------

    def handle_common(self, msg_id, method, params, modern):
        if method in LIST_METHODS:
            self.list_method(msg_id, method, params, modern)
        elif method == "tools/call":
            self.tools_call(msg_id, params, modern)
        elif method == "prompts/get":
            self.prompts_get(msg_id, params, modern)
        elif method == "resources/read":
            self.resources_read(msg_id, params, modern)
        elif method == "completion/complete":
            self.reply(msg_id, method, {"completion": {"values": [], "total": 0, "hasMore": False}},
                       modern)
        else:
            raise RpcError(-32601, f"Method not found: {method}")

    def page_of(self, method, params):
        kind = LIST_METHODS.get(method)
        cursor = self.unpad_cursor(params.get("cursor"))
        if kind is None or cursor is None:
            return 1
        try:
            if kind == "tools" and self.hostile("endlessCursor"):
                return decode_cursor("endless", cursor) + 1
            if kind == "tools" and self.hostile("repeatCursor"):
                return 2
            return decode_cursor(kind, cursor) // max(1, self.page_size()) + 1
        except RpcError:
            return None

    def list_page(self, kind, params):
        delay = self.sc.get("listDelayMs")
        if delay:
            time.sleep(float(delay) / 1000.0)
        cursor = self.unpad_cursor(params.get("cursor"))
        if kind == "tools" and self.hostile("endlessCursor"):
            k = 0 if cursor is None else decode_cursor("endless", cursor)
            tool = {"name": f"endless_{k:06d}", "description": f"Endless page {k + 1}",
                    "inputSchema": {"type": "object"}}
            return [tool], encode_cursor("endless", k + 1)
        items = self.items(kind)
        size = self.page_size()
        offset = 0 if cursor is None else decode_cursor(kind, cursor)
        if offset > len(items):
            raise RpcError(-32602, f"Invalid cursor: {cursor!r}")
        if kind == "tools" and self.hostile("repeatCursor"):
            size = max(1, size)
            return items[offset:offset + size], encode_cursor(kind, size)
        if size <= 0:
            return items[offset:], None
        end = offset + size
        return items[offset:end], (encode_cursor(kind, end) if end < len(items) else None)

    def pad_cursor(self, cursor):
        """hostile.hugeCursorBytes: the cursor padded with "~" (not in base64's alphabet)."""
        size = int(self.hostile("hugeCursorBytes", 0) or 0)
        if cursor is None or len(cursor) >= size:
            return cursor
        return cursor + "~" * (size - len(cursor))

    def unpad_cursor(self, cursor):
        if isinstance(cursor, str) and self.hostile("hugeCursorBytes"):
            return cursor.rstrip("~")
        return cursor

    def list_method(self, msg_id, method, params, modern):
        kind = LIST_METHODS[method]
        page, next_cursor = self.list_page(kind, params)
        result = {kind: copy.deepcopy(page)}
        if next_cursor is not None:
            result["nextCursor"] = self.pad_cursor(next_cursor)
        if kind == "tools":
            for i in range(int(self.hostile("floodNotifications", 0) or 0)):
                self.notify("notifications/message",
                            {"level": "info", "logger": "mcp_fake", "data": f"flood {i}"})
            if self.hostile("idMismatch"):
                wrong = str(msg_id) if isinstance(msg_id, int) else f"{msg_id}-wrong"
                decoy = {"name": "WRONG_ID_DECOY", "inputSchema": {"type": "object"}}
                self.send({"jsonrpc": "2.0", "id": wrong, "result": {"tools": [decoy]}})
        self.reply(msg_id, method, result, modern, cacheable=True)

    def prompts_get(self, msg_id, params, modern):
        name = params.get("name")
        prompt = next((p for p in self.items("prompts") if p.get("name") == name), None)
        if prompt is None:
            raise RpcError(-32602, f"Unknown prompt: {name!r}")
        args = params.get("arguments") or {}
        if not isinstance(args, dict):
            raise RpcError(-32602, "Invalid params: arguments must be an object")
        for a in prompt.get("arguments") or []:
            if a.get("required") and a.get("name") not in args:
                raise RpcError(-32602, f"Missing required argument {a.get('name')!r}")
        text = f"Prompt {name}"
        if args:
            text += " with arguments " + json.dumps(args, sort_keys=True)
        result = {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
        if isinstance(prompt.get("description"), str):
            result = {"description": prompt["description"], **result}
        self.reply(msg_id, "prompts/get", result, modern)

    def resources_read(self, msg_id, params, modern):
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(-32602, "Invalid params: uri must be a string")
        found = next((r for r in self.items("resources") if r.get("uri") == uri), None)
        if found is None:
            found = next((t for t in self.items("resourceTemplates")
                          if isinstance(t.get("uriTemplate"), str)
                          and template_regex(t["uriTemplate"]).fullmatch(uri)), None)
        if found is None:
            if modern:
                raise RpcError(-32602, f"Resource not found: {uri}", {"uri": uri})
            raise RpcError(-32002, f"Resource not found: {uri}", {"uri": uri})
        content = {"uri": uri, "mimeType": found.get("mimeType", "text/plain"),
                   "text": f"contents of {uri}"}
        self.reply(msg_id, "resources/read", {"contents": [content]}, modern, cacheable=True)

    # ---------- tools/call ----------

    def tools_call(self, msg_id, params, modern):
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(-32602, "Invalid params: name must be a string")
        if not any(t.get("name") == name for t in self.items("tools")):
            raise RpcError(-32602, f"Unknown tool: {name}")
        args = params.get("arguments")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise RpcError(-32602, "Invalid params: arguments must be an object")
        behavior = self.behavior_for(name)
        with self.state:
            self.calls += 1
            number = self.calls
        if behavior == "crash":
            self.exit(5, f"crash tool {name} called")
        job = (msg_id, name, args, params, modern, behavior, number)
        if behavior == "slow" or (behavior in THREADED and not modern):
            cancel = threading.Event()
            with self.state:
                self.inflight[idkey(msg_id)] = cancel
            threading.Thread(target=self.run_call, args=job + (cancel,), daemon=True).start()
        else:
            self.run_call(*job, None)

    def run_call(self, msg_id, name, args, params, modern, behavior, number, cancel):
        try:
            try:
                result = self.call_behavior(msg_id, name, args, params, modern, behavior, cancel)
                if result is not None:
                    self.reply(msg_id, "tools/call", result, modern)
            except RpcError as e:
                self.send_error(msg_id, e.code, e.message, e.data)
            self.maybe_drift(number)
        finally:
            if cancel is not None:
                with self.state:
                    self.inflight.pop(idkey(msg_id), None)

    def call_behavior(self, msg_id, name, args, params, modern, behavior, cancel):
        def text(t, **extra):
            return {"content": [{"type": "text", "text": t}], **extra}

        if behavior == "echo":
            return text(json.dumps(args, sort_keys=True))
        if behavior == "add":
            nums = [v for v in args.values()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)]
            total = sum(nums)
            return text(json.dumps(total), structuredContent={"sum": total})
        if behavior == "env":
            return text(json.dumps(environment_names()))
        if behavior == "error":
            return text(str(args.get("message", "fake tool error")), isError=True)
        if behavior == "progress":
            meta = params.get("_meta")
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            if token is not None:
                for i in (1, 2, 3):
                    self.notify("notifications/progress", {"progressToken": token, "progress": i,
                                                           "total": 3, "message": f"step {i}/3"})
            return text("done")
        if behavior == "raw":
            line = str(args.get("line", "")).replace("@ID@", dumps(msg_id))
            self.write_bytes(line.encode("utf-8"), b"\n")
            return None
        if behavior == "big":
            size = int(args.get("bytes", 1024))
            response = {"jsonrpc": "2.0", "id": msg_id,
                        "result": text(PAD_MARKER)}
            if modern:
                response["result"]["resultType"] = "complete"
            self.send_padded(response, size)
            return None
        if behavior == "slow":
            ms = float(args.get("ms", 1000))
            if cancel is None:
                time.sleep(ms / 1000.0)
            elif cancel.wait(ms / 1000.0):
                self.log(f"slow call {msg_id!r} cancelled; not answering")
                return None
            if "log" in args:
                self.notify("notifications/message", {"level": "info", "data": args["log"]})
                meta = params.get("_meta")
                token = meta.get("progressToken") if isinstance(meta, dict) else None
                if token is not None:
                    self.notify("notifications/progress",
                                {"progressToken": token, "progress": 1, "total": 1})
            return text(f"slept {int(ms)} ms")
        if behavior == "update":
            uri = args.get("uri")
            with self.state:
                uris = [uri] if isinstance(uri, str) else sorted(self.subscribed)
                streams = list(self.listens.values())
            count = 0
            for u in uris:
                if not modern:
                    self.notify("notifications/resources/updated", {"uri": u})
                    count += 1
                for sub_id, honoured in streams:
                    if u in (honoured.get("resourceSubscriptions") or []):
                        self.notify("notifications/resources/updated",
                                    {"uri": u, "_meta": {META_SUBID: sub_id}})
                        count += 1
            return text(f"updated {count}")
        if behavior in ("sample", "elicit", "roots"):
            method, req_params, cap = self.client_request(behavior, args)
            if modern:
                return self.mrtr(name, params, method, req_params, cap)
            delay = float(args.get("delayMs", 0)) / 1000.0
            if delay > 0 and cancel is not None and cancel.wait(delay):
                return None
            answer = self.ask_client(method, req_params, cancel)
            if answer is None:
                return None
            if "result" in answer:
                return text(json.dumps(answer["result"], sort_keys=True))
            return text(json.dumps({"error": answer.get("error")}, sort_keys=True), isError=True)
        raise RpcError(-32603, f"Internal error: behavior {behavior}")

    def client_request(self, behavior, args):
        if behavior == "sample":
            return ("sampling/createMessage", {
                "messages": [{"role": "user", "content": {
                    "type": "text", "text": str(args.get("prompt", "Say hello"))}}],
                "maxTokens": int(args.get("maxTokens", 100))}, "sampling")
        if behavior == "elicit":
            return ("elicitation/create", {
                "message": str(args.get("message", "Please confirm")),
                "requestedSchema": {"type": "object",
                                    "properties": {"ok": {"type": "boolean", "title": "OK"}},
                                    "required": ["ok"]}}, "elicitation")
        return ("roots/list", {}, "roots")

    def mrtr(self, name, params, method, req_params, cap):
        responses = params.get("inputResponses")
        if responses is not None:
            return {"content": [{"type": "text", "text": json.dumps(responses, sort_keys=True)}]}
        client_caps = params["_meta"].get(META_CAPS) or {}
        if cap not in client_caps:
            required = {cap: {"form": {}}} if cap == "elicitation" else {cap: {}}
            raise RpcError(-32021, f"This call needs the client capability {cap}",
                           {"requiredCapabilities": required})
        if method == "elicitation/create":
            req_params = dict(req_params, mode="form")
        return {"resultType": "input_required",
                "inputRequests": {"input": {"method": method, "params": req_params}},
                "requestState": f"fake-state:{name}"}

    def ask_client(self, method, req_params, cancel):
        with self.state:
            self.next_out_id += 1
            out_id = f"fake-{self.next_out_id}"
            slot = [threading.Event(), None]
            self.pending[idkey(out_id)] = slot
        self.send({"jsonrpc": "2.0", "id": out_id, "method": method, "params": req_params})
        deadline = time.monotonic() + float(self.sc.get("clientRequestTimeoutMs", 30000)) / 1000
        try:
            while not slot[0].wait(0.05):
                if cancel is not None and cancel.is_set():
                    self.notify("notifications/cancelled",
                                {"requestId": out_id, "reason": "tool call cancelled"})
                    return None
                if time.monotonic() > deadline:
                    self.notify("notifications/cancelled",
                                {"requestId": out_id, "reason": "timeout"})
                    return {"error": {"code": -32001, "message": f"{method}: client timed out"}}
            return slot[1]
        finally:
            with self.state:
                self.pending.pop(idkey(out_id), None)

    # ---------- drift ----------

    def maybe_drift(self, number):
        drift = self.sc.get("drift")
        if not isinstance(drift, dict):
            return
        with self.state:
            if self.drift_done or number < max(1, int(drift.get("afterCalls", 1))):
                return
            self.drift_done = True
            changes = copy.deepcopy(drift.get("set") or {})
            self.sc = {**self.sc, **changes}
            kinds = []
            if {"tools", "generateTools"} & changes.keys():
                kinds.append("tools")
            if "prompts" in changes:
                kinds.append("prompts")
            if {"resources", "resourceTemplates"} & changes.keys():
                kinds.append("resources")
            kinds = kinds or ["tools"]
            streams = list(self.listens.values())
            legacy = self.era_mode() == "legacy" or (self.era_mode() == "dual"
                                                     and self.legacy_session)
        self.log(f"drift applied after {number} call(s): {sorted(changes)}")
        for kind in kinds:
            if legacy:
                self.notify(f"notifications/{kind}/list_changed")
            for sub_id, honoured in streams:
                if honoured.get(f"{kind}ListChanged"):
                    self.notify(f"notifications/{kind}/list_changed",
                                {"_meta": {META_SUBID: sub_id}})

    # ---------- loop ----------

    def flood_stderr(self, total):
        """hostile.stderrFloodBytes: N bytes of stderr without a newline, then a marker line."""
        chunk = b"x" * (1 << 20)
        left = total
        try:
            while left > 0:
                n = min(left, len(chunk))
                view = memoryview(chunk)[:n]
                while view:
                    view = view[os.write(2, view):]
                left -= n
            os.write(2, b"\nmcp_fake: stderr flood done\n")
        except OSError:
            pass

    def run(self):
        self.record({"event": "start", "pid": os.getpid(), "argv": self.argv})
        for line in self.hostile("stderrLines") or []:
            sys.stderr.write(f"{line}\n")
        sys.stderr.flush()
        flood = int(self.hostile("stderrFloodBytes", 0) or 0)
        if flood:
            threading.Thread(target=self.flood_stderr, args=(flood,), daemon=True).start()
        for line in self.hostile("bannerLines") or []:
            self.write_bytes(f"{line}\n".encode())
        code = self.hostile("exitAtStart")
        if code is not None:
            self.exit(int(code), None)
        delay = self.sc.get("startDelayMs")
        if delay:
            time.sleep(float(delay) / 1000.0)
        if self.hostile("stubborn"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stdin = sys.stdin.buffer
        while True:
            try:
                raw = stdin.readline()
            except (OSError, ValueError):
                break
            if not raw:
                break
            if raw.strip():
                self.handle_line(raw)
        while self.hostile("stubborn"):
            time.sleep(3600)
        self.exit(0, "stdin closed" if self.sc.get("verbose") else None)


def load_scenario(argv):
    if len(argv) < 2:
        return {}
    try:
        with open(argv[1], "rb") as f:
            scenario = json.loads(f.read())
    except (OSError, ValueError) as e:
        sys.stderr.write(f"mcp_fake: cannot read scenario {argv[1]}: {e}\n")
        sys.exit(2)
    if not isinstance(scenario, dict):
        sys.stderr.write(f"mcp_fake: scenario {argv[1]} must be a JSON object\n")
        sys.exit(2)
    return scenario


def main():
    scenario = load_scenario(sys.argv)
    Server(scenario, sys.argv).run()


if __name__ == "__main__":
    main()
