#!/usr/bin/env python3
"""A stand-in for the Telegram Bot API, for af's integration tests.

    telegram_server.py [--token TOKEN] [--username NAME] [--port N] [--verbose]

It binds 127.0.0.1 (port 0 by default), prints the bound port as the first
line of stdout, then serves HTTP/1.1 with keep-alive:

    POST /bot<TOKEN>/getUpdates       real long polling (see below)
    POST /bot<TOKEN>/sendMessage      recorded; answers the sent Message
    POST /bot<TOKEN>/sendChatAction   recorded; answers true
    POST /bot<TOKEN>/getMe            the bot's User: {"id", "is_bot": true,
                                      "first_name", "username" (--username,
                                      default "af_test_bot"), ...}

Parameters are read from a JSON body, a form body or the query string, as
the Bot API accepts them. A token other than --token (default
"123456:TEST-token") gets 401 Unauthorized; an unknown method 404 Not Found.
Every answer has the Bot API's envelope: {"ok":true,"result":...} or
{"ok":false,"error_code":N,"description":"...","parameters":{...}}.

getUpdates follows the documented semantics: updates with an update_id below
"offset" are confirmed and forgotten; at most "limit" (1-100, default 100)
updates are returned, oldest first, filtered by "allowed_updates" (which is
remembered between calls when given); with "timeout" > 0 the request is held
until an update arrives or the timeout passes. A new getUpdates ends one
still held with 409 "Conflict: terminated by other getUpdates request; make
sure that only one bot instance is running", as Telegram does.

sendMessage checks what Telegram checks: chat_id present, text 1-4096
characters after trimming (counted in UTF-16 code units, as Telegram counts
entity offsets), parse_mode one of the known modes if given,
reply_parameters.message_id an integer if reply_parameters is given, and
that the replied-to message exists in that chat unless
allow_sending_without_reply is true.

Control endpoints for the tests (no token):

    POST /_push   {"chat_id": N, "text": "..", "chat_type": "private",
                   "kind": "text"|"photo"|"sticker", "from_id": N}
                  queues one "message" update (message ids count per chat)
                  and answers {"update_id": N, "message_id": N}
    GET  /_sent   every sendMessage / sendChatAction received, oldest first:
                  {"method", "params", "status", "time", "answered"}, recorded
                  on arrival; status is the HTTP status it was answered with
                  (null while held), answered the time it was
    GET  /_polls  every getUpdates received, in the same shape
    GET  /_calls  every Bot API call received (any method, getMe too), in
                  the same shape
    POST /_fail   {"method": "sendMessage"|"getUpdates"|"getMe"|"*",
                   "status": 429
                   |401|409|500|502, "count": N, "retry_after": S,
                   "description": ".."}: the next N calls of that method
                  get that error instead of being served
    POST /_reset  forget sent messages, polls and scripted failures
    GET  /_health "ok"
"""
import argparse
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 1 << 20
TEXT_MAX = 4096
MAX_TIMEOUT = 50          # seconds a getUpdates may be held, like Telegram
BOT_ID = 7000000001
BOT_USERNAME = "af_test_bot"
PARSE_MODES = ("Markdown", "MarkdownV2", "HTML")
CHAT_ACTIONS = ("typing", "upload_photo", "record_video", "upload_video",
                "record_voice", "upload_voice", "upload_document",
                "choose_sticker", "find_location", "record_video_note",
                "upload_video_note")
UPDATE_TYPES = ("message", "edited_message", "channel_post",
                "edited_channel_post", "callback_query", "inline_query")
DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: ("Conflict: terminated by other getUpdates request; make sure that "
          "only one bot instance is running"),
    500: "Internal Server Error",
}


class ApiError(Exception):
    def __init__(self, code, description, parameters=None):
        super().__init__(description)
        self.code = code
        self.description = description
        self.parameters = parameters


def utf16_len(s):
    return len(s.encode("utf-16-le")) // 2


class Bot:
    """Queued updates, the record of calls, scripted failures."""

    def __init__(self, token, username=BOT_USERNAME):
        self.token = token
        self.username = username
        self.cond = threading.Condition()
        self.updates = []           # unconfirmed, oldest first
        self.next_update = 100000001
        self.message_ids = {}       # chat id -> last message id
        self.messages = {}          # (chat id, message id) -> Message
        self.sent = []
        self.polls = []
        self.calls = []             # every Bot API call, any method
        self.fails = []             # [method, status, count, extra]
        self.poll_gen = 0
        self.allowed = None         # last allowed_updates given

    # Control side.

    def push(self, spec):
        chat_id = spec.get("chat_id")
        if not isinstance(chat_id, int):
            raise ApiError(400, "Bad Request: chat_id must be an integer")
        kind = spec.get("kind", "text")
        ctype = spec.get("chat_type", "private" if chat_id > 0 else
                         "supergroup")
        from_id = spec.get("from_id", chat_id if chat_id > 0 else 424242)
        with self.cond:
            mid = self.message_ids.get(chat_id, 0) + 1
            self.message_ids[chat_id] = mid
            user = {"id": from_id, "is_bot": False, "first_name": "Test",
                    "username": "tester", "language_code": "en"}
            if ctype == "private":
                chat = {"id": chat_id, "first_name": "Test",
                        "username": "tester", "type": "private"}
            else:
                chat = {"id": chat_id, "title": "Test group", "type": ctype}
            msg = {"message_id": mid, "from": user, "chat": chat,
                   "date": int(time.time())}
            if kind == "text":
                text = spec.get("text", "")
                msg["text"] = text
                if text.startswith("/"):
                    cmd = text.split()[0] if text.split() else text
                    msg["entities"] = [{"offset": 0, "type": "bot_command",
                                        "length": utf16_len(cmd)}]
            elif kind == "photo":
                msg["photo"] = [{"file_id": "AgACAgIAAxkBAAIB", "file_unique_id":
                                 "AQADAgAT", "file_size": 1234, "width": 90,
                                 "height": 67}]
                if "text" in spec:
                    msg["caption"] = spec["text"]
            elif kind == "sticker":
                msg["sticker"] = {"file_id": "CAACAgIAAxkBAAIC",
                                  "file_unique_id": "AgADAgAD", "type":
                                  "regular", "width": 512, "height": 512,
                                  "is_animated": False, "is_video": False}
            else:
                raise ApiError(400, "Bad Request: unknown kind")
            self.messages[(chat_id, mid)] = msg
            upd = {"update_id": self.next_update, "message": msg}
            self.next_update += 1
            self.updates.append(upd)
            self.cond.notify_all()
            return {"update_id": upd["update_id"], "message_id": mid}

    def fail(self, spec):
        with self.cond:
            self.fails.append([spec.get("method", "*"),
                               int(spec.get("status", 500)),
                               int(spec.get("count", 1)), spec])

    def reset(self):
        with self.cond:
            self.sent = []
            self.polls = []
            self.calls = []
            self.fails = []

    def take_fail(self, method):
        with self.cond:
            for f in self.fails:
                if f[0] in (method, "*") and f[2] > 0:
                    f[2] -= 1
                    status, spec = f[1], f[3]
                    self.fails = [x for x in self.fails if x[2] > 0]
                    return status, spec
        return None

    # The Bot API.

    def get_updates(self, p):
        offset = int_param(p, "offset", 0)
        limit = int_param(p, "limit", 100)
        timeout = int_param(p, "timeout", 0)
        limit = min(max(limit, 1), 100)
        timeout = min(max(timeout, 0), MAX_TIMEOUT)
        allowed = p.get("allowed_updates")
        if isinstance(allowed, str):
            try:
                allowed = json.loads(allowed)
            except ValueError:
                raise ApiError(400, "Bad Request: can't parse allowed "
                               "updates")
        if allowed is not None and (not isinstance(allowed, list) or not
                                    all(isinstance(a, str) for a in allowed)):
            raise ApiError(400, "Bad Request: can't parse allowed updates")
        deadline = time.monotonic() + timeout
        with self.cond:
            if allowed is not None:
                self.allowed = allowed or None
            self.poll_gen += 1
            gen = self.poll_gen
            self.cond.notify_all()      # ends a poll still held: 409
            if offset > 0:
                self.updates = [u for u in self.updates
                                if u["update_id"] >= offset]
            elif offset < 0:
                self.updates = self.updates[offset:]
            while True:
                if self.poll_gen != gen:
                    raise ApiError(409, DESCRIPTIONS[409])
                ready = [u for u in self.updates if self.wanted(u)]
                left = deadline - time.monotonic()
                if ready or left <= 0:
                    return ready[:limit]
                self.cond.wait(left)

    def wanted(self, u):
        if self.allowed is None:
            return True
        return any(k in u for k in self.allowed)

    def send_message(self, p):
        chat_id = chat_param(p)
        text = p.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text.strip()) > TEXT_MAX:
            raise ApiError(400, "Bad Request: message is too long")
        pm = p.get("parse_mode")
        if pm not in (None, "") and pm not in PARSE_MODES:
            raise ApiError(400, f"Bad Request: unsupported parse_mode")
        rp = p.get("reply_parameters")
        if isinstance(rp, str):
            try:
                rp = json.loads(rp)
            except ValueError:
                raise ApiError(400, "Bad Request: can't parse reply "
                               "parameters JSON object")
        reply_to = None
        if rp is not None:
            if not isinstance(rp, dict) or not isinstance(
                    rp.get("message_id"), int) or isinstance(
                    rp.get("message_id"), bool):
                raise ApiError(400, "Bad Request: can't parse reply "
                               "parameters JSON object")
            with self.cond:
                reply_to = self.messages.get((chat_id, rp["message_id"]))
            if reply_to is None and not rp.get("allow_sending_without_reply"):
                raise ApiError(400, "Bad Request: message to be replied not "
                               "found")
        with self.cond:
            mid = self.message_ids.get(chat_id, 0) + 1
            self.message_ids[chat_id] = mid
        msg = {"message_id": mid,
               "from": {"id": BOT_ID, "is_bot": True, "first_name": "af",
                        "username": self.username},
               "chat": {"id": chat_id, "type": "private" if chat_id > 0 else
                        "supergroup"},
               "date": int(time.time()), "text": text}
        if reply_to is not None:
            msg["reply_to_message"] = reply_to
        return msg

    def get_me(self):
        return {"id": BOT_ID, "is_bot": True, "first_name": "af",
                "username": self.username, "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False}

    def send_chat_action(self, p):
        chat_param(p)
        if p.get("action") not in CHAT_ACTIONS:
            raise ApiError(400, "Bad Request: wrong parameter action in "
                           "request")
        return True


def int_param(p, name, default):
    v = p.get(name, default)
    if isinstance(v, bool):
        raise ApiError(400, f"Bad Request: wrong parameter {name}")
    if isinstance(v, int):
        return v
    try:
        return int(str(v))
    except ValueError:
        raise ApiError(400, f"Bad Request: wrong parameter {name}")


def chat_param(p):
    v = p.get("chat_id")
    if v is None or v == "":
        raise ApiError(400, "Bad Request: chat_id is empty")
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ApiError(400, "Bad Request: chat not found")
    try:
        return int(v)
    except ValueError:
        raise ApiError(400, "Bad Request: chat not found")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "telegram-standin/1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("telegram-standin: " + (fmt % args) + "\n")

    def send_json(self, status, obj, headers=None):
        data = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_error_envelope(self, e):
        body = {"ok": False, "error_code": e.code,
                "description": e.description}
        if e.parameters:
            body["parameters"] = e.parameters
        self.send_json(e.code, body)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ApiError(413, "Request Entity Too Large")
        return self.rfile.read(n) if n > 0 else b""

    def params(self, raw):
        url = urllib.parse.urlsplit(self.path)
        p = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        ctype = (self.headers.get("Content-Type") or "").split(";")[0]
        if raw and ctype == "application/json":
            try:
                body = json.loads(raw)
            except ValueError:
                raise ApiError(400, "Bad Request: can't parse JSON object")
            if not isinstance(body, dict):
                raise ApiError(400, "Bad Request: parameters must be a JSON "
                               "object")
            p.update(body)
        elif raw:
            p.update({k: v[-1] for k, v in urllib.parse.parse_qs(
                raw.decode(errors="replace")).items()})
        return p

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def route(self, verb):
        bot = self.server.bot
        path = urllib.parse.urlsplit(self.path).path
        try:
            raw = self.read_body()
        except ApiError as e:
            self.close_connection = True
            self.send_error_envelope(e)
            return
        if path.startswith("/_"):
            self.control(verb, path, raw)
            return
        if not path.startswith("/bot") or "/" not in path[4:]:
            self.send_error_envelope(ApiError(404, "Not Found"))
            return
        token, method = path[4:].split("/", 1)
        if token != bot.token:
            # Recorded too (without its parameters), so a test can tell
            # that af stopped calling after a 401.
            self.answered(self.record(method, {}), 401)
            self.send_error_envelope(ApiError(401, "Unauthorized"))
            return
        rec = None
        try:
            params = self.params(raw)
            # Recorded on arrival, so a poll still held is visible; the
            # status is filled in when it is answered.
            rec = self.record(method, params)
            failed = bot.take_fail(method)
            if failed is not None:
                raise scripted_error(*failed)
            if method == "getUpdates":
                result = bot.get_updates(params)
            elif method == "sendMessage":
                result = bot.send_message(params)
            elif method == "sendChatAction":
                result = bot.send_chat_action(params)
            elif method == "getMe":
                result = bot.get_me()
            else:
                raise ApiError(404, "Not Found")
        except ApiError as e:
            self.answered(rec, e.code)
            if e.code == 502:
                self.send_bad_gateway()
            else:
                self.send_error_envelope(e)
            return
        self.answered(rec, 200)
        self.send_json(200, {"ok": True, "result": result})

    def send_bad_gateway(self):
        data = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n"
                b"<body><center><h1>502 Bad Gateway</h1></center></body>\r\n"
                b"</html>\r\n")
        self.send_response(502)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self, method, params):
        bot = self.server.bot
        rec = {"method": method, "params": params, "status": None,
               "time": time.time()}
        with bot.cond:
            bot.calls.append(rec)
            if method == "getUpdates":
                bot.polls.append(rec)
            elif method in ("sendMessage", "sendChatAction"):
                bot.sent.append(rec)
        return rec

    def answered(self, rec, status):
        if rec is not None:
            with self.server.bot.cond:
                rec["status"] = status
                rec["answered"] = time.time()

    def control(self, verb, path, raw):
        bot = self.server.bot
        try:
            spec = json.loads(raw) if raw else {}
        except ValueError:
            self.send_json(400, {"error": "body is not JSON"})
            return
        try:
            if verb == "POST" and path == "/_push":
                self.send_json(200, bot.push(spec))
            elif verb == "POST" and path == "/_fail":
                bot.fail(spec)
                self.send_json(200, {"ok": True})
            elif verb == "POST" and path == "/_reset":
                bot.reset()
                self.send_json(200, {"ok": True})
            elif verb == "GET" and path == "/_sent":
                with bot.cond:
                    self.send_json(200, list(bot.sent))
            elif verb == "GET" and path == "/_polls":
                with bot.cond:
                    self.send_json(200, list(bot.polls))
            elif verb == "GET" and path == "/_calls":
                with bot.cond:
                    self.send_json(200, list(bot.calls))
            elif verb == "GET" and path == "/_health":
                data = b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(data)
            else:
                self.send_json(404, {"error": "no such control endpoint"})
        except ApiError as e:
            self.send_json(400, {"error": e.description})


def scripted_error(status, spec):
    desc = spec.get("description")
    if status == 429:
        ra = int(spec.get("retry_after", 1))
        return ApiError(429, desc or f"Too Many Requests: retry after {ra}",
                        {"retry_after": ra})
    return ApiError(status, desc or DESCRIPTIONS.get(status, "Error"))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--token", default="123456:TEST-token")
    ap.add_argument("--username", default=BOT_USERNAME)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    srv = Server(("127.0.0.1", args.port), Handler)
    srv.bot = Bot(args.token, args.username)
    srv.verbose = args.verbose
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
