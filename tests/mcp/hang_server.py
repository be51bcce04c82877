#!/usr/bin/env python3
"""A small stdio MCP server for af's tests: the parts the reference servers
cannot show on demand.

Tools:
  wait    never answers (af must time out and send notifications/cancelled)
  quick   answers "quick ok"
  flood   answers with one line over 4 MiB (af must restart the server)
  change  announces notifications/tools/list_changed, then answers; from then
          on tools/list also offers "added"

Every notifications/cancelled is reported on stderr, which af logs.
"""
import json
import sys

changed = False


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def tools():
    names = ["wait", "quick", "flood", "change"] + (["added"] if changed else [])
    return [{"name": n, "description": f"test tool {n}",
             "inputSchema": {"type": "object", "properties": {}}}
            for n in names]


def text(s):
    return {"content": [{"type": "text", "text": s}]}


def main():
    global changed
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "hang", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools()}})
        elif method == "tools/call":
            name = params.get("name")
            if name == "wait":
                continue
            if name == "flood":
                sys.stdout.write('{"jsonrpc":"2.0","id":%d,"result":{"x":"' % mid)
                sys.stdout.write("a" * (5 << 20))
                sys.stdout.write('"}}\n')
                sys.stdout.flush()
                continue
            if name == "change":
                changed = True
                send({"jsonrpc": "2.0",
                      "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": mid, "result": text(f"{name} ok")})
        elif method == "notifications/cancelled":
            print("cancelled request %s: %s" % (params.get("requestId"),
                                                 params.get("reason")),
                  file=sys.stderr, flush=True)
        elif mid is not None and method is not None:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": "no such method"}})


if __name__ == "__main__":
    main()
