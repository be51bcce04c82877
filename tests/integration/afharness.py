"""Shared pieces of the integration tests: a temporary agent folder, the
stand-in servers, the real af binary started on free ports, and readers for
what came out (HTTP replies, the audit trail, af's log).

Everything a test starts is stopped by Agent.stop()/Standin.stop(), which the
tests call in `finally` blocks (or use the context managers).
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AF_BUILD = os.environ.get("AF_BUILD", os.path.join(ROOT, "build/plain"))
AF_BIN = os.environ.get("AF_BIN", os.path.join(ROOT, AF_BUILD, "af"))
if not os.path.isabs(AF_BIN):
    AF_BIN = os.path.join(ROOT, AF_BIN)
STANDIN = os.path.join(ROOT, "tests", "standin")
MODEL_KEY = "test-key-4f1c"


class Standin:
    """A stand-in server script that prints its port on its first line."""

    def __init__(self, script, *args):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(STANDIN, script), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            encoding="utf-8", errors="replace")
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError(f"{script} did not start: {line!r} {err}")
        self.port = int(line.strip())
        # Drain both pipes so the server never blocks on a full one.
        for f in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=_drain, args=(f, None), daemon=True).start()

    def url(self, path=""):
        return f"http://127.0.0.1:{self.port}{path}"

    def request(self, method, path, body=None, headers=None):
        return http_request("127.0.0.1", self.port, method, path, body, headers)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class ModelServer(Standin):
    """tests/standin/model_server.py, scripted per test."""

    def __init__(self, script=None):
        super().__init__("model_server.py", "--key", MODEL_KEY)
        if script is not None:
            self.script(script)

    def script(self, script):
        st, body = self.request("POST", "/_script", json.dumps(script))
        assert st == 200, (st, body)

    def requests(self):
        st, body = self.request("GET", "/_requests")
        assert st == 200
        return json.loads(body)


def _drain(f, sink):
    for line in iter(f.readline, ""):
        if sink is not None:
            sink(line)


def http_request(host, port, method, path, body=None, headers=None,
                 timeout=30):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        if isinstance(body, str):
            body = body.encode()
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read().decode(errors="replace")
        return r.status, data
    finally:
        conn.close()


def http_request_full(host, port, method, path, body=None, headers=None,
                      timeout=30):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        if isinstance(body, str):
            body = body.encode()
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read().decode(errors="replace")
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data
    finally:
        conn.close()


def reply(text=None, tool_calls=None, stop=None, usage=None):
    """One scripted model step."""
    r = {}
    if text is not None:
        r["text"] = text
    if tool_calls is not None:
        r["tool_calls"] = [{"name": n, "input": i} for n, i in tool_calls]
    if stop is not None:
        r["stop"] = stop
    if usage is not None:
        r["usage"] = usage
    return {"reply": r}


def read_audit(path):
    """The complete records of an audit trail that af may still be writing.

    A reader racing a live af can see a record's write(2) half done (the
    kernel grows the file a page at a time), so an unterminated last line is
    left for the next read. Torn records after a crash are checked on the raw
    text once the process has exited."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        data = f.read()
    data = data[:data.rfind("\n") + 1]
    return [json.loads(l) for l in data.splitlines() if l.strip()]


class Agent:
    """One af agent in its own temporary folder.

    config: the YAML text, where {model_url} and {tmp} are substituted.
    secrets: name -> value, written to the secrets folder.
    """

    def __init__(self, config, model=None, secrets=None, skills=None,
                 provider="anthropic", env=None, start=True, sandbox=True):
        self.tmp = tempfile.mkdtemp(prefix="af-it-")
        self.data = os.path.join(self.tmp, "data")
        self.skills = os.path.join(self.tmp, "skills")
        self.secrets = os.path.join(self.tmp, "secrets")
        for d in (self.data, self.skills, self.secrets):
            os.makedirs(d)
        secrets = dict(secrets or {})
        secrets.setdefault("model_key", MODEL_KEY)
        for k, v in secrets.items():
            with open(os.path.join(self.secrets, k), "w") as f:
                f.write(v + "\n")
        for name, text in (skills or {}).items():
            os.makedirs(os.path.join(self.skills, name))
            with open(os.path.join(self.skills, name, "SKILL.md"), "w") as f:
                f.write(text)
        model_url = model.url() if model else "http://127.0.0.1:9"
        if provider == "openai":
            model_url += "/v1"
        # The agent folder holds only the config: a stdio MCP server may
        # read it, and af refuses a data or secrets folder inside it.
        os.makedirs(os.path.join(self.tmp, "agent"))
        self.config_path = os.path.join(self.tmp, "agent", "agent.yaml")
        with open(self.config_path, "w") as f:
            f.write(config.replace("{model_url}", model_url)
                    .replace("{tmp}", self.tmp))
        self.env = dict(os.environ)
        self.env["AF_ALLOW_NO_CONTAINER"] = "1"
        # Under the sandbox LeakSanitizer cannot inspect the process at exit
        # (no /proc/self/task, no ptrace); the unit tests carry the leak
        # checks. Any other sanitizer report still fails the test.
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")
        self.env.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
        if not sandbox:
            self.env["AF_NO_SANDBOX"] = "1"
        self.env.update(env or {})
        self.proc = None
        self.log = []
        self.log_lock = threading.Lock()
        self.ports = {}
        if start:
            self.start()

    def start(self, wait_for=("status",)):
        self.log = []
        self.ports = {}
        self.proc = subprocess.Popen(
            [AF_BIN, "run", self.config_path, "--data", self.data,
             "--skills", self.skills, "--secrets", self.secrets],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            encoding="utf-8", errors="replace", env=self.env)
        threading.Thread(target=_drain, args=(self.proc.stderr, self._line),
                         daemon=True).start()
        threading.Thread(target=_drain, args=(self.proc.stdout, self._line),
                         daemon=True).start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(w in self.ports for w in wait_for):
                return self
            if self.proc.poll() is not None:
                time.sleep(0.2)
                raise RuntimeError("af exited %s:\n%s" % (
                    self.proc.returncode, self.log_text()))
            time.sleep(0.02)
        raise RuntimeError("af did not start:\n" + self.log_text())

    def _line(self, line):
        with self.log_lock:
            self.log.append(line)
        m = re.search(r"(\w+) listening on (\S+):(\d+)", line)
        if m:
            self.ports[m.group(1)] = int(m.group(3))

    def log_text(self):
        with self.log_lock:
            return "".join(self.log)

    def wait_log(self, pattern, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.log_text()):
                return
            time.sleep(0.05)
        raise AssertionError(f"log never matched {pattern!r}:\n" +
                             self.log_text())

    def request(self, which, method, path, body=None, headers=None):
        return http_request("127.0.0.1", self.ports[which], method, path,
                            body, headers)

    def request_full(self, which, method, path, body=None, headers=None):
        return http_request_full("127.0.0.1", self.ports[which], method, path,
                                 body, headers)

    def status(self):
        st, body = self.request("status", "GET", "/status")
        assert st == 200, (st, body)
        return json.loads(body)

    def audit(self):
        return read_audit(os.path.join(self.data, "audit.jsonl"))

    def audit_raw(self):
        path = os.path.join(self.data, "audit.jsonl")
        if not os.path.exists(path):
            return ""
        with open(path) as f:
            return f.read()

    def wait_runs(self, n, timeout=30):
        """Wait until n runs have ended (per the audit trail)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ends = [r for r in self.audit() if r.get("event") == "run_end"]
            if len(ends) >= n:
                return ends
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{n} runs did not end:\n{self.audit_raw()}\n"
                             + self.log_text())

    def kill(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=40):
        return self.proc.wait(timeout)

    def stop(self, sig=signal.SIGTERM):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def sanitizer_report(self):
        text = self.log_text()
        for mark in ("ERROR: AddressSanitizer", "runtime error:",
                     "ERROR: LeakSanitizer"):
            if mark in text:
                return text
        return None

    def cleanup(self):
        self.stop(signal.SIGKILL)
        shutil.rmtree(self.tmp, ignore_errors=True)
        report = self.sanitizer_report()
        if report is not None:
            raise AssertionError("sanitizer report from af:\n" + report)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


def webhook_config(extra="", secret=False, provider="anthropic"):
    return f"""name: test-agent
model:
  provider: {provider}
  name: test-model
  base_url: {{model_url}}
  api_key: ${{secret:model_key}}
  max_steps: 6
  timeout: 10s
triggers:
  webhook:
    listen: 127.0.0.1:0
    path: /hook
{"    secret: ${secret:hook_secret}" if secret else ""}
    prompt: "Event: {{{{body}}}}"
status:
  listen: 127.0.0.1:0
""" + extra


def wait_until(fn, timeout=20, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


NETNS_ADDR = "10.200.0.1"


def in_own_netns(fn):
    """Run the test fn in a network namespace of its own, where the address
    NETNS_ADDR (on the namespace's own lo) stands for a non-loopback client: no
    traffic leaves the namespace. Returns False when namespaces are not
    available (the caller then says what covers the case instead)."""
    if os.environ.get("AF_IN_NETNS") == "1":
        fn()
        return True
    script = (
        "set -e; ip link set lo up; "
        f"ip addr add {NETNS_ADDR}/32 dev lo; "
        f"exec {sys.executable} -c 'import sys; sys.path.insert(0, \"{os.path.dirname(os.path.abspath(__file__))}\"); "
        f"import importlib.util as u; s = u.spec_from_file_location(\"m\", \"{fn.__code__.co_filename}\"); "
        f"m = u.module_from_spec(s); s.loader.exec_module(m); getattr(m, \"{fn.__name__}\")()'")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        return False
    env = dict(os.environ, AF_IN_NETNS="1")
    r = subprocess.run(["unshare", "-n", "sh", "-c", script], env=env,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError("in the network namespace:\n" + r.stdout +
                             r.stderr)
    return True
