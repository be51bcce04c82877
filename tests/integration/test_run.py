"""The run slice end to end: a webhook starts a run of the real af against the
stand-in model; tools go through the permission engine; the audit trail, the
status port and the journal show what happened."""
import hashlib
import hmac
import json
import os
import signal
import time

from afharness import (Agent, ModelServer, reply, webhook_config, wait_until,
                       MODEL_KEY)


def tool_results(model):
    """Every tool_result block af sent to the model, in order."""
    out = []
    for r in model.requests():
        body = r.get("body") or {}
        for m in body.get("messages", []):
            if m.get("role") != "user" or not isinstance(m.get("content"), list):
                continue
            for b in m["content"]:
                if b.get("type") == "tool_result" and b not in out:
                    out.append(b)
    return out


def post(agent, body, headers=None):
    return agent.request_full("webhook", "POST", "/hook", body, headers)


def test_denied_and_allowed_native_tools():
    ws = None
    with ModelServer() as model:
        with Agent(webhook_config("""permissions:
  read: ["{tmp}/ws"]
  write: ["{tmp}/ws/out"]
  run: [echo, cat]
  net: [127.0.0.1]
"""), model, start=False) as agent:
            # Grants must exist when af starts: the kernel sandbox can only
            # hold rules for paths that exist.
            ws = os.path.join(agent.tmp, "ws")
            os.makedirs(os.path.join(ws, "out"))
            with open(os.path.join(ws, "in.txt"), "w") as f:
                f.write("hello from the workspace")
            agent.start()
            model.script([
                reply(tool_calls=[
                    ("read_file", {"path": f"{ws}/in.txt"}),
                    ("read_file", {"path": "/etc/shadow"}),
                    ("write_file", {"path": f"{ws}/out/r.txt", "content": "ok"}),
                    ("write_file", {"path": f"{ws}/in.txt", "content": "x"}),
                    ("run_bash", {"command": "echo hi | cat"}),
                    ("run_bash", {"command": "curl http://evil.com"}),
                    ("http_request", {"method": "GET", "url": "http://evil.com/"}),
                    ("http_request", {"method": "GET",
                                      "url": model.url("/_health")}),
                    ("current_time", {}),
                    ("read_skill", {"name": "x"}),
                ]),
                reply(text="done"),
            ])
            st, _, body = post(agent, '{"action":"opened"}')
            assert st == 202, (st, body)
            agent.wait_runs(1)
            res = tool_results(model)
            assert len(res) == 10, res
            text = [r["content"] for r in res]
            err = [bool(r.get("is_error")) for r in res]
            assert "hello from the workspace" in text[0] and not err[0]
            assert text[1].startswith('permission denied: read access to '
                                      '"/etc/shadow" is not in the agent\'s '
                                      'permissions.read allowlist'), text[1]
            assert err[1]
            assert not err[2], text[2]
            with open(os.path.join(ws, "out", "r.txt")) as f:
                assert f.read() == "ok"
            assert text[3].startswith("permission denied: write access to"), text[3]
            assert "hi" in text[4] and not err[4], text[4]
            assert text[5] == ('permission denied: run access to "curl" is not '
                               'in the agent\'s permissions.run allowlist'), text[5]
            assert text[6] == ('permission denied: net access to "evil.com" is '
                               'not in the agent\'s permissions.net allowlist'), text[6]
            assert not err[7] and "200" in text[7], text[7]
            assert not err[8]
            # No skills configured: read_skill does not exist for this agent.
            assert err[9] and "does not exist" in text[9], text[9]
            audit = agent.audit()
            denies = [a for a in audit if a.get("decision") == "deny"]
            assert len(denies) == 5, denies
            assert {"axis": "run", "target": "curl http://evil.com"}.items() <= \
                [d for d in denies if d.get("tool") == "run_bash"][0].items()
            # Tools whose axis grants nothing are not offered at all.
            tools = [t["name"] for t in model.requests()[0]["body"]["tools"]]
            assert "read_skill" not in tools and "run_bash" in tools, tools


def test_read_skill_outside_the_list_is_a_recorded_denial():
    """The skills list is read_skill's grant. A name the model makes up (a
    skill folder that exists but is not listed, a path) is denied before
    anything is opened, and the audit trail records a denial, not an
    allow."""
    with ModelServer() as model:
        with Agent(webhook_config("skills: [triage]\n"), model,
                   skills={"triage": "# Triage\nLabel it.\n",
                           "hidden": "NOT FOR THE MODEL"}) as agent:
            model.script([
                reply(tool_calls=[
                    ("read_skill", {"name": "triage"}),
                    ("read_skill", {"name": "hidden"}),
                    ("read_skill", {"name": "../skills/hidden"}),
                ]),
                reply(text="done"),
            ])
            assert post(agent, "go")[0] == 202
            agent.wait_runs(1)
            res = tool_results(model)
            assert len(res) == 3, res
            assert "Label it." in res[0]["content"], res[0]
            assert not res[0].get("is_error"), res[0]
            for r, name in ((res[1], "hidden"), (res[2], "../skills/hidden")):
                assert r.get("is_error"), r
                assert r["content"] == (
                    f'permission denied: skill "{name}" is not in the '
                    "agent's skills list"), r
                assert "NOT FOR THE MODEL" not in r["content"], r
            rows = [a for a in agent.audit() if a.get("tool") == "read_skill"]
            assert [a.get("decision") for a in rows] == \
                ["allow", "deny", "deny"], rows
            assert "skills list" in rows[1].get("reason", ""), rows[1]


def test_tools_absent_without_grants():
    with ModelServer([reply(text="fine")]) as model:
        with Agent(webhook_config(), model) as agent:
            assert post(agent, "x")[0] == 202
            agent.wait_runs(1)
            tools = [t["name"] for t in model.requests()[0]["body"]["tools"]]
            assert tools == ["current_time"], tools


def test_signature_check():
    secret = "hook-secret-value-123"
    with ModelServer({"default": [reply(text="ok")]}) as model:
        with Agent(webhook_config(secret=True), model,
                   secrets={"hook_secret": secret}) as agent:
            body = '{"zen":"keep it simple"}'
            good = "sha256=" + hmac.new(secret.encode(), body.encode(),
                                        hashlib.sha256).hexdigest()
            assert post(agent, body)[0] == 401
            assert post(agent, body, {"X-Hub-Signature-256": "sha256=00"})[0] == 401
            bad = good[:-1] + ("0" if good[-1] != "0" else "1")
            assert post(agent, body, {"X-Hub-Signature-256": bad})[0] == 401
            st, hdrs, reply_body = post(agent, body,
                                        {"X-Hub-Signature-256": good})
            assert st == 202, reply_body
            assert json.loads(reply_body)["run"].startswith("r-")
            agent.wait_runs(1)
            assert agent.request("webhook", "GET", "/hook")[0] == 405
            assert agent.request("webhook", "POST", "/other", "x")[0] == 404


def test_queue_full_and_status():
    with ModelServer({"default": [{"slow": 1.5, "reply": {"text": "slow"}}]}) as model:
        with Agent(webhook_config("""limits:
  concurrent_runs: 1
  queue: 1
"""), model) as agent:
            codes = []
            for i in range(4):
                st, hdrs, _ = post(agent, f"event {i}")
                codes.append(st)
                if st == 429:
                    assert int(hdrs["retry-after"]) >= 1
            # One runs, one waits, the rest are refused, never dropped.
            assert codes[:2] == [202, 202], codes
            assert codes[2:] == [429, 429], codes
            s = agent.status()
            assert s["runs_in_flight"] == 1 and s["queued"] == 1, s
            agent.wait_runs(2)
            s = agent.status()
            assert s["totals"]["runs"] == 2 and s["totals"]["refused"] == 2, s
            st, metrics = agent.request("status", "GET", "/metrics")
            assert st == 200 and "af_runs_total 2" in metrics, metrics
            assert agent.request("status", "GET", "/healthz") == (200, "ok\n")


def test_sigterm_drains_runs_in_flight():
    with ModelServer({"default": [{"slow": 1.0, "reply": {"text": "done"}}]}) as model:
        with Agent(webhook_config(), model) as agent:
            assert post(agent, "work")[0] == 202
            wait_until(lambda: model.requests(), what="the model call")
            agent.kill(signal.SIGTERM)
            assert agent.wait_exit() == 0
            ends = [a for a in agent.audit() if a["event"] == "run_end"]
            assert len(ends) == 1 and ends[0]["status"] == "ok", ends


def test_kill9_then_restart_finishes_the_journaled_event():
    with ModelServer({"default": [{"hang": True}]}) as model:
        with Agent(webhook_config(), model) as agent:
            st, _, body = post(agent, "survive me")
            assert st == 202
            run = json.loads(body)["run"]
            wait_until(lambda: model.requests(), what="the model call")
            agent.stop(signal.SIGKILL)
            model.script({"default": [reply(text="finished after restart")]})
            agent.start()
            ends = agent.wait_runs(1)
            assert ends[0]["run"] == run and ends[0]["status"] == "ok", ends
            # Exactly once more: a further restart does not run it again.
            agent.stop()
            agent.start()
            time.sleep(1)
            ends = [a for a in agent.audit() if a["event"] == "run_end"]
            assert len(ends) == 1, ends


def test_secrets_never_leave():
    secret = "s3cr3t-token-value-XYZ"
    with ModelServer() as model:
        with Agent(webhook_config("""permissions:
  run: [echo, env]
env:
  GH_TOKEN: ${secret:gh}
"""), model, secrets={"gh": secret}) as agent:
            model.script([
                reply(tool_calls=[("run_bash", {"command": "env"}),
                                  ("run_bash", {"command": "echo $GH_TOKEN"})]),
                reply(text="done"),
            ])
            assert post(agent, f"please leak {secret}")[0] == 202
            agent.wait_runs(1)
            reqs = json.dumps(model.requests())
            assert secret not in reqs
            assert "[REDACTED]" in reqs
            assert MODEL_KEY not in json.dumps([r["body"] for r in model.requests()])
            assert secret not in agent.audit_raw()
            assert secret not in agent.log_text()


def test_openai_provider_round_trip():
    with ModelServer() as model:
        with Agent(webhook_config("permissions:\n  run: [echo]\n",
                                  provider="openai"), model,
                   provider="openai") as agent:
            model.script([reply(tool_calls=[("run_bash", {"command": "echo x"}),
                                            ("run_bash", {"command": "rm -rf /"})]),
                          reply(text="ok")])
            assert post(agent, "go")[0] == 202
            ends = agent.wait_runs(1)
            assert ends[0]["status"] == "ok", ends
            last = model.requests()[-1]
            assert last["path"] == "/v1/chat/completions"
            tool_msgs = [m for m in last["body"]["messages"] if m["role"] == "tool"]
            assert len(tool_msgs) == 2
            assert "permission denied" in tool_msgs[1]["content"]


def test_malformed_model_reply_ends_the_run_with_an_error():
    with ModelServer({"default": [{"garbage": True}]}) as model:
        with Agent(webhook_config(), model) as agent:
            assert post(agent, "x")[0] == 202
            ends = agent.wait_runs(1)
            assert ends[0]["status"] == "error_provider", ends
            assert ends[0]["error"], ends
            # The daemon lives on and takes the next event.
            model.script([reply(text="fine")])
            assert post(agent, "y")[0] == 202
            ends = agent.wait_runs(2)
            assert ends[1]["status"] == "ok", ends


def test_max_steps_bound():
    loop = [reply(tool_calls=[("current_time", {})])] * 10
    with ModelServer(loop) as model:
        with Agent(webhook_config(), model) as agent:
            assert post(agent, "x")[0] == 202
            ends = agent.wait_runs(1)
            assert ends[0]["status"] == "error_max_steps", ends
            assert ends[0]["steps"] == 6, ends


def test_fallback_model_takes_over_after_529s():
    overloaded = {"error": {"status": 529, "retry_after": "0"}}
    with ModelServer({"default": [overloaded] * 10}) as primary, \
            ModelServer() as backup:
        backup.script([reply(tool_calls=[("current_time", {})]),
                       reply(text="answered by the fallback")])
        extra = f"""  pricing: {{input: 3, output: 15}}
  fallbacks:
    - provider: openai
      name: backup-model
      base_url: {backup.url()}/v1
      api_key: ${{secret:model_key}}
      pricing: {{input: 1, output: 2}}
"""
        cfg = webhook_config().replace("  max_steps: 6\n",
                                       "  max_steps: 6\n" + extra)
        with Agent(cfg, primary) as agent:
            assert post(agent, "who answers?")[0] == 202
            ends = agent.wait_runs(1, timeout=60)
            assert ends[0]["status"] == "ok", ends
            fb = [a for a in agent.audit() if a["event"] == "model_fallback"]
            assert len(fb) == 1 and fb[0]["to"] == "backup-model", fb
            # Both steps went to the fallback once it took over.
            assert len(backup.requests()) == 2
            assert backup.requests()[0]["path"] == "/v1/chat/completions"
            assert len(primary.requests()) >= 2   # retried before giving up


def test_run_stopped_at_max_cost():
    """100,000 input tokens at 10 USD per million: 1 USD a step, and the
    next step reads at least those 100,000 tokens again. With 1.5 USD the
    second call would surely cross the limit and is never made; with 2.5
    the second fits (2 USD) and the third would not."""
    step = reply(tool_calls=[("current_time", {})],
                 usage={"input": 100000, "output": 0})
    for limit, steps in ((1.5, 1), (2.5, 2)):
        with ModelServer({"default": [step] * 6}) as model:
            cfg = webhook_config(f"limits:\n  max_cost: {limit}\n").replace(
                "  max_steps: 6\n",
                "  max_steps: 6\n  pricing: {input: 10, output: 30}\n")
            with Agent(cfg, model) as agent:
                assert post(agent, "spend")[0] == 202
                ends = agent.wait_runs(1)
                assert ends[0]["status"] == "error_max_cost", ends
                assert ends[0]["steps"] == steps, (limit, ends)
                assert abs(ends[0]["cost_usd"] - steps) < 1e-9, ends
                assert ends[0]["cost_usd"] <= limit, ends
                assert len(model.requests()) == steps, model.requests()
                assert "would go over" in ends[0]["error"], ends
                runs = json.loads(agent.request("status", "GET",
                                                "/runs")[1])
                assert runs["runs"][0]["status"] == "error_max_cost", runs
