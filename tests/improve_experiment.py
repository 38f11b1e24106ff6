"""The scripted improve demo experiment copied into a test's tmp_path, for the tests that run
hostile or unusual meta-agents against it, and a reader of its trial ledger."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from metaeval.protocols.improve.init_target import init_target

ROOT = Path(__file__).resolve().parents[1]


POLICIES = ("recursive", "pareto", "archive")
"""The search policies (issue 41); integrity tests run under each of them."""


def experiment(tmp_path: Path, budget: int = 1, policy: str = "recursive", **sut: Any) -> Path:
    """The scripted demo experiment in tmp_path, with `budget` trials, the search `policy`
    and SUT overrides; returns its manifest (bundle: tmp_path/runs/improve-demo)."""
    configs = tmp_path / "examples" / "improve"
    shutil.copytree(ROOT / "examples" / "improve", configs)
    shutil.copytree(ROOT / "examples" / "improve-suites", tmp_path / "examples" / "improve-suites")
    init_target("toolloop", tmp_path / "runs" / "improve-target")
    manifest = configs / "manifest-scripted.json"
    data = json.loads(manifest.read_text())
    data["trial_budget"] = budget
    if policy != "recursive":
        data["search"] = {"policy": policy}
    manifest.write_text(json.dumps(data))
    if sut:
        sut_path = configs / "suts" / "scripted_sut.json"
        sut_path.write_text(json.dumps({**json.loads(sut_path.read_text()), **sut}))
    return manifest


def ledger(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "trial_ledger.jsonl").read_text().splitlines()]
