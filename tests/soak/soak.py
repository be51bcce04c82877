#!/usr/bin/env python3
"""A bounded soak run: one af with every network trigger active (a signed
webhook, Telegram, Discord, and a stdio MCP server when tests/mcp is
installed) against the stand-ins, under steady load for SOAK_SECONDS, with
the faults a long-lived daemon meets: gateway drops and 429s.

    AF_BUILD=build/plain AF_BIN=build/plain/af SOAK_SECONDS=600 \
        python3 tests/soak/soak.py

af's VmRSS and open fd count are sampled every SAMPLE_S seconds. After the
warm-up (the first WARMUP_FRACTION of the run) they must stay flat: the RSS
least-squares slope, extrapolated over an hour, under RSS_SLOPE_MAX_MIB_H;
the last quarter's median RSS within 10 % + 1 MiB of the first quarter's;
the fd median within FD_GROWTH_MAX. Every accepted event must end (audit
run_end, each exactly once), every run must end "ok", af must stop cleanly
and print no sanitizer report. The last line is "1 passed, 0 failed" or
"0 passed, 1 failed"; the exit status follows it.

Under AddressSanitizer RSS is dominated by the allocator's quarantine, so
the RSS bounds are reported but not enforced there; the fd bound is.
"""
import hashlib
import hmac
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import afharness  # noqa: E402
from afharness import Agent, ModelServer, reply  # noqa: E402
from test_discord import BOT_ID, Discord  # noqa: E402
from test_discord import TOKEN as DC_TOKEN  # noqa: E402
from test_telegram import Telegram  # noqa: E402
from test_telegram import TOKEN as TG_TOKEN  # noqa: E402

SOAK_SECONDS = int(os.environ.get("SOAK_SECONDS", "600"))
SAMPLE_S = 5.0
WARMUP_FRACTION = 0.2
RSS_SLOPE_MAX_MIB_H = 4.0
RSS_GROWTH_FRACTION = 0.10
RSS_GROWTH_SLACK_KIB = 1024
FD_GROWTH_MAX = 4
DRAIN_S = 120

# The load: one event per interval from each source.
WEBHOOK_EVERY_S = 0.5
TELEGRAM_EVERY_S = 1.5
DISCORD_EVERY_S = 1.5
BAD_SIGNATURE_EVERY = 25        # every Nth webhook is signed wrongly: 401
TELEGRAM_429_EVERY_S = 40
DISCORD_DROP_EVERY_S = 60
TG_CHATS = (1001, 1002, -1009007199254740993)
DC_CHANNELS = ("1234567890123456789", "1234567890123456790")

HOOK_SECRET = "soak-hook-secret-71ab"
MCP_DIR = os.path.join(afharness.ROOT, "tests", "mcp")
EVERYTHING = os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol",
                          "server-everything", "dist", "index.js")


class LoggedModel(ModelServer):
    """The model stand-in with its stderr kept in a file, so a stand-in
    that dies mid-soak leaves its reason behind."""

    def __init__(self, logpath):
        self.logpath = logpath
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(afharness.STANDIN,
                                          "model_server.py"),
             "--key", afharness.MODEL_KEY],
            stdout=subprocess.PIPE, stderr=open(logpath, "w"), text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"model_server.py did not start: {line!r}")
        self.port = int(line)
        threading.Thread(target=afharness._drain,
                         args=(self.proc.stdout, None), daemon=True).start()

    def stderr_tail(self):
        with open(self.logpath, errors="replace") as f:
            return f.read()[-1500:]


def sign(body, secret=HOOK_SECRET):
    return "sha256=" + hmac.new(secret.encode(), body,
                                hashlib.sha256).hexdigest()


def config(tg, dc, ws, mcp):
    reads = [ws] + ([MCP_DIR] if mcp else [])
    text = f"""name: soak-agent
model:
  provider: anthropic
  name: test-model
  base_url: {{model_url}}
  api_key: ${{secret:model_key}}
  max_steps: 6
  timeout: 10s
permissions:
  net: [api.example.com]
  read: [{", ".join(json.dumps(r) for r in reads)}]
triggers:
  webhook:
    listen: 127.0.0.1:0
    path: /hook
    secret: ${{secret:hook_secret}}
    prompt: "Event: {{{{body}}}}"
  telegram:
    token: ${{secret:tg_token}}
    api_base: http://127.0.0.1:{tg.port}
  discord:
    token: ${{secret:dc_token}}
    gateway: ws://127.0.0.1:{dc.gw_port}/?v=10&encoding=json
    api_base: http://127.0.0.1:{dc.port}/api/v10
status:
  listen: 127.0.0.1:0
"""
    if mcp:
        text += f"""tools:
  mcp:
    everything:
      command: [node, "{EVERYTHING}", stdio]
"""
    return text


def script(ws, mcp):
    """Each conversation: two tool-call steps, then the answer. A
    conversation the stand-in has seen before (Telegram and Discord keep
    history, and the stand-in keys a conversation by its first user
    message) gets the plain answer."""
    second = [("read_file", {"path": os.path.join(ws, "note.txt")})]
    if mcp:
        second.append(("everything__echo", {"message": "soak"}))
    return {
        "default": [
            reply(tool_calls=[
                ("current_time", {}),
                ("http_request", {"method": "GET",
                                  "url": "https://denied.example.net/x"})]),
            reply(tool_calls=second),
            reply(text="soak answer", stop="end_turn"),
        ],
        "exhausted": reply(text="soak answer (again)", stop="end_turn"),
    }


def proc_sample(pid):
    """(VmRSS in KiB, open fds) of pid."""
    rss = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def fit(xs, ys):
    """Least-squares slope of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def is_asan(path):
    with open(path, "rb") as f:
        data = f.read()
    # gcc links the runtime dynamically (libasan.so); clang statically.
    return b"__asan_init" in data or b"libasan.so" in data


class Soak:
    def __init__(self):
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.errors = []
        self.samples = []           # (t, rss KiB, fds)
        self.wh_ids = []            # run ids of accepted webhooks
        self.wh_refused = 0         # 401 for a bad signature, as expected
        self.wh_other = {}          # any other status: counted as an error
        self.tg_pushed = 0
        self.dc_pushed = 0
        self.tg_429 = 0
        self.dc_drops = 0
        self.t0 = None

    def error(self, msg):
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(msg)

    def every(self, interval, fn):
        """Call fn at a fixed rate until stopped; failures are errors."""
        n = 0
        nxt = time.monotonic()
        while not self.stop_ev.is_set():
            try:
                fn(n)
            except Exception as e:   # noqa: BLE001 - a soak records all
                self.error(f"{fn.__name__}: {e!r}")
            n += 1
            nxt += interval
            self.stop_ev.wait(max(0.0, nxt - time.monotonic()))

    # The drivers.

    def webhook(self, n):
        body = json.dumps({"n": n, "kind": "soak",
                           "pad": "x" * random.randrange(0, 2048)}).encode()
        bad = n % BAD_SIGNATURE_EVERY == BAD_SIGNATURE_EVERY - 1
        st, text = self.agent.request(
            "webhook", "POST", "/hook", body,
            {"Content-Type": "application/json",
             "X-Hub-Signature-256": sign(body, "wrong" if bad else
                                         HOOK_SECRET)})
        if bad and st == 401:
            self.wh_refused += 1
        elif not bad and st == 202:
            self.wh_ids.append(json.loads(text)["run"])
        else:
            self.wh_other[st] = self.wh_other.get(st, 0) + 1
            raise AssertionError(f"webhook {n} (bad={bad}): {st} {text}")

    def telegram(self, n):
        self.tg.push(TG_CHATS[n % len(TG_CHATS)], f"soak telegram {n}")
        self.tg_pushed += 1

    def telegram_429(self, n):
        if n == 0:
            return
        method = "getUpdates" if n % 2 else "sendMessage"
        self.tg.fail(method, 429, retry_after=1)
        self.tg_429 += 1

    def discord(self, n):
        self.dc.push(f"<@{BOT_ID}> soak discord {n}",
                     channel=DC_CHANNELS[n % len(DC_CHANNELS)],
                     mentions=[BOT_ID])
        self.dc_pushed += 1

    def discord_drop(self, n):
        if n == 0:
            return
        self.dc.control("/_drop", {})
        self.dc_drops += 1

    def sample(self, n):
        for name, p in (("af", self.agent.proc), ("model stand-in",
                        self.model.proc), ("telegram stand-in",
                        self.tg.proc), ("discord stand-in", self.dc.proc)):
            if p.poll() is not None:
                why = (":\n" + self.model.stderr_tail()
                       if p is self.model.proc else "")
                self.error(f"{name} exited {p.returncode}{why}")
                self.stop_ev.set()
                return
        rss, fds = proc_sample(self.agent.proc.pid)
        self.samples.append((time.monotonic() - self.t0, rss, fds))

    # The run.

    def run(self):
        self.mcp = os.path.exists(EVERYTHING)
        if not self.mcp:
            print("note: tests/mcp/node_modules not installed; the soak "
                  "runs without an MCP server (tests/mcp/install.sh)")
        self.asan = is_asan(afharness.AF_BIN)
        self.tg = self.dc = self.model = self.agent = None
        log = ""
        try:
            self.tg = Telegram()
            self.dc = Discord()
            self.model = LoggedModel(os.path.join(
                tempfile.gettempdir(), f"soak-model-{os.getpid()}.log"))
            self.agent = Agent("", model=self.model, start=False,
                               secrets={"tg_token": TG_TOKEN,
                                        "dc_token": DC_TOKEN,
                                        "hook_secret": HOOK_SECRET})
            ws = os.path.join(self.agent.tmp, "ws")
            os.makedirs(ws)
            with open(os.path.join(ws, "note.txt"), "w") as f:
                f.write("a note the soak agent reads\n")
            self.model.script(script(ws, self.mcp))
            with open(self.agent.config_path, "w") as f:
                f.write(config(self.tg, self.dc, ws, self.mcp).replace(
                    "{model_url}", self.model.url()))
            self.agent.start(wait_for=("status", "webhook"))
            afharness.wait_until(
                lambda: self.agent.status()["triggers"]["discord"]["state"]
                == "up", 20, "discord up")
            self.load()
            self.drain()
            self.verify_events()
            rc = self.agent.stop()
            if rc != 0:
                self.error(f"af stopped with status {rc}")
            if self.agent.sanitizer_report() is not None:
                self.error("sanitizer report in af's log")
        except Exception:   # noqa: BLE001
            self.error("soak aborted:\n" + traceback.format_exc())
        finally:
            if self.agent:
                log = self.agent.log_text()
            if self.agent:
                try:
                    self.agent.cleanup()
                except AssertionError as e:
                    self.error(str(e)[:2000])
            for s in (self.model, self.dc, self.tg):
                if s:
                    s.stop()
        self.log_tail = log.splitlines()[-20:]
        return self.report()

    def load(self):
        self.t0 = time.monotonic()
        drivers = [(SAMPLE_S, self.sample),
                   (WEBHOOK_EVERY_S, self.webhook),
                   (TELEGRAM_EVERY_S, self.telegram),
                   (DISCORD_EVERY_S, self.discord),
                   (TELEGRAM_429_EVERY_S, self.telegram_429),
                   (DISCORD_DROP_EVERY_S, self.discord_drop)]
        threads = [threading.Thread(target=self.every, args=d, daemon=True)
                   for d in drivers]
        for t in threads:
            t.start()
        self.stop_ev.wait(SOAK_SECONDS)
        self.stop_ev.set()
        for t in threads:
            t.join(30)
        # One last sample, after the load, before the drain.
        if self.agent.proc.poll() is None:
            rss, fds = proc_sample(self.agent.proc.pid)
            self.samples.append((time.monotonic() - self.t0, rss, fds))

    def drain(self):
        """Wait until every accepted event has its run_end."""
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline:
            if self.agent.proc.poll() is not None:
                raise AssertionError("af died during the drain")
            st = self.agent.status()
            audit = self.agent.audit()
            starts = [a for a in audit if a.get("event") == "run_start"]
            ends = {a["run"] for a in audit if a.get("event") == "run_end"}
            want = len(self.wh_ids) + self.tg_pushed + self.dc_pushed
            if (st["runs_in_flight"] == 0 and st["queued"] == 0 and
                    len(starts) >= want and
                    all(s["run"] in ends for s in starts)):
                return
            time.sleep(1)
        self.error(f"runs still going {DRAIN_S} s after the load stopped")

    def verify_events(self):
        audit = self.agent.audit()
        starts = [a for a in audit if a.get("event") == "run_start"]
        ends = [a for a in audit if a.get("event") == "run_end"]
        self.by_trigger = {}
        for s in starts:
            t = s.get("trigger")
            self.by_trigger[t] = self.by_trigger.get(t, 0) + 1
        end_of = {}
        for e in ends:
            if e["run"] in end_of:
                self.error(f"run {e['run']} ended twice")
            end_of[e["run"]] = e
        start_ids = [s["run"] for s in starts]
        if len(set(start_ids)) != len(start_ids):
            self.error("a run started twice")
        missing = [s for s in start_ids if s not in end_of]
        if missing:
            self.error(f"{len(missing)} runs without run_end: {missing[:5]}")
        lost = [i for i in self.wh_ids if i not in set(start_ids)]
        if lost:
            self.error(f"{len(lost)} accepted webhooks never ran: {lost[:5]}")
        for trig, pushed in (("webhook", len(self.wh_ids)),
                             ("telegram", self.tg_pushed),
                             ("discord", self.dc_pushed)):
            got = self.by_trigger.get(trig, 0)
            if got != pushed:
                self.error(f"{trig}: {pushed} events sent, {got} runs")
        self.statuses = {}
        for e in ends:
            self.statuses[e["status"]] = self.statuses.get(e["status"], 0) + 1
        bad = {k: v for k, v in self.statuses.items() if k != "ok"}
        if bad:
            self.error(f"runs not ok: {bad}; e.g. " + json.dumps(
                next(e for e in ends if e["status"] != "ok"))[:300])
        self.tools = {}
        for a in audit:
            if a.get("event") == "tool":
                k = f"{a['tool']}:{a['decision']}"
                self.tools[k] = self.tools.get(k, 0) + 1
        if not self.tools.get("http_request:deny"):
            self.error("no denied http_request in the audit trail")
        if not self.tools.get("read_file:allow"):
            self.error("no allowed read_file in the audit trail")
        self.runs = len(ends)
        try:
            rec = self.dc.record()
            self.dc_conns = len(rec["connections"])
            self.dc_resumes = len(rec["resume"])
        except Exception:   # noqa: BLE001
            self.dc_conns = self.dc_resumes = None

    def check_flat(self):
        """The RSS and fd checks over the samples after the warm-up."""
        out = {}
        post = [s for s in self.samples
                if s[0] >= WARMUP_FRACTION * SOAK_SECONDS]
        if len(post) < 8:
            self.error(f"only {len(post)} samples after the warm-up")
            return out
        q = max(1, len(post) // 4)
        xs = [s[0] for s in post]
        rss = [s[1] for s in post]
        fds = [s[2] for s in post]
        slope_kib_s = fit(xs, rss)
        out["rss_slope_mib_h"] = slope_kib_s * 3600 / 1024
        out["fd_slope_h"] = fit(xs, fds) * 3600
        out["rss_q1"] = statistics.median(rss[:q])
        out["rss_q4"] = statistics.median(rss[-q:])
        out["fd_q1"] = statistics.median(fds[:q])
        out["fd_q4"] = statistics.median(fds[-q:])
        rss_errors = []
        if out["rss_slope_mib_h"] > RSS_SLOPE_MAX_MIB_H:
            rss_errors.append(f"RSS slope {out['rss_slope_mib_h']:.2f} "
                              f"MiB/h > {RSS_SLOPE_MAX_MIB_H}")
        limit = out["rss_q1"] * (1 + RSS_GROWTH_FRACTION) + \
            RSS_GROWTH_SLACK_KIB
        if out["rss_q4"] > limit:
            rss_errors.append(f"RSS last-quarter median {out['rss_q4']:.0f} "
                              f"KiB > {limit:.0f} KiB")
        for e in rss_errors:
            if self.asan:
                out.setdefault("notes", []).append(
                    e + " (not enforced under AddressSanitizer)")
            else:
                self.error(e)
        if out["fd_q4"] - out["fd_q1"] > FD_GROWTH_MAX:
            self.error(f"fds grew: median {out['fd_q1']} -> {out['fd_q4']}")
        return out

    def report(self):
        flat = self.check_flat() if self.samples else {}
        p = print
        p(f"== soak: {SOAK_SECONDS} s, af {afharness.AF_BIN}"
          f"{' (ASan)' if self.asan else ''}, mcp "
          f"{'on' if self.mcp else 'off'}")
        if self.samples:
            s0, s1 = self.samples[0], self.samples[-1]
            p(f"samples: {len(self.samples)} every {SAMPLE_S:.0f} s, "
              f"warm-up {WARMUP_FRACTION * SOAK_SECONDS:.0f} s")
            p(f"rss KiB: start {s0[1]}  end {s1[1]}  max "
              f"{max(s[1] for s in self.samples)}")
            p(f"fds:     start {s0[2]}  end {s1[2]}  max "
              f"{max(s[2] for s in self.samples)}")
        if flat:
            p(f"after warm-up: rss slope {flat['rss_slope_mib_h']:+.3f} "
              f"MiB/h (bound {RSS_SLOPE_MAX_MIB_H}), median q1 "
              f"{flat['rss_q1']:.0f} -> q4 {flat['rss_q4']:.0f} KiB; fd "
              f"slope {flat['fd_slope_h']:+.2f}/h, median q1 "
              f"{flat['fd_q1']} -> q4 {flat['fd_q4']}")
            for n in flat.get("notes", []):
                p("note: " + n)
        runs = getattr(self, "runs", None)
        if runs is not None:
            p(f"runs completed: {runs} {self.by_trigger}; statuses "
              f"{self.statuses}")
            p(f"tool decisions: {self.tools}")
        p(f"load: webhooks accepted {len(self.wh_ids)}, bad signatures "
          f"refused {self.wh_refused}, other {self.wh_other}; telegram "
          f"{self.tg_pushed} (429s injected {self.tg_429}); discord "
          f"{self.dc_pushed} (drops {self.dc_drops}, connections "
          f"{getattr(self, 'dc_conns', None)}, resumes "
          f"{getattr(self, 'dc_resumes', None)})")
        p(f"errors: {len(self.errors)}")
        for e in self.errors:
            p("  " + e)
        if self.errors:
            p("af log tail:")
            for line in self.log_tail:
                p("  " + line)
        ok = not self.errors
        p("1 passed, 0 failed" if ok else "0 passed, 1 failed")
        return 0 if ok else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    sys.exit(Soak().run())
