"""`af schema` against what af itself accepts: every example config and
every `af init` combination must validate under the printed JSON Schema
(with ajv, a real validator, pinned in tests/schema), and configs af refuses
for their shape must fail it too, so the check is not vacuous. ajv reads the
YAML files directly (js-yaml)."""
import itertools
import json
import os
import shutil
import subprocess
import tempfile

from afharness import AF_BIN, ROOT

SCHEMA_DIR = os.path.join(ROOT, "tests", "schema")
AJV = os.path.join(SCHEMA_DIR, "node_modules", ".bin", "ajv")
TRIGGERS = ["webhook", "telegram", "discord", "imap", "cron"]
PROVIDERS = ["anthropic", "openai"]


def need_ajv():
    if not os.path.exists(AJV):
        raise AssertionError("ajv missing: run tests/schema/install.sh "
                             "(scripts/deps.sh does)")


def schema_file(tmp):
    out = subprocess.run([AF_BIN, "schema"], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0, out.stderr
    json.loads(out.stdout)
    path = os.path.join(tmp, "schema.json")
    with open(path, "w") as f:
        f.write(out.stdout)
    return path


def ajv(schema, paths):
    """{path: valid?} for YAML or JSON data files, in one run of ajv (node
    starts slowly), and its whole output for messages."""
    out = subprocess.run([AJV, "validate", "-s", schema, "--all-errors",
                          "--errors=text", "--allow-union-types"]
                         + [a for p in paths for a in ("-d", p)],
                         capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    verdict = {}
    for line in text.splitlines():
        for p in paths:
            if line == p + " valid":
                verdict[p] = True
            elif line == p + " invalid":
                verdict[p] = False
    assert set(verdict) == set(paths), text
    return verdict, text


def validate(path):
    out = subprocess.run([AF_BIN, "validate", path], capture_output=True,
                         text=True, timeout=10)
    return out.returncode, out.stdout + out.stderr


def test_schema_compiles():
    need_ajv()
    tmp = tempfile.mkdtemp(prefix="af-schema-")
    try:
        schema = schema_file(tmp)
        out = subprocess.run([AJV, "compile", "-s", schema,
                              "--allow-union-types"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_examples_validate():
    need_ajv()
    tmp = tempfile.mkdtemp(prefix="af-schema-")
    try:
        schema = schema_file(tmp)
        examples = os.path.join(ROOT, "examples")
        paths = [os.path.join(examples, n, "agent.yaml")
                 for n in sorted(os.listdir(examples))
                 if os.path.exists(os.path.join(examples, n, "agent.yaml"))]
        assert paths
        for path in paths:
            rc, text = validate(path)
            assert rc == 0, (path, text)
        verdict, text = ajv(schema, paths)
        assert all(verdict.values()), text
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_init_outputs_validate():
    need_ajv()
    tmp = tempfile.mkdtemp(prefix="af-schema-")
    try:
        schema = schema_file(tmp)
        paths = []
        for trig, prov in itertools.product(TRIGGERS, PROVIDERS):
            name = f"{trig}-{prov}"
            out = subprocess.run([AF_BIN, "init", name, "--trigger", trig,
                                  "--provider", prov], cwd=tmp,
                                 capture_output=True, text=True, timeout=10)
            assert out.returncode == 0, out.stderr
            assert f"af validate {name}/agent.yaml" in out.stdout, out.stdout
            path = os.path.join(tmp, name, "agent.yaml")
            rc, text = validate(path)
            assert rc == 0 and text.startswith("ok"), (name, text)
            paths.append(path)
        verdict, text = ajv(schema, paths)
        assert all(verdict.values()), text
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_schema_refuses_what_af_refuses():
    need_ajv()
    tmp = tempfile.mkdtemp(prefix="af-schema-")
    base = ("name: bad-agent\nmodel:\n  provider: anthropic\n"
            "  name: m\n")
    cases = {
        "unknown-top": base + "colour: blue\n",
        "unknown-nested": base + "limits:\n  speed: 3\n",
        "wrong-type": base + "limits:\n  queue: many\n",
        "bad-enum": base + "memory: everything\n",
        "bad-name": base.replace("bad-agent", "Bad_Agent"),
        "no-model": "name: x\n",
        "bad-duration": base + "limits:\n  run_timeout: soon\n",
        # a_ + _x and a + __x would both be the tool a___x.
        "mcp-name-underscore-end": base + "tools:\n  mcp:\n    a_:\n"
        "      url: https://mcp.example.com/\n",
        "mcp-name-double-underscore": base + "tools:\n  mcp:\n    a__b:\n"
        "      url: https://mcp.example.com/\n",
    }
    try:
        schema = schema_file(tmp)
        paths = []
        for name, text in cases.items():
            path = os.path.join(tmp, name + ".yaml")
            with open(path, "w") as f:
                f.write(text)
            rc, out = validate(path)
            assert rc == 2, (name, out)
            paths.append(path)
        verdict, out = ajv(schema, paths)
        assert not any(verdict.values()), out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_init_refuses_overwrite_and_bad_names():
    tmp = tempfile.mkdtemp(prefix="af-init-")
    try:
        run = lambda *a: subprocess.run([AF_BIN, "init", *a], cwd=tmp,
                                        capture_output=True, text=True,
                                        timeout=10)
        assert run("keep-me").returncode == 0
        path = os.path.join(tmp, "keep-me", "agent.yaml")
        with open(path, "a") as f:
            f.write("# mine\n")
        out = run("keep-me", "--trigger", "cron")
        assert out.returncode == 1 and "not overwritten" in out.stderr, out
        with open(path) as f:
            assert f.read().endswith("# mine\n")
        for bad in ("Bad", "-x", "a_b", "../up", "a" * 64, ""):
            out = run(bad)
            assert out.returncode == 2, (bad, out)
        assert not os.path.exists(os.path.join(os.path.dirname(tmp), "up"))
        assert run("x", "--trigger", "sms").returncode == 2
        assert run("x", "--provider", "other").returncode == 2
        assert not os.path.exists(os.path.join(tmp, "x"))
        # A link planted where the file goes is not followed.
        os.makedirs(os.path.join(tmp, "linked"))
        target = os.path.join(tmp, "target")
        os.symlink(target, os.path.join(tmp, "linked", "agent.yaml"))
        assert run("linked").returncode == 1
        assert not os.path.exists(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
