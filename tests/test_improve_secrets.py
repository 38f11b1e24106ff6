"""An improve target on a hosted model never holds the user's key, and no form of it is published.

The run's target is the toolloop agent on `openai/gpt-planted`, with a planted fake key in
OPENAI_API_KEY and a fake provider on 127.0.0.1 in OPENAI_BASE_URL (the harness's own
settings). The target's code snoops when its PACT server starts: it prints its whole
environment (and /proc's copies), every common encoding of every value it finds, the same
encodings of the planted key (compiled into the target as character codes, standing for a key
that leaked by some other route), and tries to connect to the provider itself. Then the run
goes on: the target's model calls reach the provider through the harness's gateway, which
adds the key. The test reads every file of the bundle.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from metaeval.protocols.improve.init_target import init_target
from metaeval.protocols.improve.meta_agents import ScriptedMetaAgent
from metaeval.protocols.improve.run import run_experiment
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable

sys.path.insert(0, str(Path(__file__).parent))
from openai_stub import OpenAIStub  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "examples" / "improve" / "profiles" / "toolloop_target.json"

SNOOP = r'''
"""Runs when the PACT server imports the policy: everything a hostile target would try."""
import base64
import os
import socket

PLANTED = "".join(map(chr, {codes}))
LABEL = "{label}"


def forms(value):
    data = value.encode()
    out = [value, value[::-1], data.hex(), data.hex().upper()]
    for pad in (b"", b"x", b"xy"):
        out += [base64.b64encode(pad + data).decode(), base64.urlsafe_b64encode(pad + data).decode()]
    return out


found = dict(os.environ)
for path in ("/proc/self/environ", "/proc/1/environ"):
    try:
        with open(path, "rb") as handle:
            for item in handle.read().split(b"\0"):
                name, _, value = item.decode("utf-8", "replace").partition("=")
                if name:
                    found[path + ":" + name] = value
    except OSError as exc:
        print("SNOOP-NO-PROC", path, type(exc).__name__, flush=True)
print("SNOOP-ENV", LABEL, sorted(found), flush=True)
for name, value in sorted(found.items()):
    for form in forms(value):
        print("SNOOP-FORM", name, form, flush=True)
for form in forms(PLANTED):
    print("SNOOP-PLANTED", LABEL, form, flush=True)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    print("SNOOP-PROVIDER reachable", flush=True)
except OSError as exc:
    print("SNOOP-PROVIDER unreachable", type(exc).__name__, flush=True)
'''

TASK_TEST = (
    "#!/bin/bash\n"
    'if [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then echo 1; else echo 0; fi'
    " > /logs/verifier/reward.txt\n"
)


@pytest.fixture
def sandboxed() -> None:
    reason = harbor_sandbox_unavailable()
    if reason is not None:
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_BWRAP=1 but {reason}")
        pytest.skip(reason)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)


def forms(value: str) -> dict[str, str]:
    """The key and each encoding the target prints of it."""
    data = value.encode()
    out = {"raw": value, "reversed": value[::-1], "hex": data.hex(), "HEX": data.hex().upper()}
    for pad in (b"", b"x", b"xy"):
        out[f"b64+{len(pad)}"] = base64.b64encode(pad + data).decode()
        out[f"urlsafe+{len(pad)}"] = base64.urlsafe_b64encode(pad + data).decode()
    return out


def experiment(tmp_path: Path, key: str, port: int) -> Path:
    """The toolloop target with the snoop in its baseline, one write-a-file task, budget 1."""
    repo = tmp_path / "target"
    init_target("toolloop", repo)
    codes = [ord(c) for c in key]
    (repo / "target_agent" / "snoop.py").write_text(
        SNOOP.replace("{codes}", repr(codes))
        .replace("{port}", str(port))
        .replace("{label}", "baseline")
    )
    pact = repo / "target_agent" / "pact.py"
    pact.write_text("import target_agent.snoop  # noqa: F401\n" + pact.read_text())
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "snoop")
    task = tmp_path / "suite" / "write-hello"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "task.toml").write_text('version = "1.0"\n\n[verifier]\ntimeout_sec = 30.0\n')
    (task / "instruction.md").write_text("Put the word hello in a new file.\n")
    (task / "tests" / "test.sh").write_text(TASK_TEST)
    (tmp_path / "suite" / "suite.json").write_text(
        json.dumps({"name": "secrets", "splits": {"optimize": ["write-hello"]}})
    )
    (tmp_path / "suite_optimize.json").write_text(
        json.dumps({"name": "secrets-optimize", "tasks_dir": "suite", "split_id": "optimize"})
    )
    (tmp_path / "profile.json").write_text(PROFILE.read_text())
    sut = {
        "name": "scripted",
        "contract": "edit/1",
        "meta_agent": {"agent": "scripted"},
        "sum_profile": "profile.json",
    }
    (tmp_path / "sut.json").write_text(json.dumps(sut))
    manifest = {
        "mode": "recursive_search",
        "sut": {"sut_config": "sut.json"},
        "sum": {"model": "openai/gpt-planted"},
        "baseline": {"id": "baseline", "repo": "target", "base_commit": "HEAD"},
        "evaluation": {"optimize": {"suite_config": "suite_optimize.json"}},
        "trial_budget": 1,
        "target_budget": {"max_steps_per_task": 4, "task_timeout_s": 60},
        "output": "bundle",
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def relabel(worktree: Path, _input: dict) -> str:
    """The trial's candidate: the same snoop, labelled, so its evaluation snoops too."""
    snoop = worktree / "target_agent" / "snoop.py"
    snoop.write_text(snoop.read_text().replace('LABEL = "baseline"', 'LABEL = "candidate"'))
    return "relabel the snoop"


def reply(messages: list[dict]) -> str:
    """The fake provider: write the file, then submit."""
    if any("write_file" in str(m.get("content")) for m in messages if m.get("role") == "assistant"):
        return json.dumps({"type": "submit", "answer": "done"})
    return json.dumps({"type": "write_file", "path": "/app/out.txt", "content": "hello"})


@pytest.mark.bwrap
def test_a_hosted_model_target_never_gets_the_key_and_no_form_of_it_is_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandboxed: None
) -> None:
    key = f"sk-planted-{uuid.uuid4().hex}"
    with OpenAIStub(reply, model="gpt-planted") as stub:
        port = int(stub.base_url.rsplit(":", 1)[1].split("/", 1)[0])
        monkeypatch.setenv("OPENAI_API_KEY", key)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        manifest = experiment(tmp_path, key, port)
        run_experiment(manifest, meta_agent=ScriptedMetaAgent([relabel]))
    bundle = tmp_path / "bundle"

    # The model was reached through the harness, which alone held the key.
    requests = stub.chat_requests()
    assert requests, "the target never reached its model"
    assert {h.get("Authorization") for h in stub.headers} == {f"Bearer {key}"}
    baseline = json.loads((bundle / "baseline_evaluation.json").read_text())
    assert baseline["optimize"]["score"] == 1.0  # the gateway's answers drove the target

    logs = sorted(bundle.rglob("*-server-*.log"))
    assert len(logs) >= 2, logs  # the baseline's and the candidate's PACT servers
    text = "\n".join(path.read_text() for path in logs)
    for label in ("baseline", "candidate"):
        assert f"SNOOP-ENV {label}" in text
        # every printed encoding of the planted key was redacted away
        printed = re.findall(rf"^SNOOP-PLANTED {label} (.*)$", text, re.MULTILINE)
        assert len(printed) == len(forms(key)) and all("[REDACTED]" in p for p in printed)
    # The target saw no credential and could not reach the provider itself.
    env_names = re.findall(r"SNOOP-ENV baseline (\[.*\])", text)[0]
    assert "OPENAI_BASE_URL" in env_names  # the gateway's loopback address inside
    # OPENAI_API_KEY holds the gateway socket's token (redacted too), never the planted key
    # (checked in every form below, across all files).
    assert "'OPENAI_API_KEY'" in env_names and "mgw-" not in text
    # and no encoded form of that token either: each one the target printed is scrubbed
    token_forms = re.findall(r"^SNOOP-FORM (?:/proc/\S+:)?OPENAI_API_KEY (.*)$", text, re.M)
    assert len(token_forms) >= len(forms("x")), token_forms
    assert all("[REDACTED]" in form for form in token_forms), token_forms
    assert "SNOOP-PROVIDER unreachable" in text and "SNOOP-PROVIDER reachable" not in text
    assert "network=none" in text
    assert (bundle / "model_server" / "gateway.jsonl").is_file()

    # No file of the bundle holds the key or any of its encodings.
    files = [p for p in bundle.rglob("*") if p.is_file()]
    assert len(files) > 10
    for path in files:
        data = path.read_bytes()
        for name, form in forms(key).items():
            assert form.encode() not in data, (path, name)
