"""A model name the provider does not know (HTTP 404 model_not_found) is a setup error: the
hint says to fix the model name, not to start an endpoint, and a later run into the same
directory without that model is not held back by its failed cells. Real runs against a real
OpenAI-compatible server on 127.0.0.1 that knows one model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from openai_stub import OpenAIStub

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"


def audit(run_dir: Path, model: str, base_url: str) -> subprocess.CompletedProcess:
    argv = [
        sys.executable, "-m", "metaeval.cli", "audit", "run", str(BENCH), "-o", str(run_dir),
        "--task", "row-count", "--no-execution", "-m", model, "--model-base-url", base_url,
        "-M", 'retry={"max_attempts": 1, "base_delay_s": 0}',
    ]  # fmt: skip
    env = {**os.environ, "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


def test_a_mistyped_model_is_named_and_does_not_block_the_next_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with OpenAIStub(lambda messages: "[]", model="good", known_only=True) as stub:
        typo = audit(run, "openai/goood", stub.base_url)
        assert typo.returncode == 3, typo.stderr
        out = typo.stdout + typo.stderr
        assert "fix it, e.g. the --model name" in out
        assert "start the model endpoint" not in out
        fixed = audit(run, "openai/good", stub.base_url)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "failed cell(s) of openai/goood, which this run does not audit" in fixed.stdout
    # the record of the mistyped model's cell is kept as it was, not rewritten
    cells = [json.loads(x) for x in (run / "audits.jsonl").read_text().splitlines()]
    assert [c["infra_error"] for c in cells if c["source"] == "openai/goood"] == [True]
    assert [c["status"] for c in cells if c["source"] == "openai/good"] == ["ok"]
    # the report's header names both models: the errors it lists name the mistyped one
    report = (run / "report.md").read_text()
    header = next(line for line in report.splitlines() if "openai/good" in line)
    assert "openai/goood" in header
