#!/usr/bin/env python3
"""A scripted stand-in for the two model APIs af speaks.

    model_server.py [--key KEY | --no-auth] [--port N] [--verbose] [SCRIPT.json]

It binds 127.0.0.1 (port 0 by default) and prints the bound port as the first
line of stdout, then serves, over HTTP/1.1 with keep-alive:

    POST /v1/messages          Anthropic Messages (x-api-key, anthropic-version)
    POST /v1/chat/completions  OpenAI chat completions (Authorization: Bearer)
    POST /_script              replace the script (JSON body); resets cursors
    GET  /_requests            every API request received, oldest first
    POST /_reset               forget requests and cursors, keep the script
    GET  /_health              "ok"

Both API paths check their auth headers against --key (default "test-key")
and answer 401 in that API's error shape when a key is missing or wrong;
--no-auth accepts any (local servers). The Anthropic path also wants
anthropic-version: 2023-06-01 (400 otherwise). Request bodies are checked the
way the real APIs check them (required fields; every tool result answers a
tool call of the assistant message just before it, and every tool call is
answered), so a wrong conversation from af gets the 400 the real API would
give.

Script
------
Either a list of steps (the default list) or an object:

    {"default": [STEP, ...],
     "conversations": {"FIRST USER TEXT": [STEP, ...], ...},
     "exhausted": STEP}

A conversation is named by the text of its first user message, so runs that
go on at once each walk their own steps. A conversation listed under
"conversations" walks that list; any other walks its own copy of "default".
Each request takes the next step. When a conversation's steps are used up it
gets "exhausted" if given, else a 400 invalid_request_error saying the script
is exhausted (a 400, so af does not retry it).

A STEP is one of (any step may also carry "delay": SECONDS):

    {"reply": {"text": "hi",
               "tool_calls": [{"name": "t", "input": {..}, "id": "opt"}],
               "stop": "end_turn",          # default: tool_use with calls
               "usage": {"input": 10, "output": 5}}}   # null: no usage
        rendered in the shape of the path asked: content blocks and
        stop_reason for Anthropic; choices[0].message with tool_calls
        (arguments a JSON string; "arguments_raw" sends a string verbatim),
        content null when there is no text, and finish_reason
        (end_turn->stop, tool_use->tool_calls, max_tokens->length) for OpenAI.
    {"raw": ANY_JSON}                 200 with exactly that body
    {"error": {"status": 429, "type": "rate_limit_error", "message": "..",
               "retry_after": "1", "headers": {"x-should-retry": "true"}}}
        the API's real error body; type defaults by status
    {"slow": SECONDS, "reply": {..}}  answer after a wait (reply optional)
    {"hang": true}                    never answer; holds the connection
    {"garbage": "TEXT"} / {"garbage": true}   200 with a body that is no reply
    {"close": true}                   promise a body, send part, drop the link

Each record in /_requests is {"method", "path", "headers" (names lowercased),
"body" (parsed JSON or null), "raw" (the body text), "conversation", "step"}.
"""
import json
import select
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"
MAX_BODY = 32 << 20
HANG_MAX = 3600.0

ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                   403: "permission_error", 404: "not_found_error",
                   413: "request_too_large", 429: "rate_limit_error",
                   500: "api_error", 529: "overloaded_error"}
OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
                403: "permission_error", 404: "invalid_request_error",
                429: "rate_limit_exceeded", 500: "server_error",
                503: "server_error"}
FINISH = {"end_turn": "stop", "tool_use": "tool_calls",
          "max_tokens": "length", "stop_sequence": "stop"}


class BadRequest(Exception):
    pass


class State:
    """The script, each conversation's cursor and the request record."""

    def __init__(self, key, auth):
        self.lock = threading.Lock()
        self.key = key
        self.auth = auth
        self.script = {"default": [], "conversations": {}, "exhausted": None}
        self.cursors = {}
        self.requests = []
        self.stopping = threading.Event()

    def load(self, script):
        if isinstance(script, list):
            script = {"default": script}
        if not isinstance(script, dict):
            raise ValueError("a script is a list of steps or an object")
        steps = script.get("default", [])
        convs = script.get("conversations", {})
        if not isinstance(steps, list) or not isinstance(convs, dict):
            raise ValueError("default is a list, conversations an object")
        with self.lock:
            self.script = {"default": steps, "conversations": convs,
                           "exhausted": script.get("exhausted")}
            self.cursors = {}

    def next_step(self, conv):
        with self.lock:
            steps = self.script["conversations"].get(conv,
                                                     self.script["default"])
            n = self.cursors.get(conv, 0)
            self.cursors[conv] = n + 1
            if n < len(steps):
                return n, steps[n]
            return n, self.script["exhausted"]

    def record(self, rec):
        with self.lock:
            self.requests.append(rec)

    def reset(self):
        with self.lock:
            self.requests = []
            self.cursors = {}


def text_of(content):
    """The text of a message content: a string, or its text blocks/parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content
                         if isinstance(b, dict) and b.get("type") == "text")
    return ""


def conversation_of(body):
    msgs = body.get("messages") if isinstance(body, dict) else None
    for m in msgs if isinstance(msgs, list) else []:
        if isinstance(m, dict) and m.get("role") == "user":
            return text_of(m.get("content"))
    return ""


def check_anthropic(body):
    """The checks the Messages API makes that af could get wrong."""
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    if not isinstance(body.get("model"), str):
        raise BadRequest("model: Field required")
    mt = body.get("max_tokens")
    if not isinstance(mt, int) or isinstance(mt, bool) or mt < 1:
        raise BadRequest("max_tokens: Field required")
    if "system" in body and not isinstance(body["system"], (str, list)):
        raise BadRequest("system: Input should be a valid string")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("messages: at least one message is required")
    if msgs[0].get("role") != "user" if isinstance(msgs[0], dict) else True:
        raise BadRequest("messages: first message must use the \"user\" role")
    pending = set()
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("user",
                                                            "assistant"):
            raise BadRequest(f"messages.{i}.role: Input should be 'user' or "
                             "'assistant'")
        content = m.get("content")
        blocks = ([{"type": "text", "text": content}]
                  if isinstance(content, str) else content)
        if not isinstance(blocks, list):
            raise BadRequest(f"messages.{i}.content: Input should be a "
                             "valid list")
        answered, uses = set(), set()
        for j, b in enumerate(blocks):
            where = f"messages.{i}.content.{j}"
            t = b.get("type") if isinstance(b, dict) else None
            if t == "text":
                if not isinstance(b.get("text"), str) or not b["text"]:
                    raise BadRequest(f"{where}: text content blocks must be "
                                     "non-empty")
            elif t == "tool_use":
                if m["role"] != "assistant":
                    raise BadRequest(f"{where}: tool_use only in assistant "
                                     "messages")
                if not isinstance(b.get("id"), str) or not b["id"] or \
                        not isinstance(b.get("name"), str) or \
                        not isinstance(b.get("input"), dict):
                    raise BadRequest(f"{where}: tool_use needs id, name and "
                                     "an input object")
                uses.add(b["id"])
            elif t == "tool_result":
                if m["role"] != "user":
                    raise BadRequest(f"{where}: tool_result only in user "
                                     "messages")
                tid = b.get("tool_use_id")
                if tid not in pending:
                    raise BadRequest(f"{where}: unexpected `tool_use_id` "
                                     "found in `tool_result` blocks: "
                                     f"{tid}. Each `tool_result` block must "
                                     "have a corresponding `tool_use` block "
                                     "in the previous message.")
                if "is_error" in b and not isinstance(b["is_error"], bool):
                    raise BadRequest(f"{where}.is_error: Input should be a "
                                     "valid boolean")
                if not isinstance(b.get("content", ""), (str, list)):
                    raise BadRequest(f"{where}.content: Input should be a "
                                     "valid string or list")
                answered.add(tid)
            else:
                raise BadRequest(f"{where}.type: unknown block type {t!r}")
        if pending - answered:
            raise BadRequest(f"messages.{i}: `tool_use` ids were found "
                             "without `tool_result` blocks immediately "
                             f"after: {', '.join(sorted(pending - answered))}")
        pending = uses
    tools = body.get("tools", [])
    if not isinstance(tools, list):
        raise BadRequest("tools: Input should be a valid list")
    for k, t in enumerate(tools):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or \
                not isinstance(t.get("input_schema"), dict):
            raise BadRequest(f"tools.{k}: name and input_schema are "
                             "required")


def check_openai(body):
    """The checks chat completions makes that af could get wrong."""
    if not isinstance(body, dict):
        raise BadRequest("We could not parse the JSON body of your request.")
    if not isinstance(body.get("model"), str):
        raise BadRequest("you must provide a model parameter")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must contain at least one message")
    pending = set()
    for i, m in enumerate(msgs):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise BadRequest(f"Invalid value for 'messages[{i}].role'")
        if role == "tool":
            tid = m.get("tool_call_id")
            if tid not in pending:
                raise BadRequest(f"Invalid parameter: messages with role "
                                 "'tool' must be a response to a preceeding "
                                 "message with 'tool_calls'.")
            if not isinstance(m.get("content"), (str, list)):
                raise BadRequest(f"Invalid type for 'messages[{i}].content'")
            pending.discard(tid)
            continue
        if pending:
            raise BadRequest("An assistant message with 'tool_calls' must be "
                             "followed by tool messages responding to each "
                             "'tool_call_id'. The following tool_call_ids did "
                             f"not have response messages: "
                             f"{', '.join(sorted(pending))}")
        calls = m.get("tool_calls")
        if role == "assistant" and calls is not None:
            if not isinstance(calls, list):
                raise BadRequest(f"Invalid type for "
                                 f"'messages[{i}].tool_calls'")
            for j, c in enumerate(calls):
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict) or c.get("type") != "function" \
                        or not isinstance(c.get("id"), str) \
                        or not isinstance(fn.get("name"), str) \
                        or not isinstance(fn.get("arguments"), str):
                    raise BadRequest(f"Invalid value for "
                                     f"'messages[{i}].tool_calls[{j}]'")
                pending.add(c["id"])
            if m.get("content") is not None and \
                    not isinstance(m["content"], (str, list)):
                raise BadRequest(f"Invalid type for 'messages[{i}].content'")
        elif not isinstance(m.get("content"), (str, list)):
            raise BadRequest(f"Invalid type for 'messages[{i}].content': "
                             "expected a string or array, but got null")
    tools = body.get("tools", [])
    if not isinstance(tools, list):
        raise BadRequest("Invalid type for 'tools'")
    for k, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if t.get("type") != "function" or not isinstance(fn, dict) or \
                not isinstance(fn.get("name"), str):
            raise BadRequest(f"Invalid value for 'tools[{k}]'")


def render_anthropic(reply, model, n):
    content = []
    if reply.get("text"):
        content.append({"type": "text", "text": reply["text"]})
    for k, c in enumerate(reply.get("tool_calls", [])):
        content.append({"type": "tool_use",
                        "id": c.get("id", f"toolu_{n:04d}_{k}"),
                        "name": c["name"], "input": c.get("input", {})})
    stop = reply.get("stop",
                     "tool_use" if reply.get("tool_calls") else "end_turn")
    out = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message",
           "role": "assistant", "model": model, "content": content,
           "stop_reason": stop, "stop_sequence": None}
    usage = reply.get("usage", {"input": 10, "output": 5})
    if usage is not None:
        out["usage"] = {"input_tokens": usage.get("input", 0),
                        "output_tokens": usage.get("output", 0)}
    return out


def render_openai(reply, model, n):
    msg = {"role": "assistant", "content": reply.get("text") or None}
    calls = []
    for k, c in enumerate(reply.get("tool_calls", [])):
        args = c["arguments_raw"] if "arguments_raw" in c else \
            json.dumps(c.get("input", {}))
        calls.append({"id": c.get("id", f"call_{n:04d}_{k}"),
                      "type": "function",
                      "function": {"name": c["name"], "arguments": args}})
    if calls:
        msg["tool_calls"] = calls
    stop = reply.get("stop", "tool_use" if calls else "end_turn")
    out = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
           "object": "chat.completion", "created": int(time.time()),
           "model": model,
           "choices": [{"index": 0, "message": msg, "logprobs": None,
                        "finish_reason": FINISH.get(stop, stop)}]}
    usage = reply.get("usage", {"input": 10, "output": 5})
    if usage is not None:
        i, o = usage.get("input", 0), usage.get("output", 0)
        out["usage"] = {"prompt_tokens": i, "completion_tokens": o,
                        "total_tokens": i + o}
    return out


def error_body(api, status, etype, message, code=None):
    if api == "anthropic":
        return {"type": "error",
                "error": {"type": etype or ANTHROPIC_TYPES.get(status,
                                                               "api_error"),
                          "message": message},
                "request_id": f"req_{uuid.uuid4().hex[:24]}"}
    return {"error": {"message": message,
                      "type": etype or OPENAI_TYPES.get(status,
                                                        "server_error"),
                      "param": None, "code": code}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "model-standin/1"
    state = None        # set by main
    verbose = False

    def log_message(self, fmt, *args):
        if self.verbose:
            sys.stderr.write("standin: " + (fmt % args) + "\n")

    def send_json(self, status, obj, headers=None):
        self.send_bytes(status, json.dumps(obj).encode(), headers)

    def send_bytes(self, status, data, headers=None,
                   ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n < 0 or n > MAX_BODY:
            raise BadRequest("request body too large")
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        if self.path == "/_requests":
            with self.state.lock:
                self.send_json(200, self.state.requests)
        elif self.path == "/_health":
            self.send_bytes(200, b"ok\n", ctype="text/plain")
        else:
            self.send_json(404, {"error": {"message": "not found",
                                           "type": "not_found"}})

    def do_POST(self):
        try:
            raw = self.read_body()
        except (BadRequest, ValueError):
            self.send_json(413, {"error": {"message": "body too large"}})
            self.close_connection = True
            return
        if self.path == "/_script":
            try:
                self.state.load(json.loads(raw))
            except ValueError as e:
                self.send_json(400, {"error": {"message": str(e)}})
                return
            self.send_json(200, {"ok": True})
        elif self.path == "/_reset":
            self.state.reset()
            self.send_json(200, {"ok": True})
        elif self.path == ANTHROPIC_PATH:
            self.api("anthropic", raw)
        elif self.path == OPENAI_PATH:
            self.api("openai", raw)
        else:
            self.send_json(404, error_body("anthropic", 404, None,
                                           f"Not found: {self.path}"))

    def auth_error(self, api):
        """The real APIs' answers to a missing or wrong key or version."""
        h = self.headers
        if api == "anthropic":
            if self.state.auth:
                key = h.get("x-api-key")
                if key is None:
                    return 401, "x-api-key header is required"
                if key != self.state.key:
                    return 401, "invalid x-api-key"
            v = h.get("anthropic-version")
            if v is None:
                return 400, "anthropic-version: header is required"
            if v != ANTHROPIC_VERSION:
                return 400, f"anthropic-version: invalid version {v!r}"
            return None
        if not self.state.auth:
            return None
        a = h.get("Authorization")
        if a is None or not a.startswith("Bearer "):
            return 401, ("You didn't provide an API key. You need to provide "
                         "your API key in an Authorization header using "
                         "Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
        if a[len("Bearer "):] != self.state.key:
            return 401, "Incorrect API key provided."
        return None

    def api(self, api, raw):
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        conv = conversation_of(body)
        rec = {"method": "POST", "path": self.path,
               "headers": {k.lower(): v for k, v in self.headers.items()},
               "body": body, "raw": raw.decode("utf-8", "replace"),
               "conversation": conv, "step": None}
        self.state.record(rec)
        bad = self.auth_error(api)
        if bad is not None:
            status, msg = bad
            code = "invalid_api_key" if api == "openai" and \
                msg.startswith("Incorrect") else None
            self.send_json(status, error_body(api, status, None, msg, code))
            return
        try:
            if body is None:
                raise BadRequest("The request body is not valid JSON.")
            (check_anthropic if api == "anthropic" else check_openai)(body)
        except BadRequest as e:
            self.send_json(400, error_body(api, 400, "invalid_request_error",
                                           str(e)))
            return
        n, step = self.state.next_step(conv)
        rec["step"] = n
        if step is None:
            self.send_json(400, error_body(
                api, 400, "invalid_request_error",
                f"stand-in script exhausted for conversation {conv!r} "
                f"(request {n + 1})"))
            return
        self.play(api, step, body.get("model", ""), n)

    def play(self, api, step, model, n):
        if "delay" in step:
            self.wait(float(step["delay"]))
        if "slow" in step:
            self.wait(float(step["slow"]))
            reply = step.get("reply", {"text": "slow"})
        else:
            reply = step.get("reply")
        if step.get("hang"):
            self.hang()
        elif step.get("close"):
            self.drop()
        elif "garbage" in step:
            g = step["garbage"]
            self.send_bytes(200, (g if isinstance(g, str) else
                                  '{"id": "msg_1", "content": [').encode())
        elif "raw" in step:
            self.send_json(200, step["raw"])
        elif "error" in step:
            e = step["error"]
            status = int(e.get("status", 500))
            headers = dict(e.get("headers", {}))
            if "retry_after" in e:
                headers["retry-after"] = e["retry_after"]
            if api == "anthropic":
                headers.setdefault("request-id",
                                   f"req_{uuid.uuid4().hex[:24]}")
            self.send_json(status, error_body(api, status, e.get("type"),
                                              e.get("message", "error"),
                                              e.get("code")), headers)
        elif reply is not None:
            render = render_anthropic if api == "anthropic" else \
                render_openai
            self.send_json(200, render(reply, model, n))
        else:
            self.send_json(500, error_body(api, 500, "api_error",
                                           "stand-in: step has no action"))

    def wait(self, secs):
        self.state.stopping.wait(secs)

    def hang(self):
        """Hold the connection without a word until the client gives up."""
        end = time.monotonic() + HANG_MAX
        sock = self.connection
        while time.monotonic() < end and not self.state.stopping.is_set():
            r, _, _ = select.select([sock], [], [], 0.1)
            if r:
                try:
                    if sock.recv(1, socket.MSG_PEEK) == b"":
                        break
                except OSError:
                    break
                time.sleep(0.05)
        self.close_connection = True

    def drop(self):
        """Promise a body, send part of it, and close mid-reply."""
        self.wfile.write(b"HTTP/1.1 200 OK\r\n"
                         b"Content-Type: application/json\r\n"
                         b"Content-Length: 4096\r\n\r\n"
                         b'{"id":"msg_cut","type":"message","content":[')
        self.wfile.flush()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True


def main(argv):
    key, auth, port, script, verbose = "test-key", True, 0, None, False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--key":
            key = args.pop(0)
        elif a == "--no-auth":
            auth = False
        elif a == "--port":
            port = int(args.pop(0))
        elif a == "--verbose":
            verbose = True
        elif a.startswith("-"):
            sys.stderr.write(__doc__)
            return 2
        else:
            script = a
    state = State(key, auth)
    if script is not None:
        with open(script) as f:
            state.load(json.load(f))
    Handler.state = state
    Handler.verbose = verbose
    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        state.stopping.set()
        srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
