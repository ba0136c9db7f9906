"""A test HTTPS host for tests/it/egress.rs, run inside a network namespace the test created.

Usage: python3 https_server.py CERT KEY ADDR PORT

Answers every GET with 200 and `mcpsum-egress-ok <path>`; prints `ready` once listening.
"""

import http.server
import ssl
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the http.server API
        body = f"mcpsum-egress-ok {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    cert, key, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv = http.server.ThreadingHTTPServer((addr, port), Handler)
    # The handshake runs in the handler thread, so a silent peer cannot stall accept().
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    print("ready", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
