"""The SUT config's launch_profile takes effect (issue 28, item 5): with meta_agent.agent
"pact" the harness launches the profile's PACT server each trial and plays its actions in the
optimizer worktree; any other lane refuses a launch profile, naming the field.

The lane here is metaeval's own PACT server with `command_policy`, whose commands come from
the profile's `env`: it appends the scripted demo's recipes to the target's playbook.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from improve_experiment import experiment, ledger
from metaeval.errors import ConfigError
from metaeval.protocols.improve.run import run_experiment
from metaeval.protocols.improve.scripted_steps import improve

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "examples" / "improve-suites" / "terminal"


def recipe_lines(tmp_path: Path) -> str:
    """What the scripted demo's first step appends to the playbook."""
    fake = tmp_path / "fake-worktree"
    (fake / "target_agent").mkdir(parents=True)
    (fake / "target_agent" / "playbook.py").write_text("")
    improve(SUITE)(fake, {})
    return (fake / "target_agent" / "playbook.py").read_text()


def pact_lane(tmp_path: Path, *, lane: str = "pact", **profile_extra) -> Path:
    manifest = experiment(tmp_path, budget=1)
    suts = manifest.parent / "suts"
    commands = [
        "head -1 .aie_bench_recursive/optimizer_instruction.md",
        f"printf %s {shlex.quote(recipe_lines(tmp_path))} >> target_agent/playbook.py",
    ]
    profile = {
        "name": "command-lane",
        "command": [
            "{python}",
            "-m",
            "metaeval.protocols.improve.pact.server",
            "--policy",
            "metaeval.protocols.improve.pact.policies:command_policy",
            "--host",
            "{host}",
            "--port",
            "{port}",
        ],
        "env": {
            "METAEVAL_PACT_COMMANDS": json.dumps(commands),
            "METAEVAL_PACT_SUMMARY": "recipes from the pact lane",
        },
        **profile_extra,
    }
    (suts / "pact_lane.json").write_text(json.dumps(profile))
    sut_path = suts / "scripted_sut.json"
    sut = json.loads(sut_path.read_text())
    sut.update(meta_agent={"agent": lane}, launch_profile="pact_lane.json")
    sut_path.write_text(json.dumps(sut))
    return manifest


@pytest.mark.bwrap
def test_the_launch_profiles_server_is_the_meta_agent(tmp_path):
    manifest = pact_lane(tmp_path)
    run_experiment(manifest)
    bundle = tmp_path / "runs" / "improve-demo"
    (entry,) = ledger(bundle)
    # the profile's commands (from its env) edited the worktree: the demo's promotion
    assert entry["decision"] == "promoted" and entry["failure_class"] is None
    assert entry["meta_agent"]["summary"] == "recipes from the pact lane"
    # three act calls (two commands, submit), 5 + 2 tokens each, as the policy reports
    assert entry["meta_agent"]["usage"] == {"input_tokens": 15, "output_tokens": 6}
    patch = (bundle / "trials" / "001" / "candidate.patch").read_text()
    assert "+RECIPES.append((('Count', 'error', 'lines')" in patch
    trace = [
        json.loads(line)
        for line in (bundle / "trials" / "001" / "optimizer_trace.jsonl").read_text().splitlines()
    ]
    first = next(e for e in trace if e["type"] == "observation")
    assert first["observation"]["stdout"] == "# Improve the target agent\n"
    assert trace[-1]["type"] == "server_log_tail"
    limits = json.loads((bundle / "resolved_manifest.json").read_text())["meta_agent_limits"]
    assert limits["launch_profile"] == "command-lane"


def test_a_lane_started_by_metaeval_refuses_a_launch_profile(tmp_path):
    manifest = pact_lane(tmp_path, lane="scripted")
    sut = manifest.parent / "suts" / "scripted_sut.json"
    with pytest.raises(ConfigError, match="cannot honour a launch profile") as error:
        run_experiment(manifest)
    assert error.value.field == "launch_profile" and error.value.file == str(sut)
    assert not (tmp_path / "runs" / "improve-demo").exists()


def test_the_pact_lane_needs_a_profile_in_the_worktree(tmp_path):
    manifest = pact_lane(tmp_path, cwd="/srv/lane")
    with pytest.raises(ConfigError, match="runs in the optimizer worktree") as error:
        run_experiment(manifest)
    assert error.value.field == "cwd" and error.value.file.endswith("pact_lane.json")
    sut_path = manifest.parent / "suts" / "scripted_sut.json"
    sut = json.loads(sut_path.read_text())
    del sut["launch_profile"]
    sut_path.write_text(json.dumps(sut))
    with pytest.raises(ConfigError, match="none given") as error:
        run_experiment(manifest)
    assert error.value.field == "launch_profile"


@pytest.mark.bwrap
def test_a_lane_that_never_gets_healthy_waits_no_longer_than_the_trial(tmp_path, monkeypatch):
    """A profile allowing an hour to start, a trial of 2 s: the lane fails with the trial's
    bound, its server process is gone and its socket directory removed (issue 43 item 7)."""
    import os
    import tempfile
    import uuid

    from metaeval.agents.types import Limits
    from metaeval.protocols.improve.pact.meta_agent import PactMetaAgent
    from metaeval.protocols.improve.profiles import SystemProfile

    sockets = tmp_path / "tmp"
    sockets.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(sockets))
    marker = f"silent-lane-{uuid.uuid4().hex}"
    worktree = tmp_path / "worktree"
    (worktree / ".aie_bench_recursive").mkdir(parents=True)
    (worktree / ".aie_bench_recursive" / "optimizer_instruction.md").write_text("# Improve\n")
    profile = SystemProfile(
        name="silent",
        command=["{python}", "-c", f"import time; time.sleep(3600)  # {marker}"],
        startup_timeout_s=3600,
    )
    output = PactMetaAgent(profile).propose(
        {"parent": {"id": "baseline"}}, worktree, Limits(time_limit_s=2, max_steps=3)
    )
    assert output.status == "error" and "not healthy" in (output.error or "")
    assert "within 2s" in (output.error or "")
    running = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = (Path("/proc") / pid / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            running.append(pid)
    assert running == []
    assert not list(sockets.glob("pact-*"))
