"""MCP servers end to end: the real af against the official reference servers
(server-everything over stdio and Streamable HTTP, server-filesystem over
stdio, installed by tests/mcp/install.sh) and a small test peer of our own
(tests/mcp/hang_server.py) for timeouts, bounds and list_changed. The model is
the stand-in; what af offered and what came back is read from its record."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

from afharness import (Agent, ModelServer, ROOT, reply, webhook_config,
                       wait_until)

MCP_DIR = os.path.join(ROOT, "tests", "mcp")
MODULES = os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol")
EVERYTHING = os.path.join(MODULES, "server-everything", "dist", "index.js")
FILESYSTEM = os.path.join(MODULES, "server-filesystem", "dist", "index.js")
HANG = os.path.join(MCP_DIR, "hang_server.py")


def need_servers():
    if not os.path.exists(EVERYTHING) or not os.path.exists(FILESYSTEM):
        raise AssertionError("MCP reference servers missing: run "
                             "tests/mcp/install.sh (scripts/deps.sh does)")


def config(servers, extra_read=()):
    """A webhook agent with these tools.mcp entries (YAML text, indented
    under tools.mcp). The stdio servers' files must be readable inside the
    subprocess sandbox, hence the read grant on tests/mcp."""
    reads = ", ".join(f'"{p}"' for p in (MCP_DIR, *extra_read))
    return webhook_config(f"""permissions:
  read: [{reads}]
tools:
  mcp:
{servers}""")


def everything_stdio(name="everything", extra=""):
    return f"""    {name}:
      command: [node, "{EVERYTHING}", stdio]
{extra}"""


def post(agent, body="go"):
    st, _, text = agent.request_full("webhook", "POST", "/hook", body)
    assert st == 202, (st, text)


def offered(model, i=0):
    return [t["name"] for t in model.requests()[i]["body"]["tools"]]


def tool_results(model):
    out = []
    for r in model.requests():
        for m in (r.get("body") or {}).get("messages", []):
            if m.get("role") != "user" or not isinstance(m.get("content"), list):
                continue
            for b in m["content"]:
                if b.get("type") == "tool_result" and b not in out:
                    out.append(b)
    return out


def mcp_status(agent, name):
    return agent.status()["mcp"][name]


def test_stdio_list_and_call():
    need_servers()
    with ModelServer([
        reply(tool_calls=[("everything__echo", {"message": "hello mcp"}),
                          ("everything__get-tiny-image", {}),
                          ("everything__get-sum", {"a": 2, "b": 40})]),
        reply(text="done"),
    ]) as model:
        with Agent(config(everything_stdio()), model) as agent:
            st = mcp_status(agent, "everything")
            assert st["state"] == "up" and st["transport"] == "stdio", st
            assert st["tools"] >= 10 and st["restarts"] == 0, st
            post(agent)
            ends = agent.wait_runs(1)
            assert ends[0]["status"] == "ok", ends
            tools = offered(model)
            for t in ("current_time", "everything__echo", "everything__get-env",
                      "everything__get-sum"):
                assert t in tools, tools
            schema = [t for t in model.requests()[0]["body"]["tools"]
                      if t["name"] == "everything__echo"][0]["input_schema"]
            assert "message" in schema["properties"], schema
            res = tool_results(model)
            assert len(res) == 3, res
            assert "Echo: hello mcp" in res[0]["content"], res[0]
            assert not res[0].get("is_error"), res[0]
            assert "[image: image/png," in res[1]["content"], res[1]
            assert "42" in res[2]["content"], res[2]
            calls = [a for a in agent.audit() if a.get("event") == "tool"]
            assert [c["tool"] for c in calls] == [
                "everything__echo", "everything__get-tiny-image",
                "everything__get-sum"], calls
            assert all(c["decision"] == "allow" for c in calls), calls
            assert "hello mcp" in calls[0]["target"], calls[0]


def test_include_filters_and_denies():
    need_servers()
    with ModelServer([
        reply(tool_calls=[("everything__get-env", {}),
                          ("everything__echo", {"message": "x"})]),
        reply(text="done"),
    ]) as model:
        with Agent(config(everything_stdio(extra="      include: [echo, nope]\n")),
                   model) as agent:
            assert mcp_status(agent, "everything")["tools"] == 1
            agent.wait_log(r"include names nope")
            post(agent)
            agent.wait_runs(1)
            tools = offered(model)
            assert "everything__echo" in tools, tools
            assert "everything__get-env" not in tools, tools
            res = tool_results(model)
            assert res[0].get("is_error"), res[0]
            assert "permission denied" in res[0]["content"], res[0]
            assert "does not exist" in res[0]["content"], res[0]
            assert "Echo: x" in res[1]["content"], res[1]
            denied = [a for a in agent.audit() if a.get("decision") == "deny"]
            assert len(denied) == 1, denied
            assert denied[0]["tool"] == "everything__get-env", denied


def test_readonly_filesystem():
    need_servers()
    with ModelServer() as model:
        with Agent("", model, start=False) as agent:
            ws = os.path.join(agent.tmp, "ws")
            os.makedirs(ws)
            with open(os.path.join(ws, "a.txt"), "w") as f:
                f.write("file contents 123")
            with open(agent.config_path, "w") as f:
                f.write(config(f"""    fs:
      command: [node, "{FILESYSTEM}", "{ws}"]
      readonly: true
""", extra_read=(ws,)).replace("{model_url}", model.url()))
            agent.start()
            model.script([
                reply(tool_calls=[
                    ("fs__read_text_file", {"path": os.path.join(ws, "a.txt")}),
                    ("fs__write_file", {"path": os.path.join(ws, "b.txt"),
                                        "content": "no"})]),
                reply(text="done"),
            ])
            post(agent)
            agent.wait_runs(1)
            tools = offered(model)
            assert "fs__read_text_file" in tools, tools
            assert "fs__list_directory" in tools, tools
            for t in ("fs__write_file", "fs__edit_file", "fs__move_file",
                      "fs__create_directory"):
                assert t not in tools, tools
            res = tool_results(model)
            assert "file contents 123" in res[0]["content"], res[0]
            assert res[1].get("is_error") and "does not exist" in \
                res[1]["content"], res[1]
            assert not os.path.exists(os.path.join(ws, "b.txt"))


def test_crash_and_restart():
    need_servers()
    with ModelServer({"default": [
        reply(tool_calls=[("everything__echo", {"message": "again"})]),
        reply(text="done")]}) as model:
        with Agent(config(everything_stdio()), model) as agent:
            pid = mcp_status(agent, "everything")["pid"]
            os.killpg(pid, signal.SIGKILL)

            def restarted():
                st = mcp_status(agent, "everything")
                return st["restarts"] >= 1 and st["state"] == "up" and \
                    st.get("pid") not in (None, pid) and st
            st = wait_until(restarted, 20, "a restart")
            assert "killed by signal 9" in st["last_error"], st
            post(agent)
            agent.wait_runs(1)
            res = tool_results(model)
            assert "Echo: again" in res[0]["content"], res


def hang_config(extra=""):
    return config(f"""    hang:
      command: [python3, "{HANG}"]
      timeout: 1s
{extra}""")


def test_hung_call_times_out_and_run_continues():
    with ModelServer([
        reply(tool_calls=[("hang__wait", {}), ("hang__quick", {})]),
        reply(text="finished"),
    ]) as model:
        with Agent(hang_config(), model) as agent:
            post(agent)
            ends = agent.wait_runs(1)
            assert ends[0]["status"] == "ok", ends
            res = tool_results(model)
            assert res[0].get("is_error"), res[0]
            assert "timed out after 1000 ms" in res[0]["content"], res[0]
            assert res[1]["content"] == "quick ok", res[1]
            # The server was told, and it is still the same process.
            agent.wait_log(r"mcp hang: stderr: cancelled request \d+: "
                           r"timed out")
            assert mcp_status(agent, "hang")["restarts"] == 0


def test_run_end_cancels_call():
    with ModelServer([reply(tool_calls=[("hang__wait", {})])]) as model:
        with Agent(hang_config().replace("timeout: 1s", "timeout: 30s") +
                   "limits:\n  run_timeout: 1s\n", model) as agent:
            post(agent)
            ends = agent.wait_runs(1)
            assert ends[0]["status"] == "error_timeout", ends
            agent.wait_log(r"mcp hang: stderr: cancelled request \d+: "
                           r"the run ended")


def test_overlong_line_restarts_and_list_changed():
    with ModelServer({"default": [
        reply(tool_calls=[("hang__flood", {})]),
        # The restart's backoff is 250 ms: call again once it is over.
        dict(reply(tool_calls=[("hang__change", {})]), delay=1.5),
        reply(text="done")]}) as model:
        with Agent(hang_config().replace("timeout: 1s", "timeout: 10s"),
                   model) as agent:
            post(agent, "one")
            agent.wait_runs(1)
            res = tool_results(model)
            assert res[0].get("is_error"), res[0]
            assert "over 4194304 bytes" in res[0]["content"], res[0]
            assert res[1]["content"] == "change ok", res[1]
            wait_until(lambda: mcp_status(agent, "hang")["tools"] == 5, 10,
                       "the re-listing")
            assert mcp_status(agent, "hang")["restarts"] == 1
            post(agent, "two")
            agent.wait_runs(2)
            last = [r for r in model.requests()
                    if "Event: two" in json.dumps(r["body"]["messages"][0])]
            names = [t["name"] for t in last[0]["body"]["tools"]]
            assert "hang__added" in names, names


def test_env_is_scoped():
    need_servers()
    with ModelServer([reply(tool_calls=[("everything__get-env", {})]),
                      reply(text="done")]) as model:
        with Agent(config(everything_stdio(extra=
                   '      env: { GRANTED: "yes", TOKEN: "${secret:tok}" }\n')),
                   model, secrets={"tok": "s3cret-value-99"},
                   env={"AF_TEST_LEAK": "leak"}) as agent:
            post(agent)
            agent.wait_runs(1)
            text = tool_results(model)[0]["content"]
            env = json.loads(text)
            assert set(env) == {"PATH", "HOME", "GRANTED", "TOKEN"}, env
            assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin", env
            assert env["GRANTED"] == "yes", env
            # The server saw the secret; the model never does.
            assert "s3cret-value-99" not in text, text


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class HttpEverything:
    def __init__(self):
        self.port = free_port()
        env = dict(os.environ, PORT=str(self.port))
        self.proc = subprocess.Popen(["node", EVERYTHING, "streamableHttp"],
                                     env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        ready = threading.Event()

        def drain():
            for line in iter(self.proc.stdout.readline, ""):
                if "listening on port" in line:
                    ready.set()
        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(20):
            self.stop()
            raise AssertionError("server-everything streamableHttp did not "
                                 "start")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def test_streamable_http():
    need_servers()
    srv = HttpEverything()
    try:
        with ModelServer([
            reply(tool_calls=[("web__echo", {"message": "over http"}),
                              ("web__get-sum", {"a": 1, "b": 2})]),
            reply(text="done"),
        ]) as model:
            with Agent(webhook_config(f"""tools:
  mcp:
    web:
      url: http://127.0.0.1:{srv.port}/mcp
      timeout: 10s
"""), model) as agent:
                st = mcp_status(agent, "web")
                assert st["state"] == "up" and st["transport"] == "http", st
                post(agent)
                agent.wait_runs(1)
                tools = offered(model)
                assert "web__echo" in tools and "web__get-env" in tools, tools
                res = tool_results(model)
                assert "Echo: over http" in res[0]["content"], res
                assert not res[0].get("is_error"), res
                assert "3" in res[1]["content"], res
    finally:
        srv.stop()
