"""Memory and schedule tools, slash commands in Telegram, and the status
server's /runs and /audit, end to end: the real af against the stand-in model
(and the Telegram stand-in). What the tools returned is read from what af
sent back to the model; what af stored, from its state database."""
import json
import os
import signal
import socket
import sqlite3
import subprocess
import time

from afharness import (NETNS_ADDR, in_own_netns, Agent, ModelServer, http_request, reply,
                       webhook_config, wait_until)
from test_telegram import Telegram, wait_sent


def tool_results(model):
    """Every tool_result block af sent to the model, in order, once."""
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


def results_of(model, first_user_text):
    """The tool results of the conversation that began with that text."""
    out = []
    for r in model.requests():
        msgs = (r.get("body") or {}).get("messages", [])
        if not msgs or first_user_text not in json.dumps(msgs[0]):
            continue
        for m in msgs:
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                for b in m["content"]:
                    if b.get("type") == "tool_result" and b not in out:
                        out.append(b)
    return out


def post(agent, body, conv=None):
    """A webhook event; conv names its conversation (X-Conversation-Id)."""
    headers = {"X-Conversation-Id": conv} if conv else None
    st, _, text = agent.request_full("webhook", "POST", "/hook", body,
                                     headers)
    assert st == 202, (st, text)
    return json.loads(text)["run"]


def db(agent):
    return sqlite3.connect(os.path.join(agent.data, "af.db"), timeout=5)


# Memory

VALUE = "teal, not {{body}} nor $ARGS; \"quoted\" \u00e9"


def test_memory_survives_restart_agent_scope():
    script = {"conversations": {
        "Event: one": [reply(tool_calls=[("remember", {"key": "colour",
                                                       "value": VALUE})]),
                       reply(text="saved", stop="end_turn")],
        "Event: two": [reply(tool_calls=[("recall", {"key": "colour"}),
                                         ("list_memories", {}),
                                         ("forget", {"key": "colour"}),
                                         ("recall", {"key": "colour"})]),
                       reply(text="done", stop="end_turn")]}}
    with ModelServer(script) as model:
        with Agent(webhook_config("memory: agent\n"), model) as agent:
            post(agent, "one")
            agent.wait_runs(1)
            tools = [t["name"] for t in model.requests()[0]["body"]["tools"]]
            assert {"remember", "recall", "list_memories",
                    "forget"} <= set(tools), tools
            assert "schedule" not in tools, tools
            assert agent.stop() == 0, agent.log_text()
            agent.start()
            post(agent, "two")
            agent.wait_runs(2)
            res = results_of(model, "Event: two")
            assert len(res) == 4, res
            assert res[0]["content"] == VALUE and not res[0].get("is_error")
            listing = json.loads(res[1]["content"])
            assert listing["count"] == 1, listing
            assert listing["memories"][0]["key"] == "colour", listing
            assert not res[2].get("is_error"), res[2]
            assert res[3].get("is_error") and "nothing" in res[3]["content"]
            # Each call was audited by the engine, before it ran.
            calls = [a for a in agent.audit() if a.get("event") == "tool"
                     and a.get("tool") in ("remember", "recall")]
            assert len(calls) == 3 and all(
                a["decision"] == "allow" for a in calls), calls


def test_memory_absent_by_default():
    with ModelServer([reply(tool_calls=[("remember", {"key": "k",
                                                      "value": "v"})]),
                      reply(text="x", stop="end_turn")]) as model:
        with Agent(webhook_config(), model) as agent:
            post(agent, "x")
            agent.wait_runs(1)
            tools = [t["name"] for t in model.requests()[0]["body"]["tools"]]
            assert tools == ["current_time"], tools
            res = tool_results(model)
            assert res[0].get("is_error") and "does not exist" in \
                res[0]["content"], res


def test_memory_conversation_scope():
    """Per conversation: a chat sees its own memories only; a run without a
    conversation (a webhook event) has a set of its own."""
    tg = Telegram()
    script = {"conversations": {
        "remember please": [reply(tool_calls=[("remember", {
            "key": "name", "value": "Ada"})]), reply("ok", stop="end_turn")],
        "recall please": [reply(tool_calls=[("recall", {"key": "name"})]),
                          reply("ok", stop="end_turn")],
    }, "exhausted": reply("ok", stop="end_turn")}
    model = ModelServer(script)
    agent = None
    try:
        agent = Agent(f"""name: tg-agent
model:
  provider: anthropic
  name: test-model
  base_url: {{model_url}}
  api_key: ${{secret:model_key}}
  max_steps: 4
  timeout: 10s
memory: conversation
triggers:
  telegram:
    token: ${{secret:tg_token}}
    api_base: http://127.0.0.1:{tg.port}
status:
  listen: 127.0.0.1:0
""", model, secrets={"tg_token": "123456:TEST-tg-token-9f2d"})
        tg.push(111, "remember please")
        wait_sent(tg, 1, chat_id=111)
        tg.push(222, "recall please")
        wait_sent(tg, 1, chat_id=222)
        other = results_of(model, "recall please")
        assert other and other[0].get("is_error"), other
        # Chat 111's second message carries its history, so the first user
        # text of that request is still "remember please": look at the
        # newest tool result instead.
        model.script({"default": [reply(tool_calls=[("recall",
                                                      {"key": "name"})]),
                                  reply("ok", stop="end_turn")]})
        tg.push(111, "and now?")
        wait_sent(tg, 2, chat_id=111)
        last = tool_results(model)[-1]
        assert last["content"] == "Ada" and not last.get("is_error"), last
        with db(agent) as c:
            scopes = sorted(r[0] for r in c.execute(
                "SELECT scope FROM memory"))
        assert scopes == ["conversation:telegram:111"], scopes
    finally:
        if agent:
            agent.cleanup()
        model.stop()
        tg.stop()


def memory_scopes(agent):
    with db(agent) as c:
        return sorted(r[0] for r in c.execute("SELECT DISTINCT scope FROM "
                                              "memory"))


def test_memory_per_run_without_conversation():
    """A run without a conversation has a set of its own: it reads it back
    while it runs, no other run sees it, and it is deleted when the run
    ends (nothing could read it again). A conversation's set stays."""
    script = {"conversations": {
        "Event: a": [reply(tool_calls=[("remember", {"key": "k",
                                                     "value": "v"}),
                                       ("remember", {"key": "big",
                                                     "value": "x" * 16384}),
                                       ("recall", {"key": "k"})]),
                     reply(text="x", stop="end_turn")],
        "Event: b": [reply(tool_calls=[("recall", {"key": "k"})]),
                     reply(text="x", stop="end_turn")],
        "Event: c": [reply(tool_calls=[("remember", {"key": "k",
                                                     "value": "kept"})]),
                     reply(text="x", stop="end_turn")]}}
    with ModelServer(script) as model:
        with Agent(webhook_config("memory: conversation\n"), model) as agent:
            post(agent, "a")
            agent.wait_runs(1)
            res = results_of(model, "Event: a")
            assert res[2]["content"] == "v" and not res[2].get("is_error"), res
            # The run_end record is written before the journal is settled.
            wait_until(lambda: memory_scopes(agent) == [],
                       what="run a's memory set to go")
            post(agent, "b")
            agent.wait_runs(2)
            res = results_of(model, "Event: b")
            assert res[0].get("is_error"), res
            post(agent, "c", conv="keep")
            agent.wait_runs(3)
            time.sleep(0.5)
            assert memory_scopes(agent) == ["conversation:webhook:keep"], \
                memory_scopes(agent)
            with db(agent) as c:
                n = c.execute("SELECT COUNT(*) FROM memory").fetchone()[0]
            assert n == 1, n


def test_memory_run_set_of_a_crashed_run():
    """af killed mid-run: the run stays pending, its set stays for the
    replay (same run id), and goes when the replay ends. Sets that runs no
    longer pending left behind are removed at start-up."""
    script = {"conversations": {"Event: crash": [
        reply(tool_calls=[("remember", {"key": "k", "value": "v"})]),
        {"hang": True}]}}
    with ModelServer(script) as model:
        with Agent(webhook_config("memory: conversation\n"), model) as agent:
            run = post(agent, "crash")

            def remembered():
                try:
                    return memory_scopes(agent) == [f"run:{run}"]
                except sqlite3.OperationalError:    # no table yet
                    return False
            wait_until(remembered, what="the run's memory")
            wait_until(lambda: len(model.requests()) >= 2,
                       what="the second model call")
            agent.kill(signal.SIGKILL)
            agent.wait_exit()
            with db(agent) as c:
                c.execute("INSERT INTO memory VALUES ('run:r-0000dead', 'k', "
                          "'stale', 0), ('conversation:webhook:keep', 'k', "
                          "'v', 0)")
            model.script({"conversations": {"Event: crash": [
                reply(tool_calls=[("recall", {"key": "k"})]),
                reply(text="done", stop="end_turn")]}})
            agent.start()
            ends = agent.wait_runs(1)
            assert ends[0]["run"] == run and ends[0]["status"] == "ok", ends
            last = tool_results(model)[-1]
            assert last["content"] == "v" and not last.get("is_error"), last
            wait_until(lambda: memory_scopes(agent) ==
                       ["conversation:webhook:keep"],
                       what="only the conversation's set to stay")
            assert "memory: removed 1 entries" in agent.log_text()


def test_memory_bounds():
    calls = [("remember", {"key": "k" * 129, "value": "v"}),
             ("remember", {"key": "", "value": "v"}),
             ("remember", {"key": "big", "value": "x" * (16 * 1024 + 1)}),
             ("remember", {"key": "ok", "value": "x" * (16 * 1024)}),
             ("remember", {"key": "k", "value": "v", "extra": 1}),
             ("recall", {"key": 5})]
    calls += [("remember", {"key": f"n{i:04d}", "value": "v"})
              for i in range(999)]
    calls += [("remember", {"key": "one-too-many", "value": "v"}),
              ("remember", {"key": "n0000", "value": "updated"})]
    with ModelServer([reply(tool_calls=calls),
                      reply(text="x", stop="end_turn")]) as model:
        with Agent(webhook_config("memory: agent\n"), model) as agent:
            post(agent, "fill")
            agent.wait_runs(1, timeout=60)
            res = tool_results(model)
            assert len(res) == len(calls), len(res)
            err = [bool(r.get("is_error")) for r in res]
            assert err[:6] == [True, True, True, False, True, True], res[:6]
            assert "1 to 128 bytes" in res[0]["content"], res[0]
            assert "16384" in res[2]["content"], res[2]
            assert "extra" in res[4]["content"], res[4]
            assert not any(err[6:6 + 999]), [r for r in res[6:] if
                                              r.get("is_error")][:2]
            assert err[-2] and "full" in res[-2]["content"], res[-2]
            # Replacing a key that exists is not a new entry.
            assert not err[-1], res[-1]
            with db(agent) as c:
                n = c.execute("SELECT COUNT(*) FROM memory").fetchone()[0]
            assert n == 1000, n


# Schedules

SCHED_CONFIG = webhook_config("schedules: true\n")


def test_schedule_fires_once():
    script = {"conversations": {
        "Event: plan": [reply(tool_calls=[("schedule", {
            "prompt": "scheduled ping", "in": "1s"})]),
            reply(text="planned", stop="end_turn")],
        "scheduled ping": [reply(text="pong", stop="end_turn")]}}
    with ModelServer(script) as model:
        with Agent(SCHED_CONFIG, model) as agent:
            post(agent, "plan")
            ends = agent.wait_runs(2)
            res = results_of(model, "Event: plan")
            assert not res[0].get("is_error") and \
                res[0]["content"].startswith("scheduled s-"), res
            starts = [a for a in agent.audit() if a["event"] == "run_start"]
            assert [s["trigger"] for s in starts] == ["webhook", "schedule"]
            assert all(e["status"] == "ok" for e in ends), ends
            with db(agent) as c:
                left = c.execute("SELECT COUNT(*) FROM schedules").fetchone()
            assert left[0] == 0, left
            st = agent.status()["triggers"]["schedule"]
            assert st["state"] == "up" and st["schedules"] == 0, st
            time.sleep(1.5)
            assert len([a for a in agent.audit()
                        if a["event"] == "run_end"]) == 2


def test_schedule_list_unschedule_and_limit():
    """Two runs of one conversation (a webhook X-Conversation-Id): the
    second lists and removes what the first made."""
    calls = [("schedule", {"prompt": f"job {i}", "in": "1h"})
             for i in range(21)]
    calls += [("schedule", {"prompt": "bad", "in": "500ms"}),
              ("schedule", {"prompt": "bad", "every": "30s"}),
              ("schedule", {"prompt": "bad", "at": "2001-01-01T00:00:00Z"}),
              ("schedule", {"prompt": "bad", "at": "tomorrow"}),
              ("schedule", {"prompt": "bad", "in": "1m", "at":
                            "2099-01-01T00:00:00Z"}),
              ("list_schedules", {})]
    with ModelServer({"conversations": {
            "Event: fill": [reply(tool_calls=calls),
                            reply(text="x", stop="end_turn")]}}) as model:
        with Agent(SCHED_CONFIG, model) as agent:
            post(agent, "fill", conv="ops")
            agent.wait_runs(1)
            res = results_of(model, "Event: fill")
            err = [bool(r.get("is_error")) for r in res]
            assert err[:20] == [False] * 20, res[:20]
            assert err[20] and "20" in res[20]["content"], res[20]
            assert all(err[21:26]), res[21:26]
            listing = json.loads(res[26]["content"])
            assert listing["count"] == 20 and listing["max"] == 20, listing
            ids = [s["id"] for s in listing["schedules"]]
            # The next run of "ops" begins with its history, whose first
            # message is still "Event: fill".
            model.script({"conversations": {"Event: fill": [
                reply(tool_calls=[("unschedule", {"id": ids[0]}),
                                  ("unschedule", {"id": ids[0]}),
                                  ("schedule", {"prompt": "again",
                                                "every": "1h"}),
                                  ("list_schedules", {})]),
                reply(text="x", stop="end_turn")]}})
            post(agent, "clean", conv="ops")
            agent.wait_runs(2)
            res = tool_results(model)[-4:]
            assert not res[0].get("is_error"), res[0]
            assert res[1].get("is_error"), res[1]
            assert not res[2].get("is_error") and "every 1h" in \
                res[2]["content"], res[2]
            listing = json.loads(res[3]["content"])
            assert listing["count"] == 20, listing
            assert ids[0] not in [s["id"] for s in listing["schedules"]]


def scheduled_id(result):
    """The id in a schedule tool's answer ("scheduled s-...: ...")."""
    assert not result.get("is_error"), result
    return result["content"].split()[1].rstrip(":")


def test_schedule_scoped_to_conversation():
    """Chat A's schedule: chat B, a webhook run without a conversation and
    a webhook conversation named like A's chat can neither list it nor
    remove it, even with its id; chat A still can."""
    tg = Telegram()
    model = ModelServer({"conversations": {
        "A plans": [reply(tool_calls=[("schedule", {
            "prompt": "A's private reminder", "in": "1h"})]),
            reply("ok", stop="end_turn")]},
        "exhausted": reply("ok", stop="end_turn")})
    agent = None
    try:
        agent = Agent(f"""name: tg-agent
model:
  provider: anthropic
  name: test-model
  base_url: {{model_url}}
  api_key: ${{secret:model_key}}
  max_steps: 4
  timeout: 10s
schedules: true
triggers:
  telegram:
    token: ${{secret:tg_token}}
    api_base: http://127.0.0.1:{tg.port}
  webhook:
    listen: 127.0.0.1:0
    path: /hook
    prompt: "Event: {{{{body}}}}"
status:
  listen: 127.0.0.1:0
""", model, secrets={"tg_token": "123456:TEST-tg-token-9f2d"})
        tg.push(111, "A plans")
        wait_sent(tg, 1, chat_id=111)
        sid = scheduled_id(results_of(model, "A plans")[0])
        snoop = [reply(tool_calls=[("list_schedules", {}),
                                   ("unschedule", {"id": sid})]),
                 reply("ok", stop="end_turn")]
        model.script({"conversations": {
            "B snoops": snoop, "Event: snoop": snoop, "Event: named": snoop,
            # Chat A's next message starts with its history.
            "A plans": [reply(tool_calls=[("list_schedules", {})]),
                        reply("ok", stop="end_turn")]},
            "exhausted": reply("ok", stop="end_turn")})
        tg.push(222, "B snoops")
        wait_sent(tg, 1, chat_id=222)
        post(agent, "snoop")
        post(agent, "named", conv="111")
        agent.wait_runs(4)
        for first in ("B snoops", "Event: snoop", "Event: named"):
            res = results_of(model, first)
            assert len(res) == 2, (first, res)
            listing = json.loads(res[0]["content"])
            assert listing["count"] == 0 and listing["schedules"] == [], \
                (first, listing)
            assert "private" not in res[0]["content"], (first, res[0])
            assert res[1].get("is_error") and "no schedule" in \
                res[1]["content"], (first, res[1])
        tg.push(111, "A checks")
        wait_sent(tg, 2, chat_id=111)
        listing = json.loads(tool_results(model)[-1]["content"])
        assert [s["id"] for s in listing["schedules"]] == [sid], listing
        assert listing["schedules"][0]["prompt"] == "A's private reminder"
        with db(agent) as c:
            rows = c.execute("SELECT id, conv FROM schedules").fetchall()
        assert rows == [(sid, "telegram:111")], rows
    finally:
        if agent:
            agent.cleanup()
        model.stop()
        tg.stop()


def test_schedule_limits_per_conversation_and_agent():
    """20 per conversation, so one chat (or one injected mail) cannot take
    every slot; 100 for the agent however many conversations there are."""
    fill = [("schedule", {"prompt": f"job {i}", "in": "1h"})
            for i in range(21)]
    script = {"conversations": {f"Event: c{k}": [
        reply(tool_calls=fill), reply(text="x", stop="end_turn")]
        for k in range(5)}}
    script["conversations"]["Event: late"] = [
        reply(tool_calls=[("schedule", {"prompt": "late", "in": "1h"})]),
        reply(text="x", stop="end_turn")]
    script["conversations"]["Event: lone"] = \
        script["conversations"]["Event: late"]
    with ModelServer(script) as model:
        with Agent(SCHED_CONFIG, model) as agent:
            for k in range(5):
                post(agent, f"c{k}", conv=f"c{k}")
                agent.wait_runs(k + 1)
                res = results_of(model, f"Event: c{k}")
                err = [bool(r.get("is_error")) for r in res]
                assert err == [False] * 20 + [True], (k, res[-2:])
                assert "20" in res[20]["content"], res[20]
            with db(agent) as c:
                n = c.execute("SELECT COUNT(*) FROM schedules").fetchone()[0]
            assert n == 100, n
            post(agent, "late", conv="c5")
            post(agent, "lone")
            agent.wait_runs(7)
            for first in ("Event: late", "Event: lone"):
                res = results_of(model, first)
                assert res[0].get("is_error") and "100" in \
                    res[0]["content"], res
            assert agent.status()["triggers"]["schedule"]["schedules"] == 100


def test_schedule_repeating_run_sees_its_own_entry():
    """A repeating schedule made by a run without a conversation: the run
    it fires (also without one) sees that entry and can stop it; another
    such run sees nothing."""
    script = {"conversations": {"Event: plan": [
        reply(tool_calls=[("schedule", {"prompt": "tick", "in": "4s",
                                        "every": "1h"})]),
        reply(text="planned", stop="end_turn")]}}
    with ModelServer(script) as model:
        with Agent(SCHED_CONFIG, model) as agent:
            post(agent, "plan")
            agent.wait_runs(1)
            sid = scheduled_id(results_of(model, "Event: plan")[0])
            model.script({"conversations": {
                "Event: snoop": [reply(tool_calls=[
                    ("list_schedules", {}), ("unschedule", {"id": sid})]),
                    reply(text="x", stop="end_turn")],
                "tick": [reply(tool_calls=[
                    ("list_schedules", {}), ("unschedule", {"id": sid}),
                    ("list_schedules", {})]),
                    reply(text="x", stop="end_turn")]}})
            post(agent, "snoop")
            res = wait_until(lambda: (lambda r: r if len(r) >= 2 else None)(
                results_of(model, "Event: snoop")), what="the snoop's calls")
            assert json.loads(res[0]["content"])["count"] == 0, res
            assert res[1].get("is_error"), res
            ends = agent.wait_runs(3)
            res = results_of(model, "tick")
            assert len(res) == 3, res
            listing = json.loads(res[0]["content"])
            assert [s["id"] for s in listing["schedules"]] == [sid], listing
            assert listing["schedules"][0]["fired"] == 1, listing
            assert not res[1].get("is_error"), res[1]
            assert json.loads(res[2]["content"])["count"] == 0, res[2]
            assert all(e["status"] == "ok" for e in ends), ends
            with db(agent) as c:
                n = c.execute("SELECT COUNT(*) FROM schedules").fetchone()[0]
            assert n == 0, n


def test_schedule_due_while_down_fires_once_at_start():
    script = {"conversations": {
        "Event: plan": [reply(tool_calls=[("schedule", {
            "prompt": "while you slept", "in": "2s"})]),
            reply(text="planned", stop="end_turn")],
        "while you slept": [reply(text="awake", stop="end_turn")]}}
    with ModelServer(script) as model:
        with Agent(SCHED_CONFIG, model) as agent:
            post(agent, "plan")
            agent.wait_runs(1)
            assert agent.stop() == 0
            time.sleep(2.5)
            agent.start()
            wait_until(lambda: len([a for a in agent.audit()
                                    if a["event"] == "run_end"]) >= 2,
                       what="the missed schedule")
            assert agent.stop() == 0
            agent.start()
            time.sleep(1.5)
            starts = [a for a in agent.audit() if a["event"] == "run_start"]
            assert [s["trigger"] for s in starts] == ["webhook", "schedule"]


def test_schedule_tools_absent_without_flag():
    with ModelServer([reply(text="x", stop="end_turn")]) as model:
        with Agent(webhook_config("memory: none\n"), model) as agent:
            post(agent, "x")
            agent.wait_runs(1)
            tools = [t["name"] for t in model.requests()[0]["body"]["tools"]]
            assert tools == ["current_time"], tools
            assert "schedule" not in agent.status()["triggers"]


# Slash commands (Telegram)

def test_telegram_slash_commands():
    tg = Telegram()
    model = ModelServer({"default": [reply("ran", stop="end_turn")]})
    agent = None
    try:
        agent = Agent(f"""name: tg-agent
model:
  provider: anthropic
  name: test-model
  base_url: {{model_url}}
  api_key: ${{secret:model_key}}
  max_steps: 4
  timeout: 10s
commands:
  summary:
    prompt: "Summarize this: $ARGS (end)"
    description: summarize a text
triggers:
  telegram:
    token: ${{secret:tg_token}}
    api_base: http://127.0.0.1:{tg.port}
status:
  listen: 127.0.0.1:0
""", model, secrets={"tg_token": "123456:TEST-tg-token-9f2d"})
        chat = 4242
        tg.push(chat, "hello there")
        wait_sent(tg, 1, chat_id=chat)
        with db(agent) as c:
            n = c.execute("SELECT COUNT(*) FROM history WHERE conv = ?",
                          (f"telegram:{chat}",)).fetchone()[0]
        assert n == 2, n
        tg.push(chat, "/help@af_test_bot")
        got = wait_sent(tg, 2, chat_id=chat)
        text = got[1]["params"]["text"]
        assert "/summary - summarize a text" in text and "/reset" in text, text
        tg.push(chat, "/status")
        got = wait_sent(tg, 3, chat_id=chat)
        assert "tg-agent" in got[2]["params"]["text"], got[2]
        tg.push(chat, "/reset")
        got = wait_sent(tg, 4, chat_id=chat)
        assert "cleared" in got[3]["params"]["text"], got[3]
        with db(agent) as c:
            n = c.execute("SELECT COUNT(*) FROM history WHERE conv = ?",
                          (f"telegram:{chat}",)).fetchone()[0]
        assert n == 0, n
        tg.push(chat, "/nope")
        got = wait_sent(tg, 5, chat_id=chat)
        assert "Unknown command /nope" in got[4]["params"]["text"], got[4]
        before = len(model.requests())
        tg.push(chat, "/summary a $ARGS b /help")
        got = wait_sent(tg, 6, chat_id=chat)
        assert got[5]["params"]["text"] == "ran", got[5]
        reqs = model.requests()
        assert len(reqs) == before + 1, reqs
        first = reqs[-1]["body"]["messages"][0]
        assert "Summarize this: a $ARGS b /help (end)" in json.dumps(first)
        # Only the run and the first message started the model.
        assert len(reqs) == 2, len(reqs)
        cmds = [a for a in agent.audit() if a["event"] == "telegram_command"]
        assert [c["command"] for c in cmds] == [
            "/help@af_test_bot", "/status", "/reset", "/nope"], cmds
    finally:
        if agent:
            agent.cleanup()
        model.stop()
        tg.stop()


# The status server: /runs and /audit

def test_runs_endpoint():
    script = {"default": [
        reply(tool_calls=[("current_time", {})],
              usage={"input": 100, "output": 20}),
        reply(text="x", stop="end_turn", usage={"input": 50, "output": 5})]}
    cfg = webhook_config().replace("  max_steps: 6\n", """  max_steps: 6
  pricing: {input: 3, output: 15}
""")
    with ModelServer(script) as model:
        with Agent(cfg, model) as agent:
            runs = []
            for i in range(3):
                runs.append(post(agent, f"e{i}"))
                agent.wait_runs(i + 1)
            st, body = agent.request("status", "GET", "/runs")
            assert st == 200, body
            page = json.loads(body)
            got = page["runs"]
            assert [r["run"] for r in got] == runs[::-1], got
            r = got[0]
            assert r["status"] == "ok" and r["steps"] == 2, r
            assert r["tokens_in"] == 150 and r["tokens_out"] == 25, r
            assert abs(r["cost_usd"] - (150 * 3 + 25 * 15) / 1e6) < 1e-9, r
            assert r["trigger"] == "webhook" and r["started"] and r["ended"]
            assert page["limit"] == 50 and page["offset"] == 0, page
            st, body = agent.request("status", "GET", "/runs?limit=1&offset=1")
            assert st == 200 and [r["run"] for r in json.loads(body)[
                "runs"]] == [runs[1]], body
            st, body = agent.request("status", "GET", "/runs?limit=9999")
            assert st == 200 and json.loads(body)["limit"] == 500, body
            for bad in ("limit=0", "limit=x", "offset=-1", "limit=1&limit=2",
                        "lmit=3"):
                st, body = agent.request("status", "GET", "/runs?" + bad)
                assert st == 400, (bad, st, body)
            assert agent.request("status", "POST", "/runs")[0] == 405


def test_audit_endpoint_filters():
    script = {"default": [
        reply(tool_calls=[("read_file", {"path": "/etc/passwd"}),
                          ("current_time", {})]),
        reply(text="x", stop="end_turn")]}
    with ModelServer(script) as model:
        with Agent(webhook_config(), model) as agent:
            r1 = post(agent, "one")
            agent.wait_runs(1)
            r2 = post(agent, "two")
            agent.wait_runs(2)
            st, body = agent.request("status", "GET",
                                     f"/audit?run={r2}&decision=deny")
            assert st == 200, body
            recs = json.loads(body)["records"]
            assert len(recs) == 1, recs
            assert recs[0]["run"] == r2 and recs[0]["tool"] == "read_file"
            st, body = agent.request("status", "GET", f"/audit?run={r1}")
            recs = json.loads(body)["records"]
            events = [r["event"] for r in recs]
            # Newest first: the run's end, then its steps, then its start.
            assert events[0] == "run_end" and events[-1] == "run_start", events
            assert all(r["run"] == r1 for r in recs)
            st, body = agent.request("status", "GET",
                                     "/audit?event=run_end&limit=1&offset=1")
            recs = json.loads(body)["records"]
            assert len(recs) == 1 and recs[0]["run"] == r1, recs
            st, body = agent.request("status", "GET",
                                     "/audit?tool=current_time")
            page = json.loads(body)
            assert len(page["records"]) == 2 and not page["partial"], page
            st, body = agent.request("status", "GET", "/audit?decision=nope")
            assert st == 200 and json.loads(body)["records"] == [], body
            assert agent.request("status", "GET", "/audit?colour=1")[0] == 400


def test_audit_endpoint_large_trail_is_bounded():
    """A trail far larger than one read: the newest records come back at
    once, and a filter that matches nothing stops at the scan bound."""
    with ModelServer([reply(text="x", stop="end_turn")]) as model:
        with Agent(webhook_config(), model, start=False) as agent:
            line = json.dumps({"ts": "2026-01-01T00:00:00.000Z",
                               "agent": "test-agent", "run": "r-old",
                               "event": "tool", "tool": "x",
                               "decision": "allow",
                               "target": "y" * 900}) + "\n"
            with open(os.path.join(agent.data, "audit.jsonl"), "w") as f:
                for _ in range(40 * 1024):	# 40 MiB
                    f.write(line)
            agent.start()
            run = post(agent, "new")
            agent.wait_runs(1)
            t0 = time.monotonic()
            st, body = agent.request("status", "GET", "/audit?limit=2")
            assert st == 200
            recs = json.loads(body)["records"]
            assert [r["event"] for r in recs] == ["run_end", "model_call"], recs
            st, body = agent.request("status", "GET", "/audit?run=r-none")
            page = json.loads(body)
            assert page["records"] == [] and page["partial"] is True, page
            st, body = agent.request("status", "GET", f"/audit?run={run}")
            assert len(json.loads(body)["records"]) == 3, body
            assert time.monotonic() - t0 < 10


def non_loopback_ip():
    """A client address that is not loopback: an address on the lo of the
    test's own network namespace (see afharness.in_own_netns)."""
    return NETNS_ADDR if os.environ.get("AF_IN_NETNS") == "1" else None


def test_runs_and_audit_refused_to_non_loopback_without_token():
    if not in_own_netns(_refused_to_non_loopback):
        print("    (no network namespaces here; tests/unit/test_status_auth.c "
              "covers the decision)")


def test_runs_and_audit_with_token():
    in_own_netns(_with_token) or _with_token()


def _refused_to_non_loopback():
    ip = non_loopback_ip()
    if ip is None:
        print("    (no non-loopback address; tests/unit/test_status_auth.c "
              "covers the decision)")
        return
    cfg = webhook_config().replace("status:\n  listen: 127.0.0.1:0",
                                   "status:\n  listen: 0.0.0.0:0")
    with ModelServer() as model:
        with Agent(cfg, model) as agent:
            port = agent.ports["status"]
            for path in ("/runs", "/audit"):
                st, body = http_request(ip, port, "GET", path)
                assert st == 403, (path, st, body)
                assert agent.request("status", "GET", path)[0] == 200
            # The other paths stay as they were.
            assert http_request(ip, port, "GET", "/healthz")[0] == 200
            assert http_request(ip, port, "GET", "/status")[0] == 200


def _with_token():
    token = "status-token-5e1f9a"
    cfg = webhook_config().replace(
        "status:\n  listen: 127.0.0.1:0",
        "status:\n  listen: 0.0.0.0:0\n  token: ${secret:status_token}")
    ip = non_loopback_ip()
    with ModelServer() as model:
        with Agent(cfg, model, secrets={"status_token": token}) as agent:
            port = agent.ports["status"]
            hosts = ["127.0.0.1"] + ([ip] if ip else [])
            for host in hosts:
                for path in ("/runs", "/audit"):
                    st, _ = http_request(host, port, "GET", path)
                    assert st == 401, (host, path, st)
                    for bad in ("Bearer wrong", "Bearer " + token + "x",
                                "Bearer " + token[:-1], token,
                                "Basic " + token):
                        st, _ = http_request(host, port, "GET", path,
                                             headers={"Authorization": bad})
                        assert st == 401, (host, path, bad, st)
                    st, body = http_request(
                        host, port, "GET", path,
                        headers={"Authorization": "Bearer " + token})
                    assert st == 200, (host, path, st, body)
                    st, _ = http_request(
                        host, port, "GET", path,
                        headers={"Authorization": "bearer " + token})
                    assert st == 200, (host, path, st)
            assert token not in agent.log_text()
