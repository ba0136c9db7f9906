#!/usr/bin/env bash
# Regenerates the committed seed corpora in fuzz/corpus/<target>/ from real sources: lockfiles
# written by `mcpsum lock` from the fake server, RFC 8785's own examples, the fake server's
# JSON-RPC traffic, the CONNECT requests curl and Python send to a proxy, and ClientHellos made
# by rustls, OpenSSL (through curl and Python) and a plain-HTTP client. Everything runs on
# loopback: the "proxy" here is a capture socket that never connects anywhere.
#
# The ClientHellos carry fresh random values on every run, so regenerating changes those files;
# commit them only when a seed is added or its source changed.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
corpus="$repo/fuzz/corpus"
cd "$repo"

python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)

for t in lockfile canonical framing connect allowlist client_hello; do
    rm -rf "${corpus:?}/$t"
    mkdir -p "$corpus/$t"
done

# --- lockfile: the golden fixture, fresh locks of the bundled scenarios, and one with a policy.
cp tests/fixtures/golden.mcp.lock "$corpus/lockfile/golden.mcp.lock"
cargo build --quiet --bin mcpsum
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lock() { # NAME SCENARIO OUT
    target/debug/mcpsum --lockfile "$work/$3" lock --name "$1" -- \
        "$python" "$repo/tests/servers/mcp_fake.py" "$repo/tests/servers/scenarios/$2" >/dev/null 2>&1
}
lock notes example.json legacy.mcp.lock
lock modern modern.json modern.mcp.lock
lock dual dual.json dual.mcp.lock
lock notes example.json both.mcp.lock
lock modern modern.json both.mcp.lock
# A policy is written by people and not covered by the digests: add one by hand, as a user would.
jq '.servers.notes.policy = {
      taint: {sources: ["echo", "resources:*"], sinks: ["add", "prompts:*"]},
      sandbox: {
        filesystem: {read: ["/usr/share/zoneinfo", "~/.config/notes"], write: ["${TMP}/notes"]},
        network: {allow: ["api.github.com:443", "*.example.com:443", "10.0.0.5:8080", "[::1]:9443"]}
      }
    }' "$work/both.mcp.lock" >"$work/policy.mcp.lock"
for f in legacy modern dual both policy; do
    # Commands name this checkout; keep the seeds machine-independent.
    sed "s|$repo|@REPO@|g" "$work/$f.mcp.lock" >"$corpus/lockfile/$f.mcp.lock"
    target/debug/mcpsum --lockfile "$corpus/lockfile/$f.mcp.lock" show >/dev/null
done

# --- canonical: RFC 8785's examples (3.2.2, 3.2.3, Appendix B) and the golden scenarios.
c="$corpus/canonical"
cp tests/fixtures/golden-legacy.scenario.json tests/fixtures/golden-modern.scenario.json "$c/"
cat >"$c/rfc8785-3.2.2-structures.json" <<'EOF'
{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}
EOF
cat >"$c/rfc8785-3.2.3-sorting.json" <<'EOF'
{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}
EOF
echo '[56, 1.0e+21, 1.0e-7, -0.0, 1e30, 4.50, 2e-3, 0.000000000000000000000000001]' \
    >"$c/rfc8785-numbers.json"
echo '{"\ue000": 1, "\ud800\udc00": 2, "a": {"b": [9007199254740993, 18446744073709551615, -9223372036854775808]}}' \
    >"$c/utf16-order-and-big-integers.json"
# Appendix B as text, and as the raw little-endian doubles the target also reads.
"$python" - "$c" <<'EOF'
import json, struct, sys
bits = [0x0000000000000000, 0x8000000000000000, 0x0000000000000001, 0x8000000000000001,
        0x7fefffffffffffff, 0xffefffffffffffff, 0x4340000000000000, 0xc340000000000000,
        0x4430000000000000, 0x44b52d02c7e14af5, 0x44b52d02c7e14af6, 0x44b52d02c7e14af7,
        0x444b1ae4d6e2ef4e, 0x444b1ae4d6e2ef4f, 0x444b1ae4d6e2ef50, 0x3eb0c6f7a0b5ed8c,
        0x3eb0c6f7a0b5ed8d, 0x41b3de4355555553, 0x41b3de4355555554, 0x41b3de4355555555,
        0x41b3de4355555556, 0x41b3de4355555557, 0xbecbf647612f3696, 0x43143ff3c1cb0959]
doubles = [struct.unpack("<d", struct.pack("<Q", b))[0] for b in bits]
out = sys.argv[1]
with open(f"{out}/rfc8785-appendix-b.json", "w") as f:
    f.write(json.dumps(doubles) + "\n")
with open(f"{out}/rfc8785-appendix-b.bin", "wb") as f:
    f.write(b"".join(struct.pack("<Q", b) for b in bits))
EOF

# --- framing: both directions of real sessions with the fake server, and edge cases.
session() { # SCENARIO NAME REQUESTS...
    local scenario=$1 name=$2
    shift 2
    printf '%s\n' "$@" >"$corpus/framing/$name-client.ndjson"
    "$python" tests/servers/mcp_fake.py "$repo/tests/servers/scenarios/$scenario" \
        <"$corpus/framing/$name-client.ndjson" >"$corpus/framing/$name-server.ndjson"
}
session example.json legacy \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"seed","version":"0"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2.5}}}' \
    '{"jsonrpc":"2.0","id":"x","method":"prompts/list"}' \
    '{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"notes://inbox"}}' \
    '{"jsonrpc":"2.0","id":6,"method":"no/such/method"}'
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
session modern.json modern \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{$meta}}" \
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{$meta}}" \
    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{}}"
printf '{"jsonrpc":"2.0","id":1,"result":{}}\r\n\r\n  \t\n{"jsonrpc":"2.0","method":"notifications/progress"}\r\n{"id":2}' \
    >"$corpus/framing/crlf-blank-lines-no-final-newline.ndjson"
"$python" -c 'import sys; sys.stdout.write("{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"text\":\"" + "x" * 1100 + "\"}}\n{\"jsonrpc\":\"2.0\",\"id\":10,\"result\":{}}\n")' \
    >"$corpus/framing/line-over-head-bytes.ndjson"

# --- allowlist: one entry per line, accepted and refused forms.
a="$corpus/allowlist"
printf '%s\n' api.github.com:443 'API.GitHub.com.:443' '*.example.com:443' 10.0.0.5:8080 \
    '[::1]:9000' '[2001:DB8::1]:443' xn--bcher-kva.example:1 a-b.c1:65535 localhost:8443 \
    | head -c -1 >"$a/accepted"
printf '%s\n' api.github.com api.github.com:0 api.github.com:+443 ::1:443 '[10.0.0.1]:443' \
    '[fe80::1%eth0]:443' 0.0.0.0:443 '[::]:443' 224.0.0.1:443 '*.com:443' 'a.*.example.com:443' \
    a_b.com:443 'bücher.de:443' -a.com:443 2130706433:443 0x7f.1:443 127.1:443 1.2.3.256:443 \
    | head -c -1 >"$a/refused"
printf 'api.github.com:443\napi.github.com:443\nAPI.GITHUB.COM:443' >"$a/duplicates"
# The length limits: a 63-byte label, a 253-byte name, the longest wildcard suffix (251 bytes,
# so that `x.` and the suffix still make a name), and one byte over each.
"$python" -c '
l63, l64 = "a" * 63, "b" * 64
n251, n252, n253, n254 = (".".join(["c" * 63] * 3 + ["d" * n]) for n in (59, 60, 61, 62))
print("\n".join([f"{l63}.example:443", f"{n253}:443", f"*.{n251}:443",
                 f"{l64}.example:443", f"{n254}:443", f"*.{n252}:443"]), end="")' \
    >"$a/length-limits"

# --- connect and client_hello: what curl and Python send to a proxy, captured on loopback.
"$python" - "$corpus" <<'EOF'
import os, socket, ssl, subprocess, sys, threading, http.client

corpus = sys.argv[1]
OK = b"HTTP/1.1 200 Connection established\r\n\r\n"

def read_head(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = c.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf

def read_first_flight(c):
    """One TLS record (a ClientHello fits one here), or what a plain client sends."""
    buf = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            return buf
        buf += chunk
        if buf[:1] != b"\x16":
            return buf
        if len(buf) >= 5 and len(buf) >= 5 + int.from_bytes(buf[3:5], "big"):
            return buf

def capture(name, client, reply=OK, hello=True):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(10)
    port = srv.getsockname()[1]
    t = threading.Thread(target=client, args=(port,), daemon=True)
    t.start()
    c, _ = srv.accept()
    c.settimeout(10)
    head = read_head(c)
    open(f"{corpus}/connect/{name}", "wb").write(head)
    if reply is not None:
        c.sendall(reply)
        if hello:
            open(f"{corpus}/client_hello/{name}", "wb").write(read_first_flight(c))
    c.close()
    srv.close()
    t.join(15)

env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "http_proxy", "https_proxy", "all_proxy")}

def curl(*args):
    def run(port):
        subprocess.run(["curl", "-sS", "--max-time", "5", "-x", f"http://127.0.0.1:{port}", *args],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return run

capture("curl-openssl-https", curl("https://api.github.com/"))
capture("curl-openssl-tls12-ipv6", curl("--tls-max", "1.2", "https://[2001:db8::1]:8443/"))
capture("curl-proxy-auth", curl("--proxy-user", "user:secret", "https://a.example.com:443/x"))
capture("curl-plain-http-in-tunnel", curl("-p", "http://a.example.com:80/"))
capture("curl-get-not-connect", curl("http://a.example.com/"), reply=b"HTTP/1.1 405 Method Not Allowed\r\n\r\n", hello=False)

def python_client(port):
    ctx = ssl.create_default_context()
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
    conn.set_tunnel("pypi.org", 443)
    try:
        conn.request("GET", "/simple/")
    except Exception:
        pass
capture("python-http-client", python_client)

# OpenSSL hellos straight from memory, with and without SNI, TLS 1.2 only.
def memory_hello(name, host, alpn=(), tls12=False):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    if tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=host)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    open(f"{corpus}/client_hello/{name}", "wb").write(outgoing.read())

memory_hello("python-openssl-no-sni", None)
memory_hello("python-openssl-tls12-alpn", "Mixed.Case.Example.COM", alpn=("http/1.1",), tls12=True)
EOF

# Heads whose lines end in LF while the empty line ends in CRLF, and the other way round (RFC
# 9112 2.2 lets a recipient take a bare LF as a line end; the proxy does).
printf 'CONNECT a.example.com:443 HTTP/1.1\nHost: a.example.com:443\n\r\n' \
    >"$corpus/connect/bare-lf-lines-crlf-blank-line"
printf 'CONNECT a.example.com:443 HTTP/1.1\r\nHost: a.example.com:443\r\n\n' \
    >"$corpus/connect/crlf-lines-bare-lf-blank-line"

# rustls' own hellos (and one with an Encrypted Client Hello extension added).
cargo run --quiet -p mcpsum-egress --example client_hellos -- "$corpus/client_hello"

for t in lockfile canonical framing connect allowlist client_hello; do
    printf '%-13s %3d seeds, %7d bytes\n' "$t" "$(ls "$corpus/$t" | wc -l)" "$(cat "$corpus/$t"/* | wc -c)"
done
