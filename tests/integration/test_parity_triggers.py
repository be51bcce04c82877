"""The parity triggers end to end: cron entries driven by the test clock
(AF_TEST_CLOCK_FILE), GitHub deliveries on their own listener, and the
webhook's bearer token and synchronous replies, with the real af against the
stand-in model."""
import hashlib
import hmac
import json
import os
import socket
import sqlite3
import time

from afharness import Agent, ModelServer, reply, wait_until, http_request_full

GH_SECRET = "gh-secret-5a1f09"
TOKEN = "tok-77e2c1d4b9"
HOOK_SECRET = "hook-secret-0c3d"

# 2030-01-01T08:59:00Z, a Tuesday.
T0 = 1893488340


def model_block(extra=""):
    return """name: parity-agent
model:
  provider: anthropic
  name: test-model
  base_url: {model_url}
  api_key: ${secret:model_key}
  max_steps: 4
  timeout: 10s
""" + extra


def set_clock(path, t):
    # Rewritten in place: af keeps the file open from before its sandbox.
    with open(path, "r+" if os.path.exists(path) else "w") as f:
        f.truncate(0)
        f.write(f"{t}\n")


def prompts(model):
    """The last user text of each request the stand-in saw."""
    out = []
    for r in model.requests():
        msgs = (r.get("body") or {}).get("messages", [])
        if msgs:
            c = msgs[-1]["content"]
            out.append(c if isinstance(c, str) else
                       "\n".join(b.get("text", "") for b in c))
    return out


def runs_ended(agent):
    return [a for a in agent.audit() if a.get("event") == "run_end"]


def cron_agent(model, schedule, tz=None):
    cfg = model_block(f"""triggers:
  cron:
    - schedule: "{schedule}"
      prompt: "daily report"
""" + (f"      timezone: {tz}\n" if tz else "") + """status:
  listen: 127.0.0.1:0
""")
    agent = Agent(cfg, model, start=False)
    agent.clock = os.path.join(agent.tmp, "clock")
    agent.env["AF_TEST_CLOCK_FILE"] = agent.clock
    return agent


def test_cron_fires_at_its_minute_not_before():
    with ModelServer({"default": [reply(text="report sent")]}) as model:
        with cron_agent(model, "0 9 * * *") as agent:
            set_clock(agent.clock, T0)
            agent.start()
            agent.wait_log(r"trigger cron: up")
            set_clock(agent.clock, T0 + 30)     # 08:59:30
            time.sleep(2.5)
            assert model.requests() == [], "fired before its minute"
            assert runs_ended(agent) == []
            set_clock(agent.clock, T0 + 60)     # 09:00:00
            ends = agent.wait_runs(1)
            assert ends[0]["status"] == "ok", ends
            assert prompts(model) == ["daily report"], prompts(model)
            starts = [a for a in agent.audit() if a["event"] == "run_start"]
            assert starts[0]["trigger"] == "cron", starts
            # The same minute and the rest of the day start nothing more.
            set_clock(agent.clock, T0 + 90)
            time.sleep(1.5)
            set_clock(agent.clock, T0 + 3600)
            time.sleep(1.5)
            assert len(runs_ended(agent)) == 1
            entry = agent.status()["triggers"]["cron"]["entries"][0]
            assert entry["next"] == "2030-01-02T09:00:00.000Z", entry
            assert entry["fired"] == 1, entry


def test_cron_in_a_time_zone():
    # 09:00 in Berlin is 08:00 UTC in January.
    with ModelServer({"default": [reply(text="ok")]}) as model:
        with cron_agent(model, "0 9 * * *", "Europe/Berlin") as agent:
            set_clock(agent.clock, T0 - 3600 - 30)   # 07:58:30 UTC
            agent.start()
            agent.wait_log(r"trigger cron: up")
            entry = agent.status()["triggers"]["cron"]["entries"][0]
            assert entry["next"] == "2030-01-01T08:00:00.000Z", entry
            set_clock(agent.clock, T0 - 3600 + 60)   # 08:00 UTC
            agent.wait_runs(1)


def test_cron_missed_ticks_run_once_at_start():
    with ModelServer({"default": [reply(text="ok")]}) as model:
        with cron_agent(model, "*/10 * * * *") as agent:
            set_clock(agent.clock, T0)
            agent.start()
            agent.wait_log(r"trigger cron: up")
            time.sleep(1.2)
            agent.stop()
            assert runs_ended(agent) == []
            # Three hours down: eighteen ticks missed, one run at start.
            set_clock(agent.clock, T0 + 3 * 3600)
            agent.start()
            agent.wait_runs(1)
            agent.wait_log(r"missed while af was down")
            time.sleep(2.5)
            assert len(runs_ended(agent)) == 1, runs_ended(agent)
            # A restart with nothing missed since runs nothing.
            agent.stop()
            agent.start()
            agent.wait_log(r"trigger cron: up")
            time.sleep(2.5)
            assert len(runs_ended(agent)) == 1, runs_ended(agent)
            assert len(model.requests()) == 1


def cron_config(entries):
    """triggers.cron from (schedule, prompt) pairs."""
    return model_block("triggers:\n  cron:\n" + "".join(
        f'    - schedule: "{sch}"\n      prompt: "{p}"\n'
        for sch, p in entries) + "status:\n  listen: 127.0.0.1:0\n")


def test_cron_cursor_follows_the_entry_not_its_place():
    """Each entry keeps its own last fire time when the list is reordered;
    an edited entry starts fresh, with no catch-up run."""
    day = 86400
    alpha = ("0 9 * * *", "alpha")
    with ModelServer({"default": [reply(text="ok")]}) as model:
        agent = Agent(cron_config([alpha]), model, start=False)
        with agent:
            agent.clock = os.path.join(agent.tmp, "clock")
            agent.env["AF_TEST_CLOCK_FILE"] = agent.clock

            def restart(entries, t):
                agent.stop()
                with open(agent.config_path, "w") as f:
                    f.write(cron_config(entries).replace("{model_url}",
                                                         model.url()))
                set_clock(agent.clock, t)
                agent.start()
                agent.wait_log(r"trigger cron: up")

            set_clock(agent.clock, T0)
            agent.start()
            agent.wait_log(r"trigger cron: up")
            set_clock(agent.clock, T0 + 60)             # day 1, 09:00
            agent.wait_runs(1)

            # Day 2, 09:30: alpha missed its tick; beta, new and first in
            # the list, must not take alpha's time and catch up on it.
            restart([("0 9 * * *", "beta"), alpha], T0 + day + 1800)
            agent.wait_runs(2)
            time.sleep(2.5)
            assert prompts(model) == ["alpha", "alpha"], prompts(model)
            entries = agent.status()["triggers"]["cron"]["entries"]
            assert [e["fired"] for e in entries] == [0, 1], entries

            # Day 3, 09:30: beta missed its tick and catches up; alpha,
            # edited, is a new entry and does not.
            restart([("0 9 * * *", "beta"), ("0 9 * * *", "alpha v2")],
                    T0 + 2 * day + 1800)
            agent.wait_runs(3)
            time.sleep(2.5)
            assert prompts(model) == ["alpha", "alpha", "beta"], \
                prompts(model)
            assert len(runs_ended(agent)) == 3

            # Two identical entries keep a cursor each: both catch up.
            twin = ("*/30 * * * *", "twin")
            restart([twin, twin], T0 + 2 * day + 1800)
            time.sleep(1.5)
            assert len(runs_ended(agent)) == 3
            restart([twin, twin], T0 + 2 * day + 3 * 3600)
            agent.wait_runs(5)
            time.sleep(2.5)
            assert prompts(model)[3:] == ["twin", "twin"], prompts(model)
            assert len(runs_ended(agent)) == 5


def github_agent(model):
    cfg = model_block("""triggers:
  github:
    listen: 127.0.0.1:0
    path: /gh
    secret: ${secret:gh_secret}
    events: [pull_request.opened, issues]
    repos: ["acme/*", other/one]
status:
  listen: 127.0.0.1:0
""")
    return Agent(cfg, model, secrets={"gh_secret": GH_SECRET},
                 start=False)


def gh_post(agent, event, payload, delivery, secret=GH_SECRET, sign=True):
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": event,
               "X-GitHub-Delivery": delivery}
    if sign:
        headers["X-Hub-Signature-256"] = "sha256=" + hmac.new(
            secret.encode(), body, hashlib.sha256).hexdigest()
    st, hdrs, text = agent.request_full("github", "POST", "/gh", body,
                                        headers)
    return st, hdrs, json.loads(text) if text.strip() else None


def pr(action, repo):
    return {"action": action, "number": 7,
            "pull_request": {"title": "Fix the frobnicator"},
            "repository": {"full_name": repo}}


def test_github_ignored_body_replayed_under_another_event_is_a_duplicate():
    """The signature covers the body, not X-GitHub-Event. A delivery the
    filters ignored (a closed pull request), sent again under an event name
    they let through (issues, any action), is the same signed body: a
    duplicate, and nothing runs."""
    with ModelServer({"default": [reply(text="ran")]}) as model:
        with github_agent(model) as agent:
            agent.start(wait_for=("status", "github"))
            body = pr("closed", "acme/widget")
            st, _, out = gh_post(agent, "pull_request", body, "d-closed")
            assert st == 202 and out["status"] == "ignored", (st, out)
            st, _, out = gh_post(agent, "issues", body, "d-forged")
            assert st == 200 and out["status"] == "duplicate", (st, out)
            assert "d-closed" in out.get("reason", ""), out
            time.sleep(0.5)
            assert runs_ended(agent) == [] and model.requests() == []


def test_github_deliveries():
    with ModelServer({"default": [reply(text="reviewed")]}) as model:
        with github_agent(model) as agent:
            agent.start(wait_for=("status", "github"))
            st, _, out = gh_post(agent, "pull_request",
                                 pr("opened", "acme/widget"), "d-0001")
            assert st == 202 and out["status"] == "accepted", (st, out)
            assert out["run"].startswith("r-")
            agent.wait_runs(1)
            p = prompts(model)[0]
            assert "pull_request" in p and "opened" in p and \
                "acme/widget" in p and "Fix the frobnicator" in p, p

            # Unsigned and wrongly signed: 401, audited, nothing runs.
            st, hdrs, _ = gh_post(agent, "pull_request",
                                  pr("opened", "acme/widget"), "d-0002",
                                  sign=False)
            assert st == 401 and "x-hub-signature-256" in \
                hdrs["www-authenticate"].lower(), (st, hdrs)
            st, _, _ = gh_post(agent, "pull_request",
                               pr("opened", "acme/widget"), "d-0003",
                               secret="not-the-secret")
            assert st == 401
            refused = [a for a in agent.audit()
                       if a["event"] == "webhook_refused"]
            assert len(refused) == 2 and refused[0]["trigger"] == "github"

            # Filtered out by action, by event and by repository.
            for event, payload, want in (
                    ("pull_request", pr("closed", "acme/widget"),
                     "pull_request.closed"),
                    ("push", {"repository": {"full_name": "acme/widget"}},
                     "event push"),
                    ("issues", {"action": "opened",
                                "repository": {"full_name": "evil/x"}},
                     "evil/x")):
                st, _, out = gh_post(agent, event, payload,
                                     "d-ign-" + event)
                assert st == 202 and out["status"] == "ignored", (st, out)
                assert want in out["reason"], out
            ignored = [a for a in agent.audit()
                       if a["event"] == "github_ignored"]
            assert len(ignored) == 3, ignored

            # Names are case-insensitive; any action of a listed event.
            st, _, out = gh_post(agent, "issues",
                                 {"action": "labeled",
                                  "repository": {"full_name": "Other/ONE"}},
                                 "d-0004")
            assert st == 202 and out["status"] == "accepted", out

            # ping: 200, no run.
            st, _, out = gh_post(agent, "ping", {"zen": "Keep it simple."},
                                 "d-ping")
            assert st == 200 and out["status"] == "pong", out

            # A redelivery is a duplicate, and runs nothing.
            st, _, out = gh_post(agent, "pull_request",
                                 pr("opened", "acme/widget"), "d-0001")
            assert st == 200 and out["status"] == "duplicate", (st, out)
            agent.wait_runs(2)
            time.sleep(0.5)
            assert len(runs_ended(agent)) == 2

            # Also after a restart.
            agent.stop()
            agent.start(wait_for=("status", "github"))
            st, _, out = gh_post(agent, "pull_request",
                                 pr("opened", "acme/widget"), "d-0001")
            assert st == 200 and out["status"] == "duplicate", (st, out)
            time.sleep(0.5)
            assert len(runs_ended(agent)) == 2
            assert len(model.requests()) == 2


def gh_raw(agent, event, body, delivery=None, sig=None):
    """POST body as it is; sig defaults to its right signature."""
    headers = {"Content-Type": "application/json", "X-GitHub-Event": event,
               "X-Hub-Signature-256": sig or "sha256=" + hmac.new(
                   GH_SECRET.encode(), body, hashlib.sha256).hexdigest()}
    if delivery is not None:
        headers["X-GitHub-Delivery"] = delivery
    st, _, text = agent.request_full("github", "POST", "/gh", body, headers)
    try:
        return st, json.loads(text)
    except ValueError:
        return st, text


def test_github_replay_under_another_delivery_is_a_duplicate():
    """The signature covers the body only: a captured signed delivery sent
    again with a new, a missing or a re-cased header starts nothing."""
    body = json.dumps(pr("opened", "acme/widget")).encode()
    sig = "sha256=" + hmac.new(GH_SECRET.encode(), body,
                               hashlib.sha256).hexdigest()
    with ModelServer({"default": [reply(text="reviewed")]}) as model:
        with github_agent(model) as agent:
            agent.start(wait_for=("status", "github"))
            st, out = gh_raw(agent, "pull_request", body, "r-0001")
            assert st == 202 and out["status"] == "accepted", (st, out)
            agent.wait_runs(1)

            # No delivery id, or an empty one: refused before anything.
            for hdr in (None, ""):
                st, out = gh_raw(agent, "pull_request", body, hdr)
                assert st == 400 and "X-GitHub-Delivery" in out["error"], \
                    (hdr, st, out)
            # A fresh id, the digits in upper case, another event header:
            # the same signed body, so the duplicate's answer.
            for event, delivery, s in (
                    ("pull_request", "r-0002", sig),
                    ("pull_request", "r-0003", "sha256=" + sig[7:].upper()),
                    ("issues", "r-0004", sig)):
                st, out = gh_raw(agent, event, body, delivery, s)
                assert st == 200 and out["status"] == "duplicate", (st, out)
                assert out["delivery"] == delivery, out
                assert "r-0001" in out["reason"], out
            agent.wait_log(r"r-0004 repeats the signed body of delivery "
                           r"r-0001")
            # The original id again is the plain duplicate.
            st, out = gh_raw(agent, "pull_request", body, "r-0001")
            assert st == 200 and out["status"] == "duplicate", out
            assert "reason" not in out, out

            # Another body still runs; and its replay is caught too.
            other = json.dumps(pr("opened", "acme/gadget")).encode()
            st, out = gh_raw(agent, "pull_request", other, "r-0005")
            assert st == 202 and out["status"] == "accepted", (st, out)
            agent.wait_runs(2)
            st, out = gh_raw(agent, "pull_request", other, "r-0006")
            assert st == 200 and out["status"] == "duplicate", (st, out)

            # Kept across a restart, like the ids.
            agent.stop()
            agent.start(wait_for=("status", "github"))
            st, out = gh_raw(agent, "pull_request", body, "r-0007")
            assert st == 200 and out["status"] == "duplicate", (st, out)
            time.sleep(0.5)
            assert len(runs_ended(agent)) == 2, runs_ended(agent)
            assert len(model.requests()) == 2


def test_github_delivery_table_from_before_digests():
    """A state database whose delivery table has no digest column gets one;
    its old ids still count."""
    with ModelServer({"default": [reply(text="ok")]}) as model:
        with github_agent(model) as agent:
            db = sqlite3.connect(os.path.join(agent.data, "af.db"))
            db.execute("CREATE TABLE github_delivery (seq INTEGER PRIMARY "
                       "KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, run "
                       "TEXT, ts_ms INTEGER)")
            db.execute("INSERT INTO github_delivery(id, run, ts_ms) VALUES "
                       "('old-1', 'r-x', 0)")
            db.commit()
            db.close()
            agent.start(wait_for=("status", "github"))
            body = json.dumps(pr("opened", "acme/widget")).encode()
            st, out = gh_raw(agent, "pull_request", body, "old-1")
            assert st == 200 and out["status"] == "duplicate", (st, out)
            st, out = gh_raw(agent, "pull_request", body, "new-1")
            assert st == 202 and out["status"] == "accepted", (st, out)
            st, out = gh_raw(agent, "pull_request", body, "new-2")
            assert st == 200 and out["status"] == "duplicate", (st, out)
            agent.wait_runs(1)


def webhook_agent(model, extra_hook="", extra=""):
    cfg = model_block(extra + """triggers:
  webhook:
    listen: 127.0.0.1:0
    path: /hook
    prompt: "Q: {{body}}"
""" + extra_hook + """status:
  listen: 127.0.0.1:0
""")
    return Agent(cfg, model, secrets={"hook_token": TOKEN,
                                      "hook_secret": HOOK_SECRET})


def post(agent, body, headers=None, path="/hook"):
    st, hdrs, text = agent.request_full("webhook", "POST", path, body,
                                        headers)
    try:
        return st, hdrs, json.loads(text)
    except ValueError:
        return st, hdrs, text


def test_webhook_wait_replies_with_the_cost():
    pricing = "  pricing: {input: 3, output: 15}\n"
    with ModelServer({"default": [reply(text="forty-two",
                                        usage={"input": 2000,
                                               "output": 400})]}) as model:
        with webhook_agent(model, "    reply: wait\n",
                           extra=pricing) as agent:
            st, _, out = post(agent, "what is the answer?")
            assert st == 200, (st, out)
            assert out["status"] == "ok" and out["reply"] == "forty-two", out
            assert out["steps"] == 1, out
            # 2000 * 3 / 1e6 + 400 * 15 / 1e6
            assert out["cost_usd"] == 0.012, out
            assert out["run"].startswith("r-"), out
            assert len(out["conversation_id"]) >= 1, out
            ends = runs_ended(agent)
            assert ends[0]["run"] == out["run"], ends


def test_webhook_wait_reports_a_failed_run():
    with ModelServer({"default": [{"garbage": True}]}) as model:
        with webhook_agent(model, "    reply: wait\n") as agent:
            st, _, out = post(agent, "x")
            assert st == 200, (st, out)
            assert out["status"] == "error_provider" and out["error"], out
            assert out["reply"] == ""


def test_webhook_conversation_continues():
    with ModelServer({"default": [reply(text="first answer"),
                                  reply(text="second answer")]}) as model:
        with webhook_agent(model, "    reply: wait\n") as agent:
            st, _, first = post(agent, "first question")
            assert st == 200 and first["reply"] == "first answer", first
            conv = first["conversation_id"]
            st, _, second = post(agent, "second question",
                                 {"X-Conversation-Id": conv})
            assert st == 200 and second["reply"] == "second answer", second
            assert second["conversation_id"] == conv
            msgs = model.requests()[1]["body"]["messages"]
            texts = [m["content"] if isinstance(m["content"], str) else
                     "".join(b.get("text", "") for b in m["content"])
                     for m in msgs]
            assert texts == ["Q: first question", "first answer",
                             "Q: second question"], texts
            # The query parameter names the same conversation.
            model.script({"default": [reply(text="a"), reply(text="b"),
                                      reply(text="c")]})
            st, _, third = post(agent, "third", path="/hook?conversation_id="
                                + conv)
            assert st == 200 and third["conversation_id"] == conv, third
            assert len(model.requests()[-1]["body"]["messages"]) == 5
            # Bad ids are refused before anything runs.
            for bad in ("", "a" * 65, "has space", "semi;colon", "ü"):
                st, _, _ = post(agent, "x", {"X-Conversation-Id": bad})
                assert st == 400, (bad, st)
            st, _, _ = post(agent, "x", {"X-Conversation-Id": "one"},
                            path="/hook?conversation_id=two")
            assert st == 400


def test_conversation_history_keeps_no_secret():
    """A secret that reached an event, and one the model put in its reply,
    are redacted in what the next run of the conversation replays."""
    with ModelServer({"default": [reply(text="echo " + TOKEN),
                                  reply(text="second answer")]}) as model:
        with webhook_agent(model, "    reply: wait\n",
                           extra="env:\n  T: ${secret:hook_token}\n") as agent:
            st, _, first = post(agent, "the token is " + TOKEN)
            assert st == 200 and TOKEN not in json.dumps(first), first
            st, _, second = post(agent, "again",
                                 {"X-Conversation-Id":
                                  first["conversation_id"]})
            assert st == 200 and second["reply"] == "second answer", second
            sent = json.dumps(model.requests()[1]["body"]["messages"])
            assert TOKEN not in sent, sent
            assert sent.count("[REDACTED]") == 2, sent


def test_webhook_wait_survives_a_client_that_leaves():
    with ModelServer({"default": [{"slow": 1.5,
                                   "reply": {"text": "late"}}]}) as model:
        with webhook_agent(model, "    reply: wait\n") as agent:
            s = socket.create_connection(("127.0.0.1",
                                          agent.ports["webhook"]))
            s.sendall(b"POST /hook HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 5\r\n\r\nhello")
            wait_until(lambda: model.requests(), what="the model call")
            s.close()
            ends = agent.wait_runs(1)
            assert ends[0]["status"] == "ok", ends
            model.script({"default": [reply(text="still here")]})
            st, _, out = post(agent, "again")
            assert st == 200 and out["reply"] == "still here", out
            assert agent.proc.poll() is None


def test_webhook_bearer_token():
    with ModelServer({"default": [reply(text="ok")]}) as model:
        with webhook_agent(model, "    token: ${secret:hook_token}\n") as agent:
            st, hdrs, _ = post(agent, "x")
            assert st == 401 and hdrs["www-authenticate"] == "Bearer"
            st, _, _ = post(agent, "x", {"Authorization": "Bearer wrong"})
            assert st == 401
            st, _, _ = post(agent, "x", {"Authorization": "Bearer " + TOKEN
                                         + "x"})
            assert st == 401
            st, _, _ = post(agent, "x", {"Authorization": "Basic " + TOKEN})
            assert st == 401
            st, _, out = post(agent, "x", {"Authorization": "Bearer " + TOKEN})
            assert st == 202 and out["status"] == "accepted", out
            st, _, out = post(agent, "x", {"Authorization": "bearer " + TOKEN})
            assert st == 202, out
            refused = [a for a in agent.audit()
                       if a["event"] == "webhook_refused"]
            assert len(refused) == 4, refused
            assert TOKEN not in agent.audit_raw()
            assert TOKEN not in agent.log_text()


def test_webhook_token_and_secret_both_required():
    hook = "    token: ${secret:hook_token}\n    secret: ${secret:hook_secret}\n"
    with ModelServer({"default": [reply(text="ok")]}) as model:
        with webhook_agent(model, hook) as agent:
            body = b"payload"
            sig = "sha256=" + hmac.new(HOOK_SECRET.encode(), body,
                                       hashlib.sha256).hexdigest()
            auth = "Bearer " + TOKEN
            assert post(agent, body, {"Authorization": auth})[0] == 401
            assert post(agent, body, {"X-Hub-Signature-256": sig})[0] == 401
            st, _, out = post(agent, body, {"Authorization": auth,
                                            "X-Hub-Signature-256": sig})
            assert st == 202, out
