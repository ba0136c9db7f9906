#!/bin/sh
# A minimal MCP stdio server (legacy handshake, one tool) for scripts/vm-test.sh: the VM has a
# shell and nothing else, so the server is a shell loop with no external commands.
# Usage: mcp-server.sh [DIR]  -- when DIR is given, creates DIR/started.<pid> first, so a test
# can tell whether the server was ever started (a fail-closed sandbox must not start it).
if [ -n "${1:-}" ]; then
  : >"$1/started.$$" || exit 3
fi
while IFS= read -r line; do
  case $line in
    *'"id":'*) ;;
    *) continue ;; # a notification: no answer
  esac
  id=${line#*\"id\":}
  id=${id%%[,\}]*}
  case $line in
    *'"method":"initialize"'*)
      res='{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"mcpsum-vm-server","version":"1.0.0"}}' ;;
    *'"method":"tools/list"'*)
      res='{"tools":[{"name":"echo","description":"Returns its text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}' ;;
    *'"method":"ping"'*)
      res='{}' ;;
    *)
      printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}\n' "$id"
      continue ;;
  esac
  printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$res"
done
