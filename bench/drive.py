#!/usr/bin/env python3
"""The measurements behind `make bench` (bench/run.sh calls this).

    drive.py TMPDIR RESULTS.json

Starts the real af binary (AF_BIN) with AF_ALLOW_NO_CONTAINER=1 and its
sandbox on, the bare evhttp baseline and the instant model stand-in
(AF_BUILD/bench/*), and measures, printing each figure as it goes:

  1. webhook events accepted per second (wrk, unsigned and signed) against the
     baseline, at several connection counts, with p50/p99 latency;
  2. af's CPU time per model step (from /proc/PID/stat) and wall time per
     step, with the instant model, for two run lengths;
  3. runs in flight at once against a model that holds each reply ~2 s, with
     af's thread count;
  4. af's resident memory idle and after that burst, against the baseline.

Every process started here has its PID appended to TMPDIR/pids, so that
run.sh's trap can end them if this script dies; they are stopped here in
`finally` blocks as well. Nothing here asserts a timing: it measures.
"""
import hashlib
import hmac
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

AF_BUILD = os.environ.get("AF_BUILD", "build/plain")
AF_BIN = os.environ.get("AF_BIN", os.path.join(AF_BUILD, "af"))
CLK_TCK = os.sysconf("SC_CLK_TCK")

WRK_SECONDS = int(os.environ.get("AF_BENCH_WRK_SECONDS", "4"))
CONCURRENCY = [1, 8, 32, 128]
BODY = ('{"action":"opened","issue":{"number":1347,"title":"Crash on start",'
        '"user":{"login":"octocat"},"labels":[]},'
        '"repository":{"full_name":"acme/app"}}')
HOOK_SECRET = "bench-hook-secret-7d2a"
STEP_RUNS = 300                 # figure 2: runs per run length
STEP_LENGTHS = [2, 10]          # model steps per run
BURST_RUNS = 1000               # figure 3
BURST_HOLD_MS = 2000
BURST_DRAIN_S = 240

TMP = None
PIDS = None


def say(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------- processes

class Proc:
    """A started process whose PID is on record for run.sh's trap."""

    def __init__(self, argv, env=None, stdout=None, stderr=None):
        self.p = subprocess.Popen(argv, env=env, stdout=stdout,
                                  stderr=stderr)
        with open(PIDS, "a") as f:
            f.write("%d\n" % self.p.pid)
        self.pid = self.p.pid

    def stop(self, sig=signal.SIGTERM, wait=10):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(wait)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def start_port_server(name, argv):
    """A helper that prints its port as its first line."""
    out = open(os.path.join(TMP, name + ".out"), "w+")
    err = open(os.path.join(TMP, name + ".err"), "w")
    p = Proc(argv, stdout=out, stderr=err)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out.seek(0)
        line = out.readline()
        if line.endswith("\n") and line.strip().isdigit():
            p.port = int(line)
            return p
        if p.p.poll() is not None:
            break
        time.sleep(0.02)
    p.stop(signal.SIGKILL)
    raise RuntimeError("%s did not start" % name)


def model_fast(*args):
    return start_port_server("model_fast", [
        os.path.join(AF_BUILD, "bench", "model_fast"), *args])


def af_config(model_port, concurrent, queue, secret=False, max_steps=50):
    return f"""name: bench-agent
model:
  provider: anthropic
  name: bench
  base_url: http://127.0.0.1:{model_port}
  api_key: ${{secret:model_key}}
  max_steps: {max_steps}
  timeout: 10m
triggers:
  webhook:
    listen: 127.0.0.1:0
    path: /hook
{"    secret: ${secret:hook_secret}" if secret else ""}
    prompt: "Event: {{{{body}}}}"
status:
  listen: 127.0.0.1:0
limits:
  concurrent_runs: {concurrent}
  queue: {queue}
  run_timeout: 30m
"""


class Af(Proc):
    """af run in its own folder under TMP; log to a file, ports from it."""
    count = 0

    def __init__(self, config):
        Af.count += 1
        self.dir = os.path.join(TMP, "af%d" % Af.count)
        for d in ("data", "skills", "secrets"):
            os.makedirs(os.path.join(self.dir, d))
        for k, v in (("model_key", "bench-key"),
                     ("hook_secret", HOOK_SECRET)):
            with open(os.path.join(self.dir, "secrets", k), "w") as f:
                f.write(v + "\n")
        cfg = os.path.join(self.dir, "agent.yaml")
        with open(cfg, "w") as f:
            f.write(config)
        env = dict(os.environ)
        env["AF_ALLOW_NO_CONTAINER"] = "1"
        env.pop("AF_NO_SANDBOX", None)
        self.logpath = os.path.join(self.dir, "af.log")
        log = open(self.logpath, "w")
        super().__init__([AF_BIN, "run", cfg,
                          "--data", os.path.join(self.dir, "data"),
                          "--skills", os.path.join(self.dir, "skills"),
                          "--secrets", os.path.join(self.dir, "secrets")],
                         env=env, stdout=log, stderr=subprocess.STDOUT)
        self.ports = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            text = self.log()
            for m in re.finditer(r"(\w+) listening on (\S+):(\d+)", text):
                self.ports[m.group(1)] = int(m.group(3))
            if "webhook" in self.ports and "status" in self.ports and \
                    "running (af" in text:
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.02)
        self.stop(signal.SIGKILL)
        raise RuntimeError("af did not start:\n" + self.log())

    def log(self):
        with open(self.logpath, errors="replace") as f:
            return f.read()

    def status(self):
        return json.loads(get("127.0.0.1", self.ports["status"], "/status"))

    def ended(self):
        t = self.status()["totals"]
        return t["runs_ok"] + t["runs_failed"]


def get(host, port, path, method="GET", body=None, timeout=30):
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        data = r.read().decode(errors="replace")
        if r.status >= 300:
            raise RuntimeError("%s %s: %d %s" % (method, path, r.status, data))
        return data
    finally:
        c.close()


# ---------------------------------------------------------------- /proc

def cpu_s(pid):
    """utime + stime of a process, in seconds (clock ticks)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def sched_ns(pid):
    """On-CPU time of every thread, in ns (schedstat), or None."""
    total = 0
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
    except OSError:
        return None
    return total


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                out[k] = int(v.split()[0])      # kB
            elif k in ("Threads", "Seccomp", "NoNewPrivs"):
                out[k] = int(v)
    return out


def heap_kb(pid):
    """Resident kB of the brk heap ([heap] in smaps), where glibc's main
    arena lives."""
    total, in_heap = 0, False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                in_heap = line.rstrip().endswith("[heap]")
            elif in_heap and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


# ---------------------------------------------------------------- figure 1

WRK_LUA = r"""
wrk.method = "POST"
wrk.body = %(body)s
wrk.headers["Content-Type"] = "application/json"
%(extra)s
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKJSON {\"requests\":%%d,\"duration_us\":%%d,\"status_errors\":%%d," ..
    "\"connect\":%%d,\"read\":%%d,\"write\":%%d,\"timeout\":%%d," ..
    "\"p50_us\":%%d,\"p99_us\":%%d,\"mean_us\":%%.1f}\n",
    summary.requests, summary.duration, e.status, e.connect, e.read,
    e.write, e.timeout, latency:percentile(50), latency:percentile(99),
    latency.mean))
end
"""


def lua_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def wrk_script(signed):
    extra = ""
    if signed:
        sig = hmac.new(HOOK_SECRET.encode(), BODY.encode(),
                       hashlib.sha256).hexdigest()
        extra = 'wrk.headers["X-Hub-Signature-256"] = "sha256=%s"' % sig
    path = os.path.join(TMP, "wrk-%s.lua" % ("signed" if signed else "plain"))
    with open(path, "w") as f:
        f.write(WRK_LUA % {"body": lua_string(BODY), "extra": extra})
    return path


def wrk(port, path, conns, script):
    threads = 1 if conns < 8 else 2
    out = open(os.path.join(TMP, "wrk.out"), "w+")
    p = Proc(["wrk", "-t%d" % threads, "-c%d" % conns,
              "-d%ds" % WRK_SECONDS, "--timeout", "10s", "-s", script,
              "http://127.0.0.1:%d%s" % (port, path)],
             stdout=out, stderr=subprocess.STDOUT)
    p.p.wait(WRK_SECONDS + 60)
    out.seek(0)
    text = out.read()
    m = re.search(r"WRKJSON (\{.*\})", text)
    if m is None:
        raise RuntimeError("wrk said:\n" + text)
    r = json.loads(m.group(1))
    secs = r["duration_us"] / 1e6
    r["ok"] = r["requests"] - r["status_errors"]
    r["rps"] = r["ok"] / secs if secs > 0 else 0.0
    return r


def fsync_floor():
    """One append + fdatasync per commit, as af's journal does, on TMP's
    file system: the most events per second a commit each can reach."""
    out = subprocess.run([os.path.join(AF_BUILD, "bench", "fsync_floor"),
                          TMP], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError("fsync_floor: " + out.stderr)
    return json.loads(out.stdout)


def figure_webhook(results):
    say("== 1. webhook events accepted per second (wrk, %d s each, body %d "
        "bytes)" % (WRK_SECONDS, len(BODY)))
    ff = fsync_floor()
    say("   floor: append + fdatasync on this file system: %.0f/s (p50 %.0f "
        "us, p99 %.0f us)" % (ff["per_s"], ff["p50_us"], ff["p99_us"]))
    say("   af: limits.queue 1000000, concurrent_runs 1, model holding its "
        "reply: acceptance only")
    base = start_port_server("baseline", [
        os.path.join(AF_BUILD, "bench", "baseline_evhttp")])
    # One run in flight, held by the model for the whole measurement, so
    # that af spends its time accepting, not running.
    model = model_fast("--delay-ms", "3600000")
    rows = []
    try:
        base_rss_idle = proc_status(base.pid)
        results["baseline_rss_idle_kb"] = base_rss_idle["VmRSS"]
        for c in CONCURRENCY:
            row = {"conns": c}
            row["baseline"] = wrk(base.port, "/hook", c, wrk_script(False))
            for mode, signed in (("af", False), ("af_signed", True)):
                a = Af(af_config(model.port, 1, 1000000, secret=signed))
                try:
                    cpu0 = cpu_s(a.pid)
                    r = wrk(a.ports["webhook"], "/hook", c, wrk_script(signed))
                    r["af_cpu_s"] = cpu_s(a.pid) - cpu0
                    st = a.status()
                    # What af says it took: one run started, the rest queued.
                    r["af_counted"] = st["totals"]["runs"] + st["queued"]
                    r["af_refused"] = st["totals"]["refused"]
                    r["threads"] = proc_status(a.pid)["Threads"]
                finally:
                    a.stop(signal.SIGKILL)
                row[mode] = r
            for mode in ("af", "af_signed"):
                row[mode]["ratio"] = row[mode]["rps"] / row["baseline"]["rps"] \
                    if row["baseline"]["rps"] else 0.0
            rows.append(row)
            b = row["baseline"]
            say("   c=%-4d baseline %8.0f/s p50 %7.0f us p99 %7.0f us" % (
                c, b["rps"], b["p50_us"], b["p99_us"]))
            for mode in ("af", "af_signed"):
                r = row[mode]
                say("          %-9s %7.0f/s p50 %7.0f us p99 %7.0f us  "
                    "ratio %.3f  (non-2xx %d, af counted %d of %d)" % (
                        mode, r["rps"], r["p50_us"], r["p99_us"], r["ratio"],
                        r["status_errors"], r["af_counted"], r["ok"]))
        results["baseline_rss_loaded_kb"] = proc_status(base.pid)["VmRSS"]
        ff2 = fsync_floor()
        say("   floor again: %.0f/s (p50 %.0f us, p99 %.0f us)" % (
            ff2["per_s"], ff2["p50_us"], ff2["p99_us"]))
        results["fsync_floor"] = [ff, ff2]
    finally:
        base.stop()
        model.stop()
    results["webhook"] = rows


# ---------------------------------------------------------------- figure 2

def post_many(port, path, bodies, conns=4):
    """POST every body over a few keep-alive connections; count 202s."""
    ok = [0]
    lock = threading.Lock()
    chunks = [bodies[i::conns] for i in range(conns)]

    def worker(chunk):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n = 0
        for b in chunk:
            c.request("POST", path, body=b,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            if r.status == 202:
                n += 1
        c.close()
        with lock:
            ok[0] += n

    ts = [threading.Thread(target=worker, args=(ch,)) for ch in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return ok[0]


def wait_ended(a, n, timeout, sample=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sample is not None:
            sample()
        if a.ended() >= n:
            return True
        time.sleep(0.05 if sample is None else 0.1)
    return False


def figure_steps(results):
    say("== 2. framework overhead per model step (instant model, runs one "
        "at a time)")
    out = []
    for steps in STEP_LENGTHS:
        model = model_fast("--steps", str(steps))
        a = None
        try:
            a = Af(af_config(model.port, 1, 100000))
            # Queue every run behind a held first model call, then time only
            # the steps: acceptance (journal inserts) stays out of it.
            get("127.0.0.1", model.port, "/_hold", "POST")
            n = post_many(a.ports["webhook"], "/hook",
                          [BODY] * STEP_RUNS)
            if n != STEP_RUNS:
                raise RuntimeError("only %d of %d events accepted" %
                                   (n, STEP_RUNS))
            time.sleep(0.3)
            m0 = json.loads(get("127.0.0.1", model.port, "/_stats"))
            cpu0, sch0 = cpu_s(a.pid), sched_ns(a.pid)
            mcpu0 = cpu_s(model.pid)
            t0 = time.monotonic()
            get("127.0.0.1", model.port, "/_release", "POST")
            if not wait_ended(a, STEP_RUNS, 120):
                raise RuntimeError("runs did not end:\n" + a.log()[-3000:])
            wall = time.monotonic() - t0
            cpu, sch = cpu_s(a.pid) - cpu0, sched_ns(a.pid)
            mcpu = cpu_s(model.pid) - mcpu0
            m1 = json.loads(get("127.0.0.1", model.port, "/_stats"))
            st = a.status()
            total_steps = STEP_RUNS * steps
            r = {
                "runs": STEP_RUNS, "steps_per_run": steps,
                "steps": total_steps,
                "runs_ok": st["totals"]["runs_ok"],
                "tool_calls": st["totals"]["tool_calls"],
                "model_requests": m1["requests"] - m0["requests"] + 1,
                "af_cpu_s": cpu, "wall_s": wall,
                "cpu_us_per_step": cpu / total_steps * 1e6,
                "sched_us_per_step": ((sch - sch0) / 1e3 / total_steps)
                if sch is not None and sch0 is not None else None,
                "wall_us_per_step": wall / total_steps * 1e6,
                "model_cpu_us_per_req": mcpu / max(1, m1["requests"] -
                                                   m0["requests"]) * 1e6,
                "threads": proc_status(a.pid)["Threads"],
            }
            out.append(r)
            say("   %d runs x %d steps: af CPU %.0f us/step (schedstat %s), "
                "wall %.0f us/step, model server CPU %.0f us/request; "
                "%d ok, %d tool calls" % (
                    STEP_RUNS, steps, r["cpu_us_per_step"],
                    "%.0f" % r["sched_us_per_step"]
                    if r["sched_us_per_step"] is not None else "n/a",
                    r["wall_us_per_step"], r["model_cpu_us_per_req"],
                    r["runs_ok"], r["tool_calls"]))
        finally:
            if a is not None:
                a.stop()
            model.stop()
    if len(out) == 2:
        a_, b_ = out
        ds = (b_["steps"] - a_["steps"])
        marg = (b_["af_cpu_s"] - a_["af_cpu_s"]) / ds * 1e6
        fixed = (a_["af_cpu_s"] * 1e6 - marg * a_["steps"]) / a_["runs"]
        results["step_marginal_cpu_us"] = marg
        results["run_fixed_cpu_us"] = fixed
        say("   marginal CPU per extra step (one model call + one tool call):"
            " %.0f us; fixed CPU per run (start, end, journal): %.0f us" %
            (marg, fixed))
    results["steps"] = out


# ---------------------------------------------------------------- figures 3, 4

def libs_floor(results):
    """VmRSS of bench/baseline_libs: af's libraries loaded, doing nothing."""
    out = open(os.path.join(TMP, "baseline_libs.out"), "w+")
    p = Proc([os.path.join(AF_BUILD, "bench", "baseline_libs")], stdout=out)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            out.seek(0)
            if out.readline() == "ready\n":
                break
            time.sleep(0.02)
        time.sleep(1.0)
        results["libs_floor"] = proc_status(p.pid)
        say("   af's libraries alone (bench/baseline_libs): VmRSS %d kB "
            "(anon %d, file %d)" % (
                results["libs_floor"]["VmRSS"],
                results["libs_floor"]["RssAnon"],
                results["libs_floor"]["RssFile"]))
    finally:
        p.stop()


def figure_burst(results):
    say("== 3. runs in flight at once (model holds each reply %d ms) and "
        "4. resident memory" % BURST_HOLD_MS)
    model = model_fast("--steps", "1", "--delay-ms", str(BURST_HOLD_MS))
    a = None
    try:
        libs_floor(results)
        a = Af(af_config(model.port, BURST_RUNS, 10000))
        time.sleep(1.0)
        idle = proc_status(a.pid)
        idle["heap_kb"] = heap_kb(a.pid)
        results["af_idle"] = idle
        say("   idle af: VmRSS %d kB (anon %d, file %d), %d thread(s); "
            "seccomp mode %d, no_new_privs %d" % (
                idle["VmRSS"], idle["RssAnon"], idle["RssFile"],
                idle["Threads"], idle.get("Seccomp", -1),
                idle.get("NoNewPrivs", -1)))
        peak = {"inflight": 0, "threads": 0, "rss": 0, "queued": 0,
                "samples": 0}

        def sample():
            st = a.status()
            ps = proc_status(a.pid)
            peak["samples"] += 1
            peak["inflight"] = max(peak["inflight"], st["runs_in_flight"])
            peak["queued"] = max(peak["queued"], st["queued"])
            peak["threads"] = max(peak["threads"], ps["Threads"])
            peak["rss"] = max(peak["rss"], ps["VmRSS"])

        t0 = time.monotonic()
        poster = threading.Thread(target=lambda: peak.__setitem__(
            "accepted", post_many(a.ports["webhook"], "/hook",
                                  [BODY] * BURST_RUNS, conns=8)))
        poster.start()
        while poster.is_alive():
            sample()
            time.sleep(0.05)
        poster.join()
        peak["accept_s"] = time.monotonic() - t0
        drained = wait_ended(a, BURST_RUNS, BURST_DRAIN_S, sample)
        peak["drain_s"] = time.monotonic() - t0
        peak["drained"] = drained
        m = json.loads(get("127.0.0.1", model.port, "/_stats"))
        peak["model_held_max"] = m["held_max"]
        st = a.status()
        peak["runs_ok"] = st["totals"]["runs_ok"]
        peak["runs_failed"] = st["totals"]["runs_failed"]
        results["burst"] = peak
        say("   %d events accepted in %.1f s; peak runs_in_flight %d, peak "
            "threads %d, peak model calls held at the model %d; all ended "
            "after %.1f s (%d ok, %d failed)" % (
                peak.get("accepted", 0), peak["accept_s"], peak["inflight"],
                peak["threads"], peak["model_held_max"], peak["drain_s"],
                peak["runs_ok"], peak["runs_failed"]))
        # af hands its heap's free pages back after 2 s with no run.
        time.sleep(3.0)
        after = proc_status(a.pid)
        after["heap_kb"] = heap_kb(a.pid)
        results["af_after"] = after
        say("   af after the burst drained: VmRSS %d kB (anon %d, of which "
            "brk heap %d; file %d; peak %d kB)" % (
                after["VmRSS"], after["RssAnon"], after["heap_kb"],
                after["RssFile"], after["VmHWM"]))
        say("   baseline evhttp server: VmRSS %d kB idle, %d kB after wrk" % (
            results.get("baseline_rss_idle_kb", 0),
            results.get("baseline_rss_loaded_kb", 0)))
        results["sandbox_log"] = [l for l in a.log().splitlines()
                                  if re.search(r"sandbox|landlock|seccomp|\[warn",
                                               l, re.I)][:10]
    finally:
        if a is not None:
            a.stop()
        model.stop()


def main():
    global TMP, PIDS
    TMP, outpath = sys.argv[1], sys.argv[2]
    PIDS = os.path.join(TMP, "pids")
    results = {"wrk_seconds": WRK_SECONDS, "body_bytes": len(BODY),
               "step_runs": STEP_RUNS, "burst_runs": BURST_RUNS,
               "burst_hold_ms": BURST_HOLD_MS}
    figures = sys.argv[3:] or ["webhook", "steps", "burst"]
    try:
        for name in figures:
            {"webhook": figure_webhook, "steps": figure_steps,
             "burst": figure_burst}[name](results)
    finally:
        with open(outpath, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
