"""The demo end to end with the real local model: resume, SIGKILL, bad input, evidence layers.

These run `metaeval` as a separate process, as a user would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metaeval.demo.run import load_questions
from metaeval.errors import ConfigError

pytestmark = pytest.mark.local_model
QUESTION_IDS = {"retries", "storage", "ordering"}
SECRET = "zq-very-secret-value-4242"


def metaeval(
    *args: str, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def answers(run_dir: Path) -> list[dict]:
    return [
        json.loads(line) for line in (run_dir / "qa" / "answers.jsonl").read_text().splitlines()
    ]


def test_demo_writes_a_run_and_the_second_run_redoes_nothing(tmp_path):
    run_dir = tmp_path / "demo"
    first = metaeval(
        "demo", "--part", "qa", "--run-dir", str(run_dir), env={"DEMO_API_KEY": SECRET}
    )
    assert first.returncode == 0, first.stderr
    rows = answers(run_dir)
    assert {r["question_id"] for r in rows} == QUESTION_IDS and len(rows) == 3
    for row in rows:
        assert row["status"] in {"ok", "timeout", "error"} and row["infra_error"] is False
        assert row["answer"] in {"A", "B", "C", "D", None}
        assert row["correct"] == (row["answer"] == row["gold"])
        assert row["usage"]["input_tokens"] > 0 and row["usage"]["output_tokens"] > 0
        assert row["layer"] == "base" and row["created_at"]
        assert (
            run_dir / "qa" / "blobs" / row["transcript_blob"][7:9] / row["transcript_blob"][7:]
        ).exists()
    manifest = json.loads((run_dir / "qa" / "manifest.json").read_text())
    assert manifest["protocol"] == "demo"
    assert set(manifest["hashes"]) >= {"prompt:toolloop_system", "question_bank", "price_table"}
    summary = json.loads((run_dir / "qa" / "summary.json").read_text())
    assert summary["correct"] == sum(r["correct"] for r in rows)
    report = (run_dir / "qa" / "report.md").read_text()
    assert "| retries |" in report and f"{summary['correct']} correct" in report

    before = (run_dir / "qa" / "answers.jsonl").read_bytes()
    manifest_before = (run_dir / "qa" / "manifest.json").read_bytes()
    second = metaeval("demo", "--part", "qa", "--run-dir", str(run_dir))
    assert second.returncode == 0, second.stderr
    assert "resumed: 3 answered question(s) reused" in second.stdout
    assert (run_dir / "qa" / "answers.jsonl").read_bytes() == before
    assert (run_dir / "qa" / "manifest.json").read_bytes() == manifest_before
    assert json.loads((run_dir / "qa" / "summary.json").read_text())["ran"] == []

    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_sigkill_mid_run_loses_nothing_and_duplicates_nothing(tmp_path):
    run_dir = tmp_path / "demo"
    records = run_dir / "qa" / "answers.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaeval.cli", "demo", "--part", "qa", "--run-dir", str(run_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if records.exists() and records.read_bytes().count(b"\n") >= 1:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    survived = records.read_bytes()
    complete_lines = survived[: survived.rfind(b"\n") + 1]
    done_before = {json.loads(line)["question_id"] for line in complete_lines.splitlines()}
    assert 1 <= len(done_before) < 3, "the kill should land mid-run"

    rerun = metaeval("demo", "--part", "qa", "--run-dir", str(run_dir))
    assert rerun.returncode == 0, rerun.stderr
    after = records.read_bytes()
    assert after.startswith(complete_lines)  # nothing written before the kill was rewritten
    rows = [json.loads(line) for line in after.splitlines() if line.strip()]
    ids = [r["question_id"] for r in rows]
    assert sorted(ids) == sorted(QUESTION_IDS)  # every cell once: none lost, none duplicated
    summary = json.loads((run_dir / "qa" / "summary.json").read_text())
    assert set(summary["skipped_completed"]) == done_before
    assert set(summary["ran"]) == QUESTION_IDS - done_before


def test_bad_model_names_exit_2_and_leave_no_run_directory(tmp_path):
    run_dir = tmp_path / "never"
    unknown = metaeval("demo", "--part", "qa", "--run-dir", str(run_dir), "--model", "nosuch/model")
    assert unknown.returncode == 2
    assert "nosuch" in unknown.stderr and "Traceback" not in unknown.stderr
    missing = metaeval(
        "demo", "--part", "qa", "--run-dir", str(run_dir), "--model", "local/./missing.gguf"
    )
    assert missing.returncode == 2
    assert "missing.gguf" in missing.stderr
    assert not run_dir.exists()


def test_malformed_question_bank_names_file_and_field(tmp_path):
    bank = tmp_path / "bank.yaml"
    bank.write_text(
        "questions:\n"
        "  - id: q1\n    question: Which?\n    options: {A: a, B: b, C: c, D: d}\n    gold: E\n"
    )
    run_dir = tmp_path / "never"
    result = metaeval("demo", "--part", "qa", "--run-dir", str(run_dir), "--questions", str(bank))
    assert result.returncode == 2
    assert str(bank) in result.stderr and "questions.0.gold" in result.stderr
    assert not run_dir.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("questions: 3\n", "questions"),
        (
            "questions:\n  - id: q1\n    question: x\n    options: {A: a, B: b, C: c, D: d}\n",
            "questions.0.gold",
        ),
        (
            "questions:\n  - id: q1\n    question: x\n    options: {A: a, B: b}\n    gold: A\n",
            "questions.0.options",
        ),
        (
            "questions:\n"
            "  - {id: q1, question: x, options: {A: a, B: b, C: c, D: d}, gold: A}\n"
            "  - {id: q1, question: y, options: {A: a, B: b, C: c, D: d}, gold: B}\n",
            "questions.1.id",
        ),
    ],
)
def test_question_bank_errors(tmp_path, body, field):
    bank = tmp_path / "bank.yaml"
    bank.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_questions(bank)
    assert info.value.file == str(bank) and info.value.field == field


def test_changed_prompt_hash_aborts_unless_a_new_layer_is_named(tmp_path):
    run_dir = tmp_path / "demo"
    assert metaeval("demo", "--part", "qa", "--run-dir", str(run_dir)).returncode == 0
    # Simulate an edited system prompt: the recorded hash no longer matches the code.
    manifest_path = run_dir / "qa" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for hashes in (manifest["hashes"], *(layer["hashes"] for layer in manifest["layers"])):
        hashes["prompt:toolloop_system"] = "sha256:" + "0" * 64
    manifest_path.chmod(0o644)
    manifest_path.write_text(json.dumps(manifest))
    before = (run_dir / "qa" / "answers.jsonl").read_bytes()

    refused = metaeval("demo", "--part", "qa", "--run-dir", str(run_dir))
    assert refused.returncode == 2
    assert "toolloop_system" in refused.stderr and "--new-layer" in refused.stderr
    assert (run_dir / "qa" / "answers.jsonl").read_bytes() == before

    layered = metaeval("demo", "--part", "qa", "--run-dir", str(run_dir), "--new-layer", "v2")
    assert layered.returncode == 0, layered.stderr
    rows = answers(run_dir)
    assert [r["layer"] for r in rows].count("v2") == 3  # the new layer answers every cell anew
    assert (run_dir / "qa" / "answers.jsonl").read_bytes().startswith(before)


def test_ctrl_c_stops_cleanly_with_records_intact(tmp_path):
    run_dir = tmp_path / "demo"
    records = run_dir / "qa" / "answers.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaeval.cli", "demo", "--part", "qa", "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if records.exists() and records.read_bytes().count(b"\n") >= 1:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    data = records.read_bytes()
    assert data.endswith(b"\n")  # no torn record
    kept = [json.loads(line) for line in data.splitlines()]
    assert 1 <= len(kept) < 3

    rerun = metaeval("demo", "--part", "qa", "--run-dir", str(run_dir))
    assert rerun.returncode == 0, rerun.stderr
    ids = [r["question_id"] for r in answers(run_dir)]
    assert sorted(ids) == sorted(QUESTION_IDS)


def test_a_key_given_twice_in_the_question_bank_is_refused(tmp_path):
    bank = tmp_path / "bank.yaml"
    bank.write_text(
        "questions:\n"
        "  - id: q1\n    question: Which?\n    options: {A: a, B: b, C: c, D: d}\n"
        "    gold: A\n    gold: B\n"
    )
    with pytest.raises(ConfigError) as info:
        load_questions(bank)
    assert info.value.file == str(bank)
    assert "line 6, column 5: found duplicate key 'gold'" in str(info.value)
    run_dir = tmp_path / "never"
    result = metaeval("demo", "--part", "qa", "--run-dir", str(run_dir), "--questions", str(bank))
    assert result.returncode == 2
    assert str(bank) in " ".join(result.stderr.split()) and "duplicate key 'gold'" in result.stderr
    assert not run_dir.exists()
