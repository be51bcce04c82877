"""The model stand-in itself: both API shapes, auth, error bodies, retry-after,
per-conversation scripts, the request record, and the failure steps."""
import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "standin", "model_server.py")
KEY = "sk-standin-secret"
ANTH = {"x-api-key": KEY, "anthropic-version": "2023-06-01",
        "content-type": "application/json"}
OAI = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}


@contextlib.contextmanager
def standin(*args):
    p = subprocess.Popen([sys.executable, SERVER, "--key", KEY, *args],
                         stdout=subprocess.PIPE, text=True)
    try:
        port = int(p.stdout.readline())
        yield port
    finally:
        p.terminate()
        p.wait(timeout=5)
        p.stdout.close()


def call(port, method, path, body=None, headers=None, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, (bytes, type(None))) else \
        json.dumps(body).encode()
    c.request(method, path, body=data, headers=headers or {})
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), parsed


def script(port, s):
    assert call(port, "POST", "/_script", s)[0] == 200


def anth_body(text="hello", **extra):
    return {"model": "claude-x", "max_tokens": 100,
            "messages": [{"role": "user", "content": text}], **extra}


def oai_body(text="hello", **extra):
    return {"model": "gpt-x", "messages": [{"role": "user", "content": text}],
            **extra}


def test_anthropic_text_and_tool_reply():
    with standin() as port:
        script(port, [{"reply": {"text": "hi", "usage": {"input": 3,
                                                         "output": 2}}},
                      {"reply": {"text": "let me look", "tool_calls": [
                          {"name": "current_time", "input": {}}]}}])
        st, _, b = call(port, "POST", "/v1/messages", anth_body(), ANTH)
        assert st == 200, b
        assert b["type"] == "message" and b["role"] == "assistant"
        assert b["content"] == [{"type": "text", "text": "hi"}]
        assert b["stop_reason"] == "end_turn"
        assert b["usage"] == {"input_tokens": 3, "output_tokens": 2}
        st, _, b = call(port, "POST", "/v1/messages", anth_body(), ANTH)
        assert b["stop_reason"] == "tool_use"
        use = b["content"][1]
        assert use["type"] == "tool_use" and use["name"] == "current_time"
        assert use["id"] and use["input"] == {}


def test_openai_text_and_tool_reply():
    with standin() as port:
        script(port, [{"reply": {"text": "hi"}},
                      {"reply": {"tool_calls": [
                          {"name": "read_file", "input": {"path": "/a"}}]}}])
        st, _, b = call(port, "POST", "/v1/chat/completions", oai_body(), OAI)
        assert st == 200, b
        assert b["object"] == "chat.completion"
        ch = b["choices"][0]
        assert ch["message"] == {"role": "assistant", "content": "hi"}
        assert ch["finish_reason"] == "stop"
        assert b["usage"]["prompt_tokens"] == 10
        st, _, b = call(port, "POST", "/v1/chat/completions", oai_body(), OAI)
        ch = b["choices"][0]
        assert ch["finish_reason"] == "tool_calls"
        assert ch["message"]["content"] is None
        tc = ch["message"]["tool_calls"][0]
        assert tc["type"] == "function" and tc["function"]["name"] == \
            "read_file"
        assert isinstance(tc["function"]["arguments"], str)
        assert json.loads(tc["function"]["arguments"]) == {"path": "/a"}


def test_auth_checked_in_each_shape():
    with standin() as port:
        script(port, [{"reply": {"text": "never"}}])
        st, _, b = call(port, "POST", "/v1/messages", anth_body(),
                        {**ANTH, "x-api-key": "wrong"})
        assert st == 401
        assert b["type"] == "error"
        assert b["error"]["type"] == "authentication_error"
        no_key = {k: v for k, v in ANTH.items() if k != "x-api-key"}
        assert call(port, "POST", "/v1/messages", anth_body(), no_key)[0] \
            == 401
        no_ver = {k: v for k, v in ANTH.items() if k != "anthropic-version"}
        st, _, b = call(port, "POST", "/v1/messages", anth_body(), no_ver)
        assert st == 400 and "anthropic-version" in b["error"]["message"]
        st, _, b = call(port, "POST", "/v1/chat/completions", oai_body(),
                        {**OAI, "Authorization": "Bearer nope"})
        assert st == 401
        assert b["error"]["code"] == "invalid_api_key"
        assert "nope" not in json.dumps(b)
        st, _, b = call(port, "POST", "/v1/chat/completions", oai_body(), {})
        assert st == 401 and "API key" in b["error"]["message"]
        # None of these consumed the script's one step.
        assert call(port, "POST", "/v1/messages", anth_body(), ANTH)[0] == 200


def test_no_auth_for_local_servers():
    with standin("--no-auth") as port:
        script(port, [{"reply": {"text": "local"}}])
        st, _, b = call(port, "POST", "/v1/chat/completions", oai_body(),
                        {"Content-Type": "application/json"})
        assert st == 200 and b["choices"][0]["message"]["content"] == "local"


def test_error_steps_with_retry_after():
    with standin() as port:
        script(port, [{"error": {"status": 429, "retry_after": "2",
                                 "message": "slow down"}},
                      {"error": {"status": 529, "message": "Overloaded"}},
                      {"error": {"status": 429, "retry_after": "1",
                                 "type": "requests"}}])
        st, h, b = call(port, "POST", "/v1/messages", anth_body(), ANTH)
        assert st == 429 and h["retry-after"] == "2"
        assert b == {"type": "error", "error": {"type": "rate_limit_error",
                                                "message": "slow down"},
                     "request_id": b["request_id"]}
        st, _, b = call(port, "POST", "/v1/messages", anth_body(), ANTH)
        assert st == 529 and b["error"]["type"] == "overloaded_error"
        st, h, b = call(port, "POST", "/v1/chat/completions", oai_body(), OAI)
        assert st == 429 and h["retry-after"] == "1"
        assert set(b["error"]) == {"message", "type", "param", "code"}
        assert b["error"]["type"] == "requests"


def test_conversations_walk_their_own_steps():
    with standin() as port:
        script(port, {"default": [{"reply": {"text": "d1"}},
                                  {"reply": {"text": "d2"}}],
                      "conversations": {"special": [{"reply": {
                          "text": "s1"}}]}})

        def text(t):
            return call(port, "POST", "/v1/messages", anth_body(t),
                        ANTH)[2]["content"][0]["text"]
        assert text("a") == "d1"
        assert text("b") == "d1"
        assert text("special") == "s1"
        assert text("a") == "d2"
        st, _, b = call(port, "POST", "/v1/messages", anth_body("special"),
                        ANTH)
        assert st == 400 and "exhausted" in b["error"]["message"]


def test_requests_are_recorded():
    with standin() as port:
        script(port, [{"reply": {"text": "one"}},
                      {"reply": {"text": "two"}}])
        body = {"model": "claude-x", "max_tokens": 10, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1",
                 "content": "denied", "is_error": True}]}]}
        assert call(port, "POST", "/v1/messages", body, ANTH)[0] == 200
        st, _, recs = call(port, "GET", "/_requests")
        assert st == 200 and len(recs) == 1
        r = recs[0]
        assert r["path"] == "/v1/messages"
        assert r["headers"]["x-api-key"] == KEY
        assert r["body"]["messages"][2]["content"][0]["is_error"] is True
        assert r["conversation"] == "hi"
        assert call(port, "POST", "/_reset")[0] == 200
        assert call(port, "GET", "/_requests")[2] == []


def test_conversation_checked_like_the_real_api():
    with standin() as port:
        script(port, [{"reply": {"text": "x"}}])
        unanswered = anth_body(messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
            {"role": "user", "content": "and?"}])
        st, _, b = call(port, "POST", "/v1/messages", unanswered, ANTH)
        assert st == 400 and "tool_result" in b["error"]["message"]
        stray = oai_body(messages=[
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "c9", "content": "x"}])
        st, _, b = call(port, "POST", "/v1/chat/completions", stray, OAI)
        assert st == 400 and b["error"]["type"] == "invalid_request_error"
        st, _, b = call(port, "POST", "/v1/messages", b"{not json", ANTH)
        assert st == 400 and b["type"] == "error"


def test_garbage_raw_and_slow():
    with standin() as port:
        script(port, [{"garbage": "<html>oops"}, {"raw": {"choices": []}},
                      {"slow": 0.5, "reply": {"text": "late"}}])
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("POST", "/v1/chat/completions",
                  json.dumps(oai_body()).encode(), OAI)
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"<html>oops"
        # Same connection: keep-alive with correct lengths.
        c.request("POST", "/v1/chat/completions",
                  json.dumps(oai_body()).encode(), OAI)
        r = c.getresponse()
        assert json.loads(r.read()) == {"choices": []}
        t = time.monotonic()
        c.request("POST", "/v1/chat/completions",
                  json.dumps(oai_body()).encode(), OAI)
        r = c.getresponse()
        assert json.loads(r.read())["choices"][0]["message"]["content"] == \
            "late"
        assert time.monotonic() - t >= 0.45
        c.close()


def test_hang_and_close():
    with standin() as port:
        script(port, [{"hang": True}, {"close": True}])
        try:
            call(port, "POST", "/v1/messages", anth_body(), ANTH,
                 timeout=0.5)
        except socket.timeout:
            pass
        else:
            raise AssertionError("hang answered")
        try:
            call(port, "POST", "/v1/messages", anth_body(), ANTH)
        except (http.client.IncompleteRead, ConnectionError):
            pass
        else:
            raise AssertionError("close delivered a whole reply")
