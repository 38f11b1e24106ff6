"""The ground truth BenchGuard prints, shipped as gold files: ScienceAgentBench's 12 confirmed
defects (Appendix E, Table 5) and BixBench Verified-50's 24 atomic issues (Appendix H, Table 8),
checked against the counts the paper states; and the models file's refusals."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from metaeval.errors import ConfigError
from metaeval.protocols.audit.call_options import ModelCallOptions
from metaeval.protocols.audit.gold import load_gold, parse_gold
from metaeval.protocols.audit.models_file import load_models_file, resolve_models
from openai_stub import OpenAIStub  # noqa: E402

PAPER = Path(__file__).resolve().parents[1] / "examples" / "paper"


def test_sab_gold_is_table_5() -> None:
    gold = load_gold(PAPER / "sab-benchguard" / "gold.json")
    numbers = [9, 12, 21, 26, 29, 31, 32, 34, 35, 67, 78, 92]  # Table 5's task column
    assert gold.defective_tasks == [f"sab_{n}" for n in numbers]
    assert gold.n_issues == 12
    top = Counter(issue.top_category for issue in gold.all_issues())
    assert top == {"INST": 7, "GT": 4, "EVAL": 1}  # Table 5's category column
    assert "Table 5" in gold.provenance


def test_bixbench_gold_is_table_8() -> None:
    gold = load_gold(PAPER / "bixbench-verified50" / "gold.json")
    assert gold.n_issues == 24 and len(gold.defective_tasks) == 17  # 17 revised questions
    per_task = Counter(len(issues) for issues in gold.tasks.values())
    assert per_task == {1: 12, 2: 3, 3: 2}  # Appendix H: 12 single, 3 double, 2 triple
    assert {t for t, issues in gold.tasks.items() if len(issues) == 3} == {
        "bix-31-q2",
        "bix-54-q7",
    }
    assert Counter(i.category for i in gold.all_issues()) == {
        "INST-INCOMPLETE": 21,
        "GT-LOGIC": 3,
    }  # Table 7
    assert "Table 8" in gold.provenance


def test_gold_provenance_must_be_text() -> None:
    with pytest.raises(ConfigError) as err:
        parse_gold('{"provenance": 3, "tasks": {}}', file="g.json")
    assert err.value.field == "provenance" and "g.json" in str(err.value)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_models_file_settings_fill_from_the_run(tmp_path: Path) -> None:
    parsed = load_models_file(
        write(
            tmp_path / "m.yaml",
            "models:\n  - model: openai/a\n    temperature: 1.0\n    max_findings: 30\n"
            "  - model: openai/b\n    key_env: B_KEY\n",
        )
    )
    resolved = resolve_models(parsed, ModelCallOptions(temperature=0.2), 4096)
    a, b = resolved["openai/a"], resolved["openai/b"]
    assert (a.call.temperature, a.call.answer.max_findings, a.max_tokens) == (1.0, 30, 4096)
    assert (b.call.temperature, b.call.answer.max_findings) == (0.2, 8)
    assert b.recorded()["key_env"] == "B_KEY" and "api_key" not in b.recorded()
    with pytest.raises(ConfigError) as err:  # the variable is read when the model is made
        b.model_options("openai/b")
    assert "B_KEY" in str(err.value)


def test_an_unset_key_variable_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    models = write(tmp_path / "m.yaml", "models:\n  - model: openai/a\n    key_env: NO_SUCH_KEY\n")
    argv = ["audit", "run", str(PAPER.parent / "audit-bench"), "--models", str(models)]
    argv += ["-o", str(tmp_path / "run"), "--no-execution"]
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert str(models) in done.stderr and "models.0.key_env" in done.stderr
    assert "NO_SUCH_KEY" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("models:\n  - model: openai/a\n    temperature: 3\n", "models.0.temperature"),
        ("models:\n  - model: nomodel\n", "models.0.model"),
        ("models:\n  - model: openai/a\n    options: {api_key: sk-1}\n", "models.0.options"),
        ("models:\n  - model: openai/a\n  - model: openai/a\n", "models.1.model"),
        ("models: []\n", "models"),
    ],
)
def test_bad_models_file_names_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = write(tmp_path / "m.yaml", text)
    with pytest.raises(ConfigError) as err:
        load_models_file(path)
    assert err.value.field == field and str(path) in str(err.value)


def test_changing_a_models_settings_on_resume_is_refused(tmp_path: Path) -> None:
    """A model's recorded settings hold for the run; adding another model is accepted."""
    bench = PAPER.parent / "audit-bench"
    run = tmp_path / "run"

    def audit(models: str) -> subprocess.CompletedProcess:
        path = write(tmp_path / "m.yaml", models)
        argv = ["audit", "run", str(bench), "--models", str(path), "-o", str(run)]
        argv += ["--no-execution", "--task", "row-count"]
        return subprocess.run(
            [sys.executable, "-m", "metaeval.cli", *argv],
            capture_output=True,
            text=True,
            timeout=600,
        )

    with OpenAIStub(lambda messages: "[]") as server:
        url = f"    base_url: {server.base_url}\n"
        one = "models:\n  - model: openai/a\n    temperature: 0.5\n" + url
        first = audit(one)
        assert first.returncode == 0, first.stdout + first.stderr
        changed = audit(one.replace("0.5", "0.7"))
        assert changed.returncode == 2, changed.stdout + changed.stderr
        assert "openai/a" in changed.stderr and "temperature" in changed.stderr
        added = audit(one + "  - model: openai/b\n    temperature: 1.0\n" + url)
        assert added.returncode == 0, added.stdout + added.stderr
        temperatures = sorted(r["temperature"] for r in server.chat_requests())
    assert temperatures == [0.5, 1.0]  # the refused resume made no call
    # the addition is recorded: the session that added the model, and its cell
    sessions = [json.loads(line) for line in (run / "sessions.jsonl").read_text().splitlines()]
    assert sessions[-1]["config"]["model_settings"]["openai/b"]["temperature"] == 1.0
    cells = [json.loads(line) for line in (run / "audits.jsonl").read_text().splitlines()]
    assert [c["call"]["temperature"] for c in cells if c["source"] == "openai/b"] == [1.0]


def test_plan_says_what_each_model_will_cost_before_any_call(tmp_path: Path) -> None:
    bench = PAPER.parent / "audit-bench"
    models = write(
        tmp_path / "m.yaml",
        "models:\n  - model: openai/priced\n    key_env: PLAN_TEST_KEY\n    max_tokens: 1000\n"
        "    price: {input: 2.0, output: 10.0}\n  - model: openai/free\n    temperature: 1.0\n",
    )
    argv = ["audit", "plan", str(bench), "--models", str(models), "--task", "row-count"]
    env = {k: v for k, v in os.environ.items() if k != "PLAN_TEST_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    priced, free = (line for line in done.stdout.splitlines() if line.startswith("- "))
    assert "1 call(s)" in priced and "max_tokens 1000" in priced
    assert "key PLAN_TEST_KEY NOT SET" in priced
    prompt = int(re.search(r"prompts ~(\d+) tokens", priced).group(1))  # type: ignore[union-attr]
    assert prompt > 0
    expected = prompt * 2.0 / 1e6 + 1000 * 10.0 / 1e6
    assert f"at most ${expected:.2f}" in priced
    assert "temperature 1" in free and "no price" in free
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("experiment", ["sab-benchguard", "bixbench-verified50"])
def test_paper_models_files_are_the_papers_settings(experiment: str) -> None:
    parsed = load_models_file(PAPER / experiment / "models.yaml")
    resolved = resolve_models(parsed, ModelCallOptions(), 4096)
    assert len(resolved) == 5  # Section 4: five backends
    for name, own in resolved.items():
        assert own.max_tokens == 4096
        assert own.call.temperature == (1.0 if "gemini" in name else 0.0)
        assert own.key_env  # keys by variable name only
