"""The webhook trigger and the status server, end to end: the real af binary on
port 0, driven with http.client, against the model stand-in.

Each test owns a temporary folder and stops what it started.
"""
import hashlib
import hmac
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from afharness import read_audit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AF_BIN = os.environ.get("AF_BIN", os.path.join(ROOT, "build/plain/af"))
if not os.path.isabs(AF_BIN):
    AF_BIN = os.path.join(ROOT, AF_BIN)
MODEL_SERVER = os.path.join(ROOT, "tests", "standin", "model_server.py")
MODEL_KEY = "wh-model-key"
SECRET = "wh-secret-3c9e"
PATH = "/hooks/github"


def sign(body, secret=SECRET):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def request(port, method, path, body=None, headers=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()


class Model:
    def __init__(self, step=None):
        self.proc = subprocess.Popen(
            [sys.executable, MODEL_SERVER, "--key", MODEL_KEY],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.isdigit():
            self.stop()
            raise RuntimeError(f"model stand-in did not start: {line!r}")
        self.port = int(line)
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        step = step or {}
        step["reply"] = {"text": "done", "stop": "end_turn",
                         "usage": {"input": 7, "output": 3}}
        st, _, body = request(self.port, "POST", "/_script",
                              json.dumps({"default": [step]}))
        assert st == 200, (st, body)

    def requests(self):
        st, _, body = request(self.port, "GET", "/_requests")
        assert st == 200
        return json.loads(body)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Af:
    """af run on port 0 for both listeners; the ports come from its log."""

    def __init__(self, model_port, secret=True, prompt="Event:\n{{body}}",
                 extra=()):
        self.dir = tempfile.mkdtemp(prefix="af-wh-")
        for d in ("data", "skills", "secrets"):
            os.mkdir(os.path.join(self.dir, d))
        with open(os.path.join(self.dir, "secrets", "wh"), "w") as f:
            f.write(SECRET + "\n")
        with open(os.path.join(self.dir, "secrets", "model"), "w") as f:
            f.write(MODEL_KEY)
        cfg = [
            "name: wh-test",
            "model:",
            "  provider: anthropic",
            "  name: stand-in",
            f'  base_url: "http://127.0.0.1:{model_port}"',
            "  api_key: ${secret:model}",
            "triggers:",
            "  webhook:",
            "    listen: 127.0.0.1:0",
            f"    path: {PATH}",
            f"    prompt: {json.dumps(prompt)}",
        ]
        if secret:
            cfg.append("    secret: ${secret:wh}")
        cfg += ["status:", "  listen: 127.0.0.1:0", *extra, ""]
        self.cfg = os.path.join(self.dir, "agent.yaml")
        with open(self.cfg, "w") as f:
            f.write("\n".join(cfg))
        env = dict(os.environ, AF_ALLOW_NO_CONTAINER="1")
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")
        self.proc = subprocess.Popen(
            [AF_BIN, "run", self.cfg, "--data", os.path.join(self.dir, "data"),
             "--skills", os.path.join(self.dir, "skills"),
             "--secrets", os.path.join(self.dir, "secrets")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.log = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.webhook_port = self.wait_log(r"webhook listening on 127\.0\.0\.1:(\d+)")
        self.status_port = self.wait_log(r"status listening on 127\.0\.0\.1:(\d+)")
        self.wait_log(r"trigger webhook: up")

    def _read(self):
        for line in self.proc.stderr:
            with self.lock:
                self.log.append(line)

    def logtext(self):
        with self.lock:
            return "".join(self.log)

    def wait_log(self, pattern, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = re.search(pattern, self.logtext())
            if m:
                return int(m.group(1)) if m.groups() else m.group(0)
            if self.proc.poll() is not None:
                time.sleep(0.1)
                raise AssertionError(f"af exited {self.proc.returncode}:\n"
                                     + self.logtext())
            time.sleep(0.02)
        raise AssertionError(f"no {pattern!r} in af's log:\n" + self.logtext())

    def hook(self, method="POST", body=b"", headers=None, path=PATH):
        return request(self.webhook_port, method, path, body, headers)

    def status(self, path, method="GET"):
        return request(self.status_port, method, path)

    def audit(self):
        return read_audit(os.path.join(self.dir, "data", "audit.jsonl"))

    def stop(self):
        rc = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            rc = self.proc.returncode
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


def with_af(fn, model_step=None, **kw):
    model = Model(model_step)
    af = None
    try:
        af = Af(model.port, **kw)
        fn(af, model)
        rc = af.stop()
        assert rc == 0, f"af exited {rc}:\n" + af.logtext()
    finally:
        if af is not None:
            af.stop()
        model.stop()


def wait_for(cond, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def user_texts(model):
    out = []
    for r in model.requests():
        body = r.get("body")
        if isinstance(body, str):
            body = json.loads(body)
        for m in (body or {}).get("messages", []):
            if m.get("role") != "user":
                continue
            c = m.get("content")
            if isinstance(c, str):
                out.append(c)
            else:
                out += [b.get("text", "") for b in c if b.get("type") == "text"]
    return out


def test_signature_required():
    def t(af, model):
        body = b'{"action":"opened","number":1}'
        st, h, out = af.hook(body=body)
        assert st == 401 and h["content-type"] == "application/json", (st, h)
        assert "missing" in json.loads(out)["error"]
        st, _, out = af.hook(body=body, headers={
            "X-Hub-Signature-256": sign(body, "wrong secret")})
        assert st == 401 and "does not match" in json.loads(out)["error"], out
        st, _, out = af.hook(body=body, headers={
            "X-Hub-Signature-256": sign(body)[:-1]})
        assert st == 401 and "malformed" in json.loads(out)["error"], out
        st, _, out = af.hook(body=body, headers={
            "X-Hub-Signature-256": sign(body).replace("sha256=", "sha1=")})
        assert st == 401, st
        # Signed for another body.
        st, _, _ = af.hook(body=body + b" ", headers={
            "X-Hub-Signature-256": sign(body)})
        assert st == 401, st
        refused = [r for r in af.audit() if r.get("event") == "webhook_refused"]
        assert len(refused) == 5, refused
        assert all(r["remote"] == "127.0.0.1" for r in refused), refused
        assert SECRET not in json.dumps(af.audit())
        assert SECRET not in af.logtext()
    with_af(t)


def test_signed_post_starts_a_run():
    def t(af, model):
        body = b'{"action":"opened","title":"{{body}} stays as is"}'
        st, h, out = af.hook(body=body, headers={
            "X-Hub-Signature-256": sign(body),
            "Content-Type": "application/json"})
        assert st == 202, (st, out)
        assert h["content-type"] == "application/json"
        reply = json.loads(out)
        assert reply["status"] == "accepted", reply
        assert re.fullmatch(r"r-[0-9a-f]{24}", reply["run"]), reply
        # The query string does not take part in matching.
        st, _, out = af.hook(body=body, path=PATH + "?delivery=2", headers={
            "X-Hub-Signature-256": sign(body)})
        assert st == 202, (st, out)
        texts = wait_for(lambda: user_texts(model) if len(user_texts(model)) >= 2
                         else None)
        want = "Event:\n" + body.decode()
        assert texts[0] == want, texts
        wait_for(lambda: [r for r in af.audit() if r.get("event") == "run_end"
                          and r.get("run") == reply["run"]])
    with_af(t)


def test_body_is_data():
    def t(af, model):
        body = b"a\xffb {{body}} \x00end"
        st, _, out = af.hook(body=body, headers={
            "X-Hub-Signature-256": sign(body)})
        assert st == 202, (st, out)
        texts = wait_for(lambda: user_texts(model))
        assert texts[0] == "<a\ufffdb {{body}} \ufffdend><a\ufffdb {{body}} " \
            "\ufffdend>", texts
    with_af(t, prompt="<{{body}}><{{body}}>")


def test_http_errors():
    def t(af, model):
        st, h, _ = af.hook("GET")
        assert st == 405 and h.get("allow") == "POST", (st, h)
        st, h, _ = af.hook("PUT", b"x")
        assert st == 405 and h.get("allow") == "POST", (st, h)
        st, _, _ = af.hook("OPTIONS")
        assert st == 405, st
        for p in ("/", "/hooks/github/", "/hooks/githubx", "/hooks/GitHub",
                  "/hooks/%67ithub", "/other"):
            st, _, _ = af.hook(path=p, body=b"x")
            assert st == 404, (p, st)
        # evhttp answers 413 from the Content-Length alone and closes; send
        # the headers only, so the reply is not lost to a reset.
        s = socket.create_connection(("127.0.0.1", af.webhook_port), timeout=10)
        try:
            s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: "
                      f"{(1 << 20) + 1}\r\n\r\n".encode())
            data = s.recv(4096)
            assert data.startswith(b"HTTP/1.1 413 "), data
        finally:
            s.close()
        # A chunked body is held to the same limit, chunk by chunk.
        s = socket.create_connection(("127.0.0.1", af.webhook_port), timeout=10)
        try:
            s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                      f"chunked\r\n\r\n{(1 << 20) + 1:x}\r\n".encode())
            data = s.recv(4096)
            assert data.startswith(b"HTTP/1.1 413 "), data
        finally:
            s.close()
        # Exactly the limit is fine (unsigned here: 401, not 413).
        st, _, _ = af.hook(body=b"x" * (1 << 20))
        assert st == 401, st
        # Over-long headers: evhttp answers 400 and closes; it may close
        # while the client is still sending, which the client sees as a
        # broken pipe. Either way the request is refused.
        s = socket.create_connection(("127.0.0.1", af.webhook_port), timeout=10)
        try:
            try:
                s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nX-Filler: "
                          f"{'a' * (20 << 10)}\r\nContent-Length: 1\r\n"
                          f"\r\nx".encode())
                data = s.recv(4096)
            except (BrokenPipeError, ConnectionResetError):
                data = b""
            assert data == b"" or data.startswith(b"HTTP/1.1 400 "), data
        finally:
            s.close()
        # The server is still there after all that.
        body = b"{}"
        st, _, _ = af.hook(body=body, headers={"X-Hub-Signature-256": sign(body)})
        assert st == 202, st
    with_af(t)


def test_idle_connection_is_closed():
    def t(af, model):
        s = socket.create_connection(("127.0.0.1", af.webhook_port))
        try:
            s.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n")
            s.settimeout(20)
            start = time.monotonic()
            data = s.recv(1024)
            # Closed (or answered with an error) by the server's timeout.
            assert time.monotonic() - start < 15, "not closed in time"
            assert data == b"" or data.startswith(b"HTTP/1.1 "), data
        finally:
            s.close()
    with_af(t)


def test_unsigned_webhook():
    def t(af, model):
        st, _, out = af.hook(body=b"hello")
        assert st == 202, (st, out)
        assert "no secret is set" not in af.logtext()  # loopback: no warning
    with_af(t, secret=False)


def test_status_endpoints():
    def t(af, model):
        st, h, out = af.status("/healthz")
        assert st == 200 and out == b"ok\n", (st, out)
        body = b"{}"
        st, _, out = af.hook(body=body, headers={"X-Hub-Signature-256": sign(body)})
        assert st == 202, st
        run = json.loads(out)["run"]
        wait_for(lambda: [r for r in af.audit() if r.get("event") == "run_end"
                          and r.get("run") == run])

        st, h, out = af.status("/status")
        assert st == 200 and h["content-type"] == "application/json", (st, h)
        s = json.loads(out)
        assert s["agent"] == "wh-test" and s["version"], s
        assert isinstance(s["uptime_s"], (int, float)), s
        assert isinstance(s["hermetic"], bool), s
        assert isinstance(s["not_hermetic_reasons"], list), s
        assert s["hermetic"] == (s["not_hermetic_reasons"] == []), s
        assert s["triggers"]["webhook"]["state"] == "up", s
        assert s["runs_in_flight"] == 0 and s["queued"] == 0, s
        tot = s["totals"]
        for k in ("runs", "runs_ok", "runs_failed", "tool_calls", "denials",
                  "tokens_in", "tokens_out", "refused"):
            assert isinstance(tot[k], (int, float)), (k, tot)
        assert tot["runs"] >= 1, tot
        assert SECRET not in out.decode() and MODEL_KEY not in out.decode()

        st, h, out = af.status("/metrics")
        assert st == 200, st
        assert h["content-type"].startswith("text/plain; version=0.0.4"), h
        text = out.decode()
        assert text.endswith("\n")
        samples = {}
        for line in text.splitlines():
            if line.startswith("#"):
                assert re.fullmatch(r"# (HELP|TYPE) af_[a-z_]+ .+", line), line
                continue
            m = re.fullmatch(r'(af_[a-z_]+(?:\{[^}]*\})?) (-?[0-9.e+]+)', line)
            assert m, line
            samples[m.group(1)] = float(m.group(2))
        for name in ("af_runs_total", "af_tool_calls_total", "af_denials_total",
                     'af_model_tokens_total{direction="in"}',
                     'af_model_tokens_total{direction="out"}',
                     "af_runs_in_flight", "af_queue_depth",
                     'af_trigger_up{trigger="webhook"}', "af_uptime_seconds"):
            assert name in samples, (name, text)
        assert samples['af_trigger_up{trigger="webhook"}'] == 1
        assert samples["af_runs_total"] == tot["runs"]
        assert "# TYPE af_runs_total counter" in text
        assert "# TYPE af_runs_in_flight gauge" in text

        st, h, _ = af.status("/status", "POST")
        assert st == 405 and "GET" in h.get("allow", ""), (st, h)
        st, _, _ = af.status("/nope")
        assert st == 404, st
        st, _, _ = af.status("/healthz?verbose=1")
        assert st == 200, st
        st, _, _ = request(af.status_port, "GET", "/status",
                           headers={"X-Filler": "a" * (20 << 10)})
        assert st == 400, st
    with_af(t)


def test_queue_full_is_429():
    def t(af, model):
        ids = []
        for i in range(2):
            body = json.dumps({"n": i}).encode()
            st, _, out = af.hook(body=body, headers={
                "X-Hub-Signature-256": sign(body)})
            assert st == 202, (i, st, out)
            ids.append(json.loads(out)["run"])
        wait_for(lambda: json.loads(af.status("/status")[2])["runs_in_flight"]
                 == 1)
        s = json.loads(af.status("/status")[2])
        assert s["queued"] == 1, s
        body = b'{"n":2}'
        st, h, out = af.hook(body=body, headers={"X-Hub-Signature-256": sign(body)})
        assert st == 429, (st, out)
        assert h.get("retry-after", "").isdigit(), h
        assert "queue" in json.loads(out)["error"], out
        text = af.status("/metrics")[2].decode()
        assert "\naf_queue_depth 1\n" in text, text
        assert "\naf_runs_in_flight 1\n" in text, text
        s = json.loads(af.status("/status")[2])
        assert s["totals"]["refused"] >= 1, s
        for run in ids:
            wait_for(lambda: [r for r in af.audit() if r.get("event") ==
                              "run_end" and r.get("run") == run], timeout=20)
    with_af(t, model_step={"delay": 2},
            extra=["limits:", "  concurrent_runs: 1", "  queue: 1"])
