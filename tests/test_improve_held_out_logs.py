"""The target's held-out transcripts and test logs are kept in the bundle but never reach a
meta-agent (issue 28, item 6; the paper keeps the held-out view "strictly for validation").

Trial 1 teaches the demo target a recipe for a held-out task that prints a marker and fails;
the marker is then in the bundle's held-out transcript of trial 1's candidate. Trial 2's
meta-agent, whose parent that candidate is, copies everything it was given: the marker, the
held-out task's name and its test log are in none of it, while the failed optimize tasks'
transcripts are.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from improve_experiment import experiment, ledger
from metaeval.protocols.improve.meta_agents import ScriptedMetaAgent
from metaeval.protocols.improve.run import run_experiment
from metaeval.protocols.improve.scripted_steps import improve

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "examples" / "improve-suites" / "terminal"
MARKER = "HELD-OUT-TRANSCRIPT-7f3a"
HELD_TASK = "fix-config-port"


def improve_and_mark(worktree: Path, contract_input: dict[str, Any]) -> str:
    improve(SUITE)(worktree, contract_input)
    playbook = worktree / "target_agent" / "playbook.py"
    recipe = (("Fix", "a", "config", "value"), (f"echo {MARKER}; false",))
    playbook.write_text(playbook.read_text() + f"RECIPES.append({recipe!r})\n")
    return "recipes, and a marker on a held-out task"


@pytest.mark.bwrap
def test_held_out_transcripts_stay_in_the_bundle_and_out_of_the_meta_agents_view(tmp_path):
    seen = tmp_path / "seen"

    def look(worktree: Path, _input: dict) -> str:
        shutil.copytree(worktree / ".aie_bench_recursive", seen)
        prompts = worktree / "target_agent" / "prompts.py"
        prompts.write_text(prompts.read_text() + "\n# looked\n")
        return "look"

    manifest = experiment(tmp_path, budget=2)
    run_experiment(manifest, meta_agent=ScriptedMetaAgent([improve_and_mark, look]))
    bundle = tmp_path / "runs" / "improve-demo"
    first, _ = ledger(bundle)
    assert first["decision"] == "promoted"
    evaluation = json.loads(
        (bundle / "trials" / "001" / "artifacts" / "candidates" / "evaluation.json").read_text()
    )
    (held,) = [t for t in evaluation["held_out"]["tasks"] if t["task_id"] == HELD_TASK]
    # kept in the bundle: the transcript (with the marker) and the test log, sizes recorded
    assert held["status"] == "failed"
    transcript = (bundle / held["trace"]).read_text()
    assert MARKER in transcript and held["trace_bytes"] >= len(transcript.encode())
    test_log = (bundle / held["test_log"]).read_text()
    assert "reward: 0" in test_log and held["test_log_bytes"] == len(test_log.encode())
    # given to trial 2: the optimize failures' transcripts, nothing of the held-out split
    given = json.loads((bundle / "trials" / "002" / "optimizer_input.json").read_text())
    delivered = given["parent_results"]["failed_task_transcripts"]
    assert delivered and {d["task_id"] for d in delivered} <= set(given["suites"]["optimize"])
    texts = [(bundle / "trials" / "002" / "optimizer_input.json").read_text()]
    texts += [p.read_text() for p in seen.rglob("*") if p.is_file()]
    texts += [
        p.read_text() for p in (bundle / "trials" / "002" / "feedback").rglob("*") if p.is_file()
    ]
    assert len(texts) > 3
    for text in texts:
        assert MARKER not in text and HELD_TASK not in text and test_log not in text
