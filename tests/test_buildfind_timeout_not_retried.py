"""A finder that timed out is not asked again, even when what it said before the kill is
unparsable and the config retries unparsable answers: a retry would spend a second time
limit on the cell (a timed-out Claude Code run's submission is the last thing it said).

A real run over the example pack (reference builder, reference finder wrapped to time out
on its formal cell with prose as its submission)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from metaeval.protocols.buildfind import run as run_module
from metaeval.protocols.buildfind.config import load_config
from metaeval.protocols.buildfind.finalize import run_and_finalize

PACK = Path(__file__).resolve().parents[1] / "examples" / "buildfind-pack"
PROSE = "Let me look at the router module first."


class CutOff:
    """The reference finder, except that its formal runs time out after saying PROSE."""

    def __init__(self, inner):
        self.inner, self.name = inner, "cut"
        self.prompts: list[str] = []

    def run(self, task, workspace, limits):
        self.prompts.append(task.instruction)
        result = self.inner.run(task, workspace, limits)
        if task.metadata["slice"] != "formal":
            return result
        return result.model_copy(
            update={"status": "timeout", "stop_reason": "time_limit", "submission": PROSE}
        )


@pytest.mark.timeout(600)
def test_a_timed_out_finder_is_not_retried_for_its_unparsable_words(tmp_path, monkeypatch):
    config_path = tmp_path / "run.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "pack": str(PACK),
                "tasks": ["http-router"],
                "builders": [{"name": "documented", "agent": "reference:documented"}],
                "finders": [{"name": "cut", "agent": "reference-finder"}],
                "r_build": 1,
                "r_find": 1,
                "controls": [],
                "retry_unparsable": True,
            }
        )
    )
    wrapped: list[CutOff] = []
    real_make_agent = run_module.make_agent

    def make_agent(spec, role):
        agent = real_make_agent(spec, role)
        if spec.name != "cut":
            return agent
        wrapped.append(CutOff(agent))
        return wrapped[-1]

    monkeypatch.setattr(run_module, "make_agent", make_agent)
    run_dir = tmp_path / "run"
    summary = run_and_finalize(load_config(config_path), run_dir)[1]
    prompts = [p for w in wrapped for p in w.prompts]
    assert len(prompts) == 1 and "REMINDER" not in prompts[0]  # one run, no second limit
    [find] = [json.loads(line) for line in (run_dir / "finds.jsonl").read_text().splitlines()]
    assert find["status"] == "timeout" and find["answers_status"] == "unparsable"
    assert "unparsable_first_attempt" not in find
    assert summary["failed_cells"]["by_kind"] == {"timeout": 1}
