"""The kernel holds where the permission engine is skipped.

Each test writes an agent config into a temporary folder, runs
$AF_BUILD/tests/helpers/sandbox_try on it (which plans and applies the same
sandbox `af run` applies, then tries things with raw system calls) and checks
the errno of every attempt. A control run without the sandbox shows the same
attempts succeed, so the denials come from Landlock and seccomp, not from the
test setup. Plain functions, stdlib only; tests/integration/run.py calls them.
"""
import os
import shutil
import socket
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.environ.get("AF_BUILD", "build/plain")
AF_BIN = os.environ.get("AF_BIN", os.path.join(BUILD, "af"))


def _path(p):
    return p if os.path.isabs(p) else os.path.join(ROOT, p)


def _helper():
    h = _path(os.path.join(BUILD, "tests", "helpers", "sandbox_try"))
    assert os.access(h, os.X_OK), f"{h} is not built (make {BUILD}/tests/helpers/sandbox_try)"
    return h


class World:
    """A temporary agent folder, data/skills/secrets folders, a granted and
    a forbidden folder, and two loopback listeners: one the config names (the
    model server), one it does not."""

    def __init__(self):
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="af-sb-"))
        for d in ("agent", "data", "skills", "secrets", "ws", "out",
                  "outside"):
            os.mkdir(os.path.join(self.root, d))
        self._write("ws/f", "granted\n")
        self._write("outside/f", "not granted\n")
        self._write("secrets/key", "s3cret\n")
        self.model = self._listen()
        self.other = self._listen()
        self.status_port = self._free_port()
        self.unbound_port = self._free_port()

    def _write(self, rel, text):
        with open(os.path.join(self.root, rel), "w") as f:
            f.write(text)

    def _listen(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        return s

    @staticmethod
    def _free_port():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return port

    def p(self, rel):
        return os.path.join(self.root, rel)

    def config(self, extra=""):
        text = (
            "name: sb\n"
            "model:\n"
            "  provider: openai\n"
            "  name: m\n"
            f"  base_url: http://127.0.0.1:{self.model.getsockname()[1]}/v1\n"
            "status:\n"
            f"  listen: 127.0.0.1:{self.status_port}\n"
            + extra)
        path = self.p("agent/agent.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def env(self):
        e = dict(os.environ)
        e.update(AF_DATA=self.p("data"), AF_SKILLS=self.p("skills"),
                 AF_SECRETS=self.p("secrets"))
        return e

    def env_sb(self):
        # LeakSanitizer cannot inspect a sandboxed process at exit (no
        # /proc/self/task, no ptrace); other sanitizer reports still fail.
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")
        return env

    def run(self, cfg, actions, apply=True):
        args = [_helper()]
        if not apply:
            args.append("--no-apply")
        args += ["--data", self.p("data"), "--skills", self.p("skills"),
                 "--secrets", self.p("secrets"), cfg] + actions
        r = subprocess.run(args, capture_output=True, text=True, timeout=60,
                           cwd=self.root, env=self.env_sb())
        assert r.returncode == 0, f"sandbox_try failed: {r.stdout}{r.stderr}"
        out = {}
        for line in r.stdout.splitlines():
            what, sep, result = line.rpartition(": ")
            if sep:
                out[what] = result
        if apply:
            assert out.get("apply") == "ok", r.stdout + r.stderr
        return out

    def close(self):
        self.model.close()
        self.other.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _expect(got, table):
    bad = []
    for what, want in table:
        have = got.get(what)
        if isinstance(want, tuple):
            ok = have in want
        else:
            ok = have == want
        if not ok:
            bad.append(f"{what}: expected {want}, got {have}")
    assert not bad, "\n".join(bad)


def _grants(w):
    return ("permissions:\n"
            f"  read: [{w.p('ws')}]\n"
            f"  write: [{w.p('out')}]\n")


# Attempts common to every configuration: what no agent may ever do.
def _always(w):
    return [
        ("read:/etc/shadow", "read /etc/shadow", "EACCES"),
        ("read:" + w.p("outside/f"), "read " + w.p("outside/f"), "EACCES"),
        ("list:/root", "list /root", ("EACCES", "ENOENT")),
        ("list:/home", "list /home", ("EACCES", "ENOENT")),
        ("read:/proc/self/environ", "read /proc/self/environ", "EACCES"),
        ("write:" + w.p("outside/x"), "write " + w.p("outside/x"), "EACCES"),
        ("write:" + w.p("ws/x"), "write " + w.p("ws/x"), "EACCES"),
        ("write:/tmp/af-sb-escape", "write /tmp/af-sb-escape", "EACCES"),
        ("read:" + w.p("ws/f"), "read " + w.p("ws/f"), "ok"),
        ("write:" + w.p("out/x"), "write " + w.p("out/x"), "ok"),
        ("write:" + w.p("data/state"), "write " + w.p("data/state"), "ok"),
        ("read:" + w.p("secrets/key"), "read " + w.p("secrets/key"), "ok"),
        ("read:/etc/ssl/certs/ca-certificates.crt",
         "read /etc/ssl/certs/ca-certificates.crt", ("ok", "ENOENT")),
        (f"connect:{w.model.getsockname()[1]}",
         f"connect {w.model.getsockname()[1]}", "ok"),
        (f"connect:{w.other.getsockname()[1]}",
         f"connect {w.other.getsockname()[1]}", "EACCES"),
        (f"bind:{w.status_port}", f"bind {w.status_port}", "ok"),
        (f"bind:{w.unbound_port}", f"bind {w.unbound_port}", "EACCES"),
        # AF_PACKET raw, AF_NETLINK, AF_VSOCK, AF_ALG: no such family.
        ("socket:17:3:0", "socket 17:3:0", "EAFNOSUPPORT"),
        ("socket:16:3:0", "socket 16:3:0", "EAFNOSUPPORT"),
        ("socket:40:1:0", "socket 40:1:0", "EAFNOSUPPORT"),
        ("socket:38:5:0", "socket 38:5:0", "EAFNOSUPPORT"),
        # Raw IP, MPTCP, SCTP, ICMP echo, UDP-Lite: not the protocols af uses.
        ("socket:2:3:1", "socket 2:3:1", "EPERM"),
        ("socket:2:1:262", "socket 2:1:262", "EPERM"),
        ("socket:10:1:132", "socket 10:1:132", "EPERM"),
        ("socket:2:5:132", "socket 2:5:132", "EPERM"),
        ("socket:2:2:1", "socket 2:2:1", "EPERM"),
        ("socket:10:2:136", "socket 10:2:136", "EPERM"),
        # What af does use.
        ("socket:2:1:6", "socket 2:1:6", "ok"),
        ("socket:10:1:0", "socket 10:1:0", "ok"),
        ("socket:2:2:17", "socket 2:2:17", "ok"),
        ("socket:1:1:0", "socket 1:1:0", "ok"),
        ("resolve:localhost", "resolve localhost", "ok"),
        ("ptrace", "ptrace", "EPERM"),
        ("unshare", "unshare", "EPERM"),
        ("clonens", "clonens", "EPERM"),
        ("mount", "mount", "EPERM"),
        ("bpf", "bpf", "EPERM"),
        ("keyctl", "keyctl", "EPERM"),
        ("personality", "personality", "EPERM"),
        ("io_uring", "io_uring_setup", "EPERM"),
        ("thread", "thread", "ok"),
    ]


def _check(w, cfg, rows):
    got = w.run(cfg, [a for a, _, _ in rows])
    _expect(got, [(what, want) for _, what, want in rows])
    return got


def test_hermetic():
    w = World()
    try:
        cfg = w.config(_grants(w))
        rows = _always(w) + [
            ("execself:/usr/bin/id", "execself /usr/bin/id", "EPERM"),
            ("exec:/usr/bin/true", "exec /usr/bin/true: fork", "EPERM"),
            ("fork", "fork", "EPERM"),
            ("vfork", "vfork", "EPERM"),
            ("glibcfork", "glibcfork", "EPERM"),
            ("clone", "clone", "EPERM"),
            ("clone3", "clone3", "ENOSYS"),
            # UDP is open (the resolver); the residual `af flags` names.
            (f"udp:{w.unbound_port}", f"udp {w.unbound_port}", "ok"),
        ]
        _check(w, cfg, rows)
    finally:
        w.close()


def test_control_without_sandbox():
    """The same attempts succeed without the sandbox: the denials above are
    the kernel's."""
    w = World()
    try:
        cfg = w.config(_grants(w))
        got = w.run(cfg, [
            "read:" + w.p("outside/f"), "write:" + w.p("ws/x"),
            f"connect:{w.other.getsockname()[1]}",
            f"bind:{w.unbound_port}", "socket:2:2:1",
            "exec:/usr/bin/id", "fork", "clone3", "personality",
        ], apply=False)
        _expect(got, [
            ("read " + w.p("outside/f"), "ok"),
            ("write " + w.p("ws/x"), "ok"),
            (f"connect {w.other.getsockname()[1]}", "ok"),
            (f"bind {w.unbound_port}", "ok"),
            ("exec /usr/bin/id", "ok"),
            ("fork", "ok"),
            ("clone3", "ok"),
            ("personality", "ok"),
        ])
    finally:
        w.close()


def test_run_grants():
    w = World()
    try:
        cfg = w.config(_grants(w) + "  run: [true, cat]\n")
        rows = _always(w) + [
            ("exec:/usr/bin/true", "exec /usr/bin/true", "ok"),
            ("exec:/usr/bin/id", "exec /usr/bin/id", "EACCES"),
            ("exec:/usr/bin/python3", "exec /usr/bin/python3", "EACCES"),
            ("execself:/usr/bin/id", "execself /usr/bin/id", "EACCES"),
            ("sh:true", "sh true", "exit 0"),
            ("sh:id", "sh id", "exit 126"),
            ("sh:cat " + w.p("ws/f"), "sh cat " + w.p("ws/f"), "exit 0"),
            # The subprocess domain: no secrets, no data folder.
            ("sh:cat " + w.p("secrets/key"), "sh cat " + w.p("secrets/key"),
             "exit 1"),
            ("childread:" + w.p("secrets/key"),
             "childread " + w.p("secrets/key"), "EACCES"),
            ("childread:" + w.p("data/state"),
             "childread " + w.p("data/state"), "EACCES"),
            ("childread:" + w.p("ws/f"), "childread " + w.p("ws/f"), "ok"),
            ("sh:echo x > " + w.p("out/y"), "sh echo x > " + w.p("out/y"),
             "exit 0"),
            ("sh:echo x > " + w.p("data/y"), "sh echo x > " + w.p("data/y"),
             "exit 1"),
            # Without a stdio MCP server no subprocess needs the agent
            # folder.
            ("childread:" + w.p("agent/agent.yaml"),
             "childread " + w.p("agent/agent.yaml"), "EACCES"),
            ("fork", "fork", "ok"),
            ("clone", "clone", "ok"),
            # clone3 hides its flags from the filter: glibc falls back to
            # clone, where namespace flags are refused (clonens above).
            ("clone3", "clone3", "ENOSYS"),
        ]
        _check(w, cfg, rows)
    finally:
        w.close()


def test_mcp_stdio_server():
    w = World()
    try:
        cfg = w.config(_grants(w) + "tools:\n  mcp:\n    fs:\n"
                       "      command: [cat, server.js]\n")
        rows = _always(w) + [
            ("exec:/usr/bin/cat", "exec /usr/bin/cat", "ok"),
            ("exec:/usr/bin/id", "exec /usr/bin/id", "EACCES"),
            ("sh:cat " + w.p("agent/agent.yaml"),
             "sh cat " + w.p("agent/agent.yaml"), "exit 0"),
        ]
        _check(w, cfg, rows)
    finally:
        w.close()


def test_private_folders_beneath_a_subprocess_rule_are_refused():
    """Landlock cannot take a subfolder back from a granted folder, so a
    layout where the secrets or the data folder sits inside a folder that
    subprocesses may read is refused before anything runs."""
    w = World()
    try:
        cases = [
            # The secrets inside the agent folder of a stdio MCP server.
            ("tools:\n  mcp:\n    fs:\n      command: [cat, server.js]\n",
             ["--secrets", w.p("agent/secrets")], "secrets folder"),
            # The data folder inside a read grant, with a run grant.
            ("permissions:\n  run: [cat]\n  read: [" + w.root + "]\n",
             [], "data folder"),
            # The data folder inside a write grant, through a symlink.
            ("permissions:\n  run: [cat]\n  write: [" + w.p("link") + "]\n",
             ["--data", w.p("out/data")], "data folder"),
        ]
        os.mkdir(w.p("agent/secrets"))
        os.symlink(w.p("out"), w.p("link"))
        for extra, dirs, what in cases:
            cfg = w.config(extra)
            args = [_helper(), "--data", w.p("data"), "--skills",
                    w.p("skills"), "--secrets", w.p("secrets")] + dirs
            r = subprocess.run(args + [cfg, "read:/etc/hostname"],
                               capture_output=True, text=True, timeout=60,
                               env=w.env_sb())
            assert r.returncode != 0, (extra, r.stdout)
            assert "apply" not in r.stdout, (extra, r.stdout)
            assert what in r.stderr and "subprocesses may read" in r.stderr, \
                (extra, r.stderr)
        # The same secrets layout without subprocesses is fine: nothing
        # but af itself reads the agent folder.
        cfg = w.config("")
        r = subprocess.run([_helper(), "--data", w.p("data"), "--secrets",
                            w.p("agent/secrets"), cfg],
                           capture_output=True, text=True, timeout=60,
                           env=w.env_sb())
        assert r.returncode == 0 and "apply: ok" in r.stdout, \
            r.stdout + r.stderr
    finally:
        w.close()


def test_net_grants():
    """Net grants name hosts, so http_request gets ports 80 and 443 (a
    refused connection there means Landlock let it through); other ports
    stay closed."""
    w = World()
    try:
        cfg = w.config(_grants(w) + "  net: [example.com]\n")
        got = _check(w, cfg, _always(w) + [
            ("connect:443", "connect 443", ("ok", "ECONNREFUSED")),
            ("connect:80", "connect 80", ("ok", "ECONNREFUSED")),
            ("connect:8443", "connect 8443", "EACCES"),
            ("connect:22", "connect 22", "EACCES"),
        ])
        assert got
    finally:
        w.close()


def test_af_flags():
    """`af flags` prints the plan sandbox_try applies."""
    if not os.access(_path(AF_BIN), os.X_OK):
        raise AssertionError(f"{AF_BIN} is not built")
    w = World()
    try:
        cfg = w.config(_grants(w) + "  net: [example.com, \"*.example.org\"]\n")
        r = subprocess.run([_path(AF_BIN), "flags", cfg], capture_output=True,
                           text=True, timeout=30, env=w.env())
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines == sorted(lines), "af flags output is not sorted"
        for want in ["hermetic: yes", "landlock execute (none)",
                     "landlock read " + w.p("ws"),
                     "landlock write " + w.p("out"),
                     "landlock write " + w.p("data"),
                     f"landlock net connect tcp {w.model.getsockname()[1]}",
                     f"landlock net bind tcp {w.status_port}",
                     "landlock net connect tcp 443",
                     "seccomp deny execve EPERM",
                     "seccomp deny ptrace EPERM",
                     "hosts allow example.com"]:
            assert want in lines, f"missing {want!r} in:\n{r.stdout}"
        assert any(l.startswith("hosts unpinned *.example.org")
                   for l in lines), r.stdout
        assert not any(l.startswith("landlock read /etc/shadow")
                       for l in lines)
        r = subprocess.run([_path(AF_BIN), "flags", "--json", cfg],
                           capture_output=True, text=True, timeout=30,
                           env=w.env())
        if r.returncode == 0 and r.stdout.startswith("{"):
            import json
            j = json.loads(r.stdout)
            assert j["hermetic"] is True
            assert 443 in j["landlock"]["net"]["connect_tcp"]
    finally:
        w.close()


def test_af_flags_covers_fallback_models():
    """A fallback model's host and port are in the plan: without them the
    kernel would refuse the very connection a fallback exists for."""
    d = tempfile.mkdtemp(prefix="af-flags-")
    try:
        cfg = os.path.join(d, "agent.yaml")
        with open(cfg, "w") as f:
            f.write("name: fb\nmodel:\n  provider: anthropic\n  name: m\n"
                    "  fallbacks:\n    - {provider: openai, name: g, "
                    "base_url: \"https://fallback.example.net:4443/v1\"}\n")
        env = dict(os.environ, AF_DATA=d, AF_SKILLS=d, AF_SECRETS=d)
        r = subprocess.run([_path(AF_BIN), "flags", cfg], capture_output=True,
                           text=True, timeout=30, env=env)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert "landlock net connect tcp 4443" in lines, r.stdout
        assert "hosts allow fallback.example.net" in lines, r.stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_af_run_refuses_outside_a_container():
    """`af run` itself refuses to start where the probe finds no container,
    naming what it looked for, and starts with the operator's explicit
    AF_ALLOW_NO_CONTAINER=1. The probe looks under an empty root here:
    these tests run inside a container."""
    w = World()
    try:
        cfg = w.config("")
        fake = w.p("outside")
        env = w.env()
        env.pop("container", None)
        env.pop("AF_ALLOW_NO_CONTAINER", None)
        env["AF_CONTAINER_PROBE_ROOT"] = fake
        r = subprocess.run([_path(AF_BIN), "run", cfg], capture_output=True,
                           text=True, timeout=30, env=env)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "no container detected (looked for " in r.stderr, r.stderr
        for what in ("/.dockerenv", "/run/.containerenv",
                     "container environment variable"):
            assert what in r.stderr, (what, r.stderr)
        assert "AF_ALLOW_NO_CONTAINER=1" in r.stderr, r.stderr
        assert "listening" not in r.stderr, r.stderr
        # The same root with a container mark is a container.
        open(os.path.join(fake, ".dockerenv"), "w").close()
        p = subprocess.Popen([_path(AF_BIN), "run", cfg], env=env,
                             stderr=subprocess.PIPE, text=True)
        try:
            line = ""
            while "running" not in line:
                line = p.stderr.readline()
                assert line, "af exited"
                if "container detected" in line:
                    assert ".dockerenv" in line, line
        finally:
            p.terminate()
            p.wait(timeout=30)
    finally:
        w.close()
