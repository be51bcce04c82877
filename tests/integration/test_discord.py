"""The Discord trigger end to end: the real af binary (with its sandbox)
against the Discord stand-in (tests/helpers/discord_standin.c: a
libwebsockets gateway and an evhttp REST API) and the scripted model
stand-in. What af sent is read back from the stand-in's record, what it
decided from the audit trail and the status port.

Each test owns a temporary folder and stops what it started.
"""
import json
import os
import subprocess
import threading
import time

import afharness
from afharness import Agent, ModelServer, reply, wait_until

TOKEN = "MTA5.test-discord-token.x9Q2"
BOT_ID = "900000000000000001"
# Past 2^53: a double would change it.
CHAN = "1234567890123456789"
HB_MS = 500


class Discord:
    """The stand-in binary: gateway port on its first line, REST second."""

    def __init__(self, token=TOKEN, heartbeat=HB_MS):
        path = os.path.join(afharness.ROOT, afharness.AF_BUILD,
                            "tests/helpers/discord_standin")
        self.proc = subprocess.Popen(
            [path, "--token", token, "--bot-id", BOT_ID,
             "--heartbeat", str(heartbeat)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        gw, rest = self.proc.stdout.readline(), self.proc.stdout.readline()
        if not (gw.strip().isdigit() and rest.strip().isdigit()):
            self.stop()
            raise RuntimeError(f"discord_standin did not start: {gw!r} "
                               f"{rest!r} {self.proc.stderr.read()}")
        self.gw_port, self.port = int(gw), int(rest)
        for f in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=afharness._drain, args=(f, None),
                             daemon=True).start()

    def control(self, path, body=None, method="POST"):
        st, out = afharness.http_request(
            "127.0.0.1", self.port, method, path,
            json.dumps(body if body is not None else {}))
        assert st == 200, (path, st, out)
        return json.loads(out) if out else {}

    def push(self, content, channel=CHAN, **kw):
        return self.control("/_push", {"channel_id": channel,
                                       "content": content, **kw})

    def record(self):
        return self.control("/_record", method="GET")

    def state(self):
        return self.control("/_state", method="GET")

    def gateway_bot(self, remaining=1000, reset_after=60000, count=5):
        """Script GET /gateway/bot to answer 200 whatever the token."""
        self.control("/_script", {
            "route": "gateway", "status": 200, "count": count,
            "body": {"url": f"ws://127.0.0.1:{self.gw_port}", "shards": 1,
                     "session_start_limit": {
                         "total": 1000, "remaining": remaining,
                         "reset_after": reset_after,
                         "max_concurrency": 1}}})

    def posts(self, route="messages", channel=None, status=None):
        return [r for r in self.record()["rest"]
                if r["route"] == route
                and (channel is None or r["channel_id"] == channel)
                and (status is None or r["status"] == status)]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def config(dc, extra_dc="", token_secret="dc_token"):
    return f"""name: dc-agent
model:
  provider: anthropic
  name: test-model
  base_url: {{model_url}}
  api_key: ${{secret:model_key}}
  max_steps: 4
  timeout: 10s
triggers:
  discord:
    token: ${{secret:{token_secret}}}
    gateway: ws://127.0.0.1:{dc.gw_port}/?v=10&encoding=json
    api_base: http://127.0.0.1:{dc.port}/api/v10
{extra_dc}status:
  listen: 127.0.0.1:0
"""


class Setup:
    """A stand-in, a model and an agent; stopped in reverse order."""

    def __init__(self, script, extra_dc="", token=TOKEN, heartbeat=HB_MS,
                 before=None):
        self.dc = Discord(heartbeat=heartbeat)
        self.model = self.agent = None
        try:
            # What the stand-in must say before af's first request.
            if before:
                before(self.dc)
            self.model = ModelServer(script)
            self.agent = Agent(config(self.dc, extra_dc), model=self.model,
                               secrets={"dc_token": token})
        except Exception:
            self.close()
            raise

    def close(self):
        if self.agent:
            self.agent.cleanup()
        if self.model:
            self.model.stop()
        self.dc.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def ready(self, n=1, timeout=15):
        """Wait until n sessions were identified and the trigger is up."""
        wait_until(lambda: len(self.dc.record()["identify"]) >= n and
                   self.dc.state()["ready"], timeout, "READY")
        wait_until(lambda: self.agent.status()["triggers"]["discord"]
                   ["state"] == "up", timeout, "discord up")

    def down(self, timeout=15):
        """Wait until the trigger is down; its status entry."""
        def st():
            t = self.agent.status()["triggers"]["discord"]
            return t if t["state"] == "down" else None
        return wait_until(st, timeout, "discord down")


def wait_posts(dc, n, timeout=20, **kw):
    return wait_until(lambda: (lambda p: p if len(p) >= n else None)(
        dc.posts(**kw)), timeout, f"{n} message posts")


def no_token_leak(agent):
    assert TOKEN not in agent.log_text(), "token in af's log"
    assert TOKEN not in agent.audit_raw(), "token in the audit trail"


def test_identify_and_round_trip():
    with Setup({"default": [reply("Hello from af", stop="end_turn")]}) as s:
        s.ready()
        ident = s.dc.record()["identify"][0]
        assert ident["token"] == TOKEN
        # GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT
        assert ident["intents"] == (1 << 9) | (1 << 12) | (1 << 15), ident
        assert set(ident["properties"]) == {"os", "browser", "device"}
        m = s.dc.push(f"<@{BOT_ID}> what is up?", mentions=[BOT_ID])
        got = wait_posts(s.dc, 1, channel=CHAN)
        p = got[0]
        assert p["path"] == f"/api/v10/channels/{CHAN}/messages", p
        assert p["headers"]["authorization"] == f"Bot {TOKEN}"
        assert p["headers"]["content-type"] == "application/json"
        assert p["headers"]["user-agent"].startswith("DiscordBot ("), p
        body = p["body"]
        assert body["content"] == "Hello from af", body
        assert body["message_reference"] == {
            "message_id": m["id"], "fail_if_not_exists": False}, body
        assert body["allowed_mentions"] == {"parse": []}, body
        # The model saw the text without the bot's own mention.
        msgs = json.dumps(s.model.requests()[0]["body"]["messages"])
        assert "what is up?" in msgs and f"<@{BOT_ID}>" not in msgs, msgs
        typing = s.dc.posts("typing", CHAN)
        assert typing and typing[0]["t"] <= p["t"], typing
        ends = s.agent.wait_runs(1)
        assert ends[0]["status"] == "ok"
        starts = [r for r in s.agent.audit() if r["event"] == "run_start"]
        assert starts[0]["conversation"] == f"discord:{CHAN}", starts
        st = s.agent.status()["triggers"]["discord"]
        assert st["state"] == "up" and st["replies_sent"] == 1, st
        assert "voice" not in st, st
        no_token_leak(s.agent)


def test_unaddressed_and_bot_messages_ignored():
    with Setup({"default": [reply("hi", stop="end_turn")]}) as s:
        s.ready()
        s.dc.push("no mention here")                       # not for the bot
        s.dc.push(f"<@{BOT_ID}> I am a bot", mentions=[BOT_ID], bot=True)
        s.dc.push("echo", author_id=BOT_ID, guild_id=None)  # itself, in a DM
        s.dc.push("a direct message", channel="555", guild_id=None)
        got = wait_posts(s.dc, 1)
        time.sleep(0.5)
        got = s.dc.posts()
        assert len(got) == 1 and got[0]["channel_id"] == "555", got
        reqs = json.dumps(s.model.requests())
        assert "I am a bot" not in reqs and "no mention" not in reqs
        st = s.agent.status()["triggers"]["discord"]
        assert st["ignored"] == 3 and st["messages"] == 4, st


def test_configured_channels():
    with Setup({"default": [reply("hi", stop="end_turn")]},
               extra_dc=f'    channels: ["{CHAN}"]\n'
                        '    voice_channels: ["777"]\n') as s:
        s.ready()
        s.dc.push("elsewhere", channel="42", mentions=[BOT_ID])
        s.dc.push("in the channel, no mention")
        got = wait_posts(s.dc, 1)
        time.sleep(0.5)
        assert [p["channel_id"] for p in s.dc.posts()] == [CHAN]
        st = s.agent.status()["triggers"]["discord"]
        assert st["voice"] == "not supported yet", st
        assert s.agent.status()["hermetic"] is False


def test_heartbeat_interval_and_missed_ack_resumes():
    with Setup({"default": [reply("hi", stop="end_turn")]}) as s:
        s.ready()
        time.sleep(2.2)
        beats = s.dc.record()["heartbeats"]
        assert len(beats) >= 3, beats
        gaps = [b["t"] - a["t"] for a, b in zip(beats[1:], beats[2:])]
        assert all(HB_MS * 0.8 <= g <= HB_MS * 1.3 for g in gaps), gaps
        # The first beat comes after a random part of the interval.
        conn = s.dc.record()["connections"][0]["t"]
        assert beats[0]["t"] - conn <= HB_MS * 1.3
        # The heartbeat carries the last sequence number.
        assert beats[-1]["d"] == s.dc.state()["seq"], beats[-1]
        s.dc.control("/_ack", {"on": False})
        wait_until(lambda: s.dc.record()["resume"], 10, "RESUME")
        s.dc.control("/_ack", {"on": True})
        rec = s.dc.record()
        r = rec["resume"][0]
        assert r["token"] == TOKEN and r["session_id"] == \
            s.dc.state()["session"], r
        assert len(rec["identify"]) == 1, "identified again, not resumed"
        assert len(rec["connections"]) == 2, rec["connections"]
        wait_until(lambda: s.agent.status()["triggers"]["discord"]
                   ["state"] == "up", 10, "up again")
        assert s.agent.status()["triggers"]["discord"]["resumes"] == 1


def test_heartbeat_request_just_before_the_tick_is_not_a_zombie():
    """Op 1 from the gateway shortly before af's own beat is due, its ACK
    late: the beat af owes the request goes out, the regular beat follows
    while that ACK is still on its way, and nothing went a whole interval
    unacknowledged, so af keeps the connection."""
    hb = 1000
    with Setup({"default": [reply("hi", stop="end_turn")]},
               heartbeat=hb) as s:
        s.ready()
        for n in (1, 2):
            s.dc.control("/_heartbeat_request", {"lead": 250, "hold": 700})
            wait_until(lambda: len(s.dc.record()["heartbeat_requests"]) >= n,
                       10, f"heartbeat request {n}")
            time.sleep(hb * 2.5 / 1000)
        rec = s.dc.record()
        assert "zombie" not in s.agent.log_text()
        assert len(rec["connections"]) == 1, rec["connections"]
        assert rec["disconnections"] == [] and rec["resume"] == [], rec
        st = s.agent.status()["triggers"]["discord"]
        assert st["state"] == "up" and st["reconnects"] == 0, st
        beats = rec["heartbeats"]
        answers = [b for b in beats if b.get("requested")]
        assert len(answers) == 2, beats
        for a in answers:
            # The test means something only if af's regular beat came while
            # the answer's ACK was held.
            assert any(b.get("held") and a["t"] < b["t"] <= a["t"] + 700
                       for b in beats), (a, beats)
        # A beat that really goes unanswered still counts.
        s.dc.control("/_ack", {"on": False})
        wait_until(lambda: s.dc.record()["resume"], 10, "RESUME")
        s.dc.control("/_ack", {"on": True})
        assert "zombie" in s.agent.log_text()


def test_resume_replays_events_after_a_drop():
    script = {"default": [reply("one", stop="end_turn"),
                          reply("two", stop="end_turn"),
                          reply("three", stop="end_turn")]}
    with Setup(script) as s:
        s.ready()
        s.dc.push("first", guild_id=None)
        wait_posts(s.dc, 1)
        s.dc.control("/_drop", {})          # no close frame
        wait_until(lambda: not s.dc.state()["connected"], 5, "drop")
        # Dispatched while af is away: replayed on RESUME.
        s.dc.push("second", guild_id=None)
        s.dc.push("third", guild_id=None)
        wait_until(lambda: s.dc.record()["resume"], 10, "RESUME")
        got = wait_posts(s.dc, 3)
        time.sleep(0.7)
        got = s.dc.posts()
        assert [p["body"]["content"] for p in got] == ["one", "two",
                                                       "three"], got
        prompts = [json.dumps(r["body"]["messages"])
                   for r in s.model.requests()]
        assert len(prompts) == 3, prompts
        assert "second" in prompts[1] and "third" in prompts[2]
        rec = s.dc.record()
        assert len(rec["identify"]) == 1 and len(rec["resume"]) == 1
        # A RESUME starts no session: no GET /gateway/bot before it.
        assert len(s.dc.posts("gateway")) == 1, s.dc.posts("gateway")
        # RESUME named the last sequence af had seen before the drop.
        assert rec["resume"][0]["seq"] == 2, rec["resume"]


def test_close_with_code_resumes_and_reconnect_op():
    with Setup({"default": [reply("hi", stop="end_turn")]}) as s:
        s.ready()
        s.dc.control("/_drop", {"code": 4000})
        wait_until(lambda: len(s.dc.record()["resume"]) == 1, 10, "RESUME")
        s.ready()
        s.dc.control("/_reconnect")
        wait_until(lambda: len(s.dc.record()["resume"]) == 2, 10,
                   "RESUME after op 7")
        assert len(s.dc.record()["identify"]) == 1


def test_invalid_session():
    with Setup({"default": [reply("hi", stop="end_turn")]}) as s:
        s.ready()
        # Resumable: a new connection and RESUME.
        s.dc.control("/_invalid_session", {"resumable": True})
        wait_until(lambda: len(s.dc.record()["resume"]) == 1, 10, "RESUME")
        s.ready()
        # Not resumable: a fresh IDENTIFY after 1 to 5 s, never sooner
        # than 5 s after the last one.
        conns = len(s.dc.record()["connections"])
        t = time.monotonic()
        s.dc.control("/_invalid_session", {"resumable": False})
        wait_until(lambda: len(s.dc.record()["identify"]) == 2, 10,
                   "second IDENTIFY")
        assert time.monotonic() - t >= 0.9
        rec = s.dc.record()
        assert rec["identify"][1]["token"] == TOKEN
        # On the same connection, as the documentation says.
        assert len(rec["connections"]) == conns, rec["connections"]
        assert len(rec["resume"]) == 1, rec["resume"]
        s.ready(2)
        s.dc.push("after the new session", guild_id=None)
        wait_posts(s.dc, 1)


def test_auth_failed_4004_is_down():
    # GET /gateway/bot is scripted to let the wrong token through, as far
    # as the gateway, which closes with 4004.
    with Setup({"default": [reply("hi", stop="end_turn")]},
               token="wrong.token",
               before=lambda dc: dc.gateway_bot()) as s:
        st = s.down()
        assert "4004" in st["last_error"], st
        assert "authentication failed" in st["last_error"], st
        st_code, body = s.agent.request("status", "GET", "/healthz")
        assert st_code == 503, (st_code, body)
        time.sleep(1.5)
        # No reconnect loop after a fatal close.
        assert len(s.dc.record()["identify"]) == 1
        assert "wrong.token" not in s.agent.log_text()


def test_gateway_bot_401_is_down():
    with Setup({"default": [reply("hi", stop="end_turn")]},
               token="wrong.token") as s:
        st = s.down()
        assert "401" in st["last_error"], st
        assert "/gateway/bot" in st["last_error"], st
        got = s.dc.posts("gateway")
        assert got[0]["status"] == 401, got
        assert got[0]["headers"]["authorization"] == "Bot wrong.token"
        time.sleep(1.5)
        # Not retried, and the gateway never opened.
        assert len(s.dc.posts("gateway")) == 1
        assert s.dc.record()["connections"] == []
        assert "wrong.token" not in s.agent.log_text()


def test_session_start_limit_waits_for_reset():
    reset_ms = 3000
    marks = {}

    def spent(dc):
        marks["t"] = dc.control("/_session_limit", {
            "remaining": 0, "reset_after": reset_ms})["t"]
    with Setup({"default": [reply("after the reset", stop="end_turn")]},
               before=spent) as s:
        def waiting():
            st = s.agent.status()["triggers"]["discord"]
            return st if "session start limit" in (st["last_error"] or "") \
                else None
        st = wait_until(waiting, 5, "waiting for the session start limit")
        assert st["state"] == "backoff", st
        assert "until" in st["last_error"], st
        assert st["session_start_limit"]["remaining"] == 0, st
        assert st["session_start_limit"]["waiting_until"], st
        first = s.dc.posts("gateway")[0]
        assert first["headers"]["authorization"] == f"Bot {TOKEN}", first
        assert first["path"] == "/api/v10/gateway/bot", first
        s.ready(timeout=15)
        rec = s.dc.record()
        # Nothing touched the gateway before the limit reset.
        assert rec["connections"][0]["t"] >= marks["t"] + reset_ms, \
            (rec["connections"], marks)
        gets = s.dc.posts("gateway")
        assert len(gets) == 2 and gets[1]["t"] >= marks["t"] + reset_ms, gets
        assert len(rec["identify"]) == 1
        st = s.agent.status()["triggers"]["discord"]
        assert st["session_start_limit"]["waiting_until"] is None, st
        assert s.agent.log_text().count("no session starts left") == 1, \
            s.agent.log_text()
        s.dc.push("hi", guild_id=None)
        got = wait_posts(s.dc, 1)
        assert got[0]["body"]["content"] == "after the reset", got


def test_gateway_bot_5xx_backs_off():
    def broken(dc):
        dc.control("/_script", {"route": "gateway", "status": 502,
                                "count": 1, "body": "bad gateway"})
    with Setup({"default": [reply("hi", stop="end_turn")]},
               before=broken) as s:
        s.ready()
        gets = s.dc.posts("gateway")
        assert [g["status"] for g in gets] == [502, 200], gets
        # The trigger's backoff: at least half of its first 1 s step.
        assert gets[1]["t"] - gets[0]["t"] >= 450, gets
        assert s.dc.record()["connections"][0]["t"] >= gets[1]["t"]


def test_invalid_session_asks_before_identify():
    with Setup({"default": [reply("hi", stop="end_turn")]}) as s:
        s.ready()
        # No session starts left: the new IDENTIFY (due within 5 s) waits
        # for the reset, on a new connection.
        t = s.dc.control("/_session_limit", {"remaining": 0,
                                             "reset_after": 7000})["t"]
        s.dc.control("/_invalid_session", {"resumable": False})
        wait_until(lambda: len(s.dc.posts("gateway")) == 2, 10,
                   "GET /gateway/bot before IDENTIFY")
        wait_until(lambda: not s.dc.state()["connected"], 5, "closed")
        st = s.agent.status()["triggers"]["discord"]
        assert "session start limit" in st["last_error"], st
        assert len(s.dc.record()["identify"]) == 1
        s.ready(2, timeout=15)
        rec = s.dc.record()
        assert len(rec["connections"]) == 2, rec["connections"]
        assert rec["connections"][1]["t"] >= t + 7000, (rec, t)


def test_rate_limited_reply_retried_once_delivered():
    with Setup({"default": [reply("limited", stop="end_turn")]}) as s:
        s.ready()
        s.dc.control("/_script", {
            "route": "messages", "status": 429, "count": 1,
            "body": {"message": "You are being rate limited.",
                     "retry_after": 0.8, "global": False},
            "headers": {"X-RateLimit-Remaining": "0",
                        "X-RateLimit-Reset-After": "0.8",
                        "X-RateLimit-Bucket": "b1"}})
        s.dc.push("hi", guild_id=None)
        ok = wait_posts(s.dc, 1, status=200)
        allp = s.dc.posts()
        assert [p["status"] for p in allp] == [429, 200], allp
        assert allp[1]["t"] - allp[0]["t"] >= 750, allp
        time.sleep(0.5)
        assert len(s.dc.posts(status=200)) == 1
        assert ok[0]["body"]["content"] == "limited"


def test_global_rate_limit_pauses_all():
    script = {"default": [reply("a", stop="end_turn"),
                          reply("b", stop="end_turn")]}
    with Setup(script) as s:
        s.ready()
        s.dc.control("/_script", {
            "route": "messages", "status": 429, "count": 1,
            "body": {"message": "global", "retry_after": 1.0,
                     "global": True},
            "headers": {"X-RateLimit-Global": "true"}})
        s.dc.push("hi", channel="601", guild_id=None)
        wait_until(lambda: s.dc.posts(status=429), 10, "the 429")
        s.dc.push("hi", channel="602", guild_id=None)
        wait_posts(s.dc, 2, status=200)
        posts = s.dc.posts()
        t429 = [p["t"] for p in posts if p["status"] == 429][0]
        assert all(p["t"] - t429 >= 950 for p in posts
                   if p["status"] == 200), posts


def test_long_reply_split():
    text = "".join(f"line {i:04d}: " + "é" * 60 + "\n" for i in range(80))
    assert len(text) > 4000
    with Setup({"default": [reply(text, stop="end_turn")]}) as s:
        s.ready()
        m = s.dc.push("tell me a lot", guild_id=None)
        wait_posts(s.dc, 3)
        time.sleep(0.5)
        got = s.dc.posts()
        parts = [g["body"]["content"] for g in got]
        assert len(parts) == 3, [len(p) for p in parts]
        assert all(len(p) <= 2000 for p in parts), [len(p) for p in parts]
        assert "".join(parts) == text, "reply text lost or changed"
        assert all(p.endswith("\n") for p in parts[:-1]), "cut inside a line"
        assert got[0]["body"]["message_reference"]["message_id"] == m["id"]
        assert all("message_reference" not in g["body"] for g in got[1:])
        assert all(g["body"]["allowed_mentions"] == {"parse": []}
                   for g in got)


def test_everyone_in_reply_defused():
    text = "@everyone @here <@&12345> <@67890> look at this"
    with Setup({"default": [reply(text, stop="end_turn")]}) as s:
        s.ready()
        s.dc.push("ping them all", guild_id=None)
        got = wait_posts(s.dc, 1)
        assert got[0]["body"]["content"] == text
        assert got[0]["body"]["allowed_mentions"] == {"parse": []}, got


def test_shutdown_closes_cleanly():
    with Setup({"default": [reply("hi", stop="end_turn")]}) as s:
        s.ready()
        s.dc.push("one question", guild_id=None)
        wait_posts(s.dc, 1)
        rc = s.agent.stop()
        assert rc == 0, (rc, s.agent.log_text())
        wait_until(lambda: not s.dc.state()["connected"], 5, "closed")
        no_token_leak(s.agent)


def test_slash_commands():
    extra = ("commands:\n  deploy: {prompt: \"Deploy to $ARGS now\", "
             "description: Ship it}\n")
    with Setup({"default": [reply("deploying", stop="end_turn")]},
               extra_dc=extra) as s:
        s.ready()
        s.dc.push(f"<@{BOT_ID}> /help", mentions=[BOT_ID])
        got = wait_posts(s.dc, 1, channel=CHAN)
        text = got[0]["body"]["content"]
        assert "/deploy" in text and "Ship it" in text, text
        assert got[0]["body"]["allowed_mentions"] == {"parse": []}
        assert s.model.requests() == [], "a built-in command ran the model"
        assert any(r["event"] == "discord_command" for r in s.agent.audit())
        s.dc.push(f"<@{BOT_ID}> /deploy prod $(id)", mentions=[BOT_ID])
        wait_posts(s.dc, 2, channel=CHAN)
        msgs = json.dumps(s.model.requests()[0]["body"]["messages"])
        # $ARGS is replaced once; what it brings is data.
        assert "Deploy to prod $(id) now" in msgs, msgs
