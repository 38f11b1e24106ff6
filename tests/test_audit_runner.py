"""The audit end to end: example benchmark, resume, ensembles, failures, SIGKILL, bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.render import _open_existing
from metaeval.protocols.audit.run import AuditRun
from metaeval.protocols.audit.settings import AuditSettings
from metaeval.protocols.audit.summary import valid_findings

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
GOLD = json.loads((BENCH / "gold.json").read_text())["tasks"]
LLM_ONLY = {"grade-mean", "rainfall-average"}  # defects no static or execution check can see
CLEAN = {"word-count", "order-total", "invert-mapping", "error-summary"}


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.bwrap
def test_static_and_execution_checks_find_every_seeded_defect_and_resume(tmp_path):
    run_dir = tmp_path / "audit"
    first = cli("audit", "run", str(BENCH), "--static-only", "-o", str(run_dir))
    assert first.returncode == 0, first.stderr
    cells = records(run_dir / "audits.jsonl")
    assert len(cells) == 14 and {c["source"] for c in cells} == {"static"}
    run = _open_existing(run_dir)
    try:
        findings = [f for f in valid_findings(run) if f.reported]
    finally:
        run.close()
    by_task: dict[str, set[str]] = {}
    for finding in findings:
        by_task.setdefault(finding.task_id, set()).add(finding.subcategory)
        assert finding.evidence_verified is True, (finding.title, finding.evidence_problems)
    for task_id, entry in GOLD.items():
        for issue in entry["issues"]:
            if task_id not in LLM_ONLY:
                assert issue["category"] in by_task.get(task_id, set()), task_id
    assert not CLEAN & set(by_task)
    html = (run_dir / "report.html").read_text()
    assert "sales-revenue" in html and "INST-CONTRADICT" in html

    before = (run_dir / "audits.jsonl").read_bytes()
    second = cli("audit", "run", str(BENCH), "--static-only", "-o", str(run_dir))
    assert second.returncode == 0, second.stderr
    assert "resumed: 14 completed cell(s) reused" in second.stdout
    assert (run_dir / "audits.jsonl").read_bytes() == before


def finding_json(title: str, confidence: float = 0.8) -> dict:
    return {
        "category": "INST",
        "subcategory": "INST-CONTRADICT",
        "severity": "High",
        "finding_type": "Bug",
        "title": title,
        "description": "The instruction names sales.csv but the data file is sales_2023.csv.",
        "evidence": [
            {
                "file": "instruction.md",
                "line_start": 3,
                "line_end": 3,
                "snippet": "`/app/sales.csv` lists the sales of one year",
            }
        ],
        "recommendation": "Name sales_2023.csv in the instruction.",
        "confidence": confidence,
    }


def test_ensemble_merges_agreeing_models_and_records_audit_failures(tmp_path):
    models = {
        "scripted/a": ScriptedModel(
            [json.dumps([finding_json("wrong file name")])], name="scripted/a"
        ),
        "scripted/b": ScriptedModel(
            [json.dumps([finding_json("sales.csv missing", 0.6)])], name="scripted/b"
        ),
        "scripted/c": ScriptedModel(["not json", "still not json"], name="scripted/c"),
    }
    settings = AuditSettings(
        bench_dir=BENCH,
        run_dir=tmp_path / "audit",
        models=list(models),
        task_filter=["sales-revenue"],
        execution_checks=False,
        progress=False,
    )
    summary = AuditRun(settings, models=models).run()
    assert summary["ensemble"] == {"any": 1, ">=2": 1, ">=3": 0}
    assert summary["audit_failures"] == ["sales-revenue|scripted/c"]
    assert summary["findings_by_source"] == {"scripted/a": 1, "scripted/b": 1, "static": 1}
    cells = {c["source"]: c for c in records(tmp_path / "audit" / "audits.jsonl")}
    assert cells["scripted/c"]["audit_failure"] is True and cells["scripted/c"]["attempts"] == 2
    assert cells["scripted/a"]["audit_failure"] is False
    report = (tmp_path / "audit" / "report.html").read_text()
    assert "scripted/a" in report and "scripted/b" in report

    # A final audit failure is not retried: the resumed run makes no model call at all.
    again = AuditRun(settings, models=models).run()
    assert again["ran"] == 0 and models["scripted/c"].remaining == 0


def test_findings_of_a_killed_attempt_are_ignored(tmp_path):
    settings = AuditSettings(
        bench_dir=BENCH,
        run_dir=tmp_path / "audit",
        static_only=True,
        task_filter=["row-count"],
        execution_checks=False,
        progress=False,
    )
    summary = AuditRun(settings).run()
    orphan = records(tmp_path / "audit" / "findings.jsonl")[0] | {"attempt": "killed-attempt"}
    with open(tmp_path / "audit" / "findings.jsonl", "a") as handle:
        handle.write(json.dumps(orphan) + "\n")
    again = AuditRun(settings).run()
    assert again["findings_total"] == summary["findings_total"]


@pytest.mark.local_model
def test_sigkill_mid_audit_loses_and_duplicates_nothing(tmp_path):
    run_dir = tmp_path / "audit"
    cells_file = run_dir / "audits.jsonl"
    tasks = ["--task", "word-count", "--task", "row-count", "--task", "order-total"]
    argv = [sys.executable, "-m", "metaeval.cli", "audit", "run", str(BENCH), "-o", str(run_dir)]
    argv += [*tasks, "--max-tokens", "256", "--no-execution"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if cells_file.exists() and b"local/smollm2" in cells_file.read_bytes():
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = cells_file.read_bytes()
    kept = kept[: kept.rfind(b"\n") + 1]
    done = {(c["task_id"], c["source"]) for c in map(json.loads, kept.splitlines())}
    assert 1 <= sum(1 for _, s in done if s == "local/smollm2") < 3

    rerun = cli(
        "audit",
        "run",
        str(BENCH),
        "-o",
        str(run_dir),
        *tasks,
        "--max-tokens",
        "256",
        "--no-execution",
    )
    assert rerun.returncode == 0, rerun.stderr
    after = cells_file.read_bytes()
    assert after.startswith(kept)
    keys = [(c["task_id"], c["source"]) for c in records(cells_file)]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 6  # 3 tasks x (static + model)


def test_bad_input_exits_2_with_a_clear_message(tmp_path):
    missing = cli(
        "audit", "run", str(tmp_path / "nope"), "--static-only", "-o", str(tmp_path / "r1")
    )
    assert missing.returncode == 2 and "benchmark directory not found" in missing.stderr
    unknown = cli("audit", "run", str(BENCH), "-m", "nosuch/model", "-o", str(tmp_path / "r2"))
    assert unknown.returncode == 2 and "nosuch" in unknown.stderr
    assert not (tmp_path / "r2").exists()
    tier = cli(
        "audit",
        "run",
        str(BENCH),
        "--tier",
        "execution",
        "--static-only",
        "-o",
        str(tmp_path / "r3"),
    )
    assert tier.returncode == 2 and "--agent-results" in tier.stderr

    ok = cli(
        "audit",
        "run",
        str(BENCH),
        "--static-only",
        "--no-execution",
        "--task",
        "row-count",
        "-o",
        str(tmp_path / "r4"),
    )
    assert ok.returncode == 0, ok.stderr
    bad_gold = tmp_path / "gold.json"
    bad_gold.write_text(
        '{"tasks": {"row-count": {"issues": [{"id": "x", "description": "d", "category": "INST-FOO"}]}}}'
    )
    scored = cli("audit", "score", str(tmp_path / "r4"), "--gold", str(bad_gold))
    assert scored.returncode == 2
    assert "row-count" in scored.stderr and "INST-FOO" in scored.stderr
    assert "Traceback" not in scored.stderr


def test_broken_task_toml_is_a_finding_and_the_audit_goes_on(tmp_path):
    bench = tmp_path / "bench"
    shutil.copytree(BENCH / "word-count", bench / "word-count")
    shutil.copytree(BENCH / "order-total", bench / "order-total")
    (bench / "order-total" / "task.toml").write_text("[verifier\ntimeout_sec = 10\n")
    (bench / "not-a-task").mkdir()
    settings = AuditSettings(
        bench_dir=bench,
        run_dir=tmp_path / "audit",
        static_only=True,
        execution_checks=False,
        progress=False,
    )
    run = AuditRun(settings)
    assert ("not-a-task", "no task.toml") in [(Path(p).name, r) for p, r in run.skipped]
    summary = run.run()
    assert summary["tasks"] == 2
    assert summary["findings_by_subcategory"].get("ENV-RESOURCE") == 1


def test_execution_tier_puts_agent_results_in_the_prompt(tmp_path):
    results = tmp_path / "agent_results" / "grade-mean"
    results.mkdir(parents=True)
    (results / "program.py").write_text(
        "import json\njson.dump({'mean': 71.5}, open('/app/result.json', 'w'))\n"
    )
    (results / "eval_result.txt").write_text("reward: 0\n")
    seen = []

    def respond(request):
        seen.append(request)
        return "[]"

    model = ScriptedModel(respond, name="scripted/exec")
    settings = AuditSettings(
        bench_dir=BENCH,
        run_dir=tmp_path / "audit",
        models=["scripted/exec"],
        tier="execution",
        agent_results=tmp_path / "agent_results",
        task_filter=["grade-mean"],
        execution_checks=False,
        progress=False,
    )
    summary = AuditRun(settings, models={"scripted/exec": model}).run()
    assert summary["audit_failures"] == []
    prompt = "\n".join(m.content for m in seen[0].messages)
    assert "json.dump({'mean': 71.5}" in prompt and "reward: 0" in prompt
    cells = {c["source"]: c for c in records(tmp_path / "audit" / "audits.jsonl")}
    assert cells["scripted/exec"]["protocol"] == "execution"


def test_model_tasks_limits_the_models_and_keeps_checks_on_every_task(tmp_path):
    """The demo's fast path: the model audits two tasks, static checks run on all of them."""
    model = ScriptedModel(lambda request: "[]", name="scripted/few")
    settings = AuditSettings(
        bench_dir=BENCH,
        run_dir=tmp_path / "audit",
        models=["scripted/few"],
        task_filter=["sales-revenue", "word-count", "grade-mean"],
        model_tasks=["word-count", "grade-mean"],
        execution_checks=False,
        progress=False,
    )
    summary = AuditRun(settings, models={"scripted/few": model}).run()
    cells = {(c["task_id"], c["source"]) for c in records(tmp_path / "audit" / "audits.jsonl")}
    assert cells == {
        ("sales-revenue", "static"),
        ("word-count", "static"),
        ("grade-mean", "static"),
        ("word-count", "scripted/few"),
        ("grade-mean", "scripted/few"),
    }
    assert summary["ran"] == 5 and len(model.requests) == 2
    manifest = json.loads((tmp_path / "audit" / "manifest.json").read_text())
    assert manifest["config"]["model_tasks"] == ["word-count", "grade-mean"]
    bad = AuditSettings(
        bench_dir=BENCH, run_dir=tmp_path / "b", models=["scripted/few"], model_tasks=["nope"]
    )
    with pytest.raises(Exception, match="no such task"):
        AuditRun(bad, models={"scripted/few": model})


def test_benchmark_hash_covers_names_and_bytes_in_path_order(tmp_path):
    """The run identity: sha256 over (path relative to the benchmark, NUL, bytes, NUL) of
    every file, in pathlib order (part by part: `a/b` before `a-b`), with a link leading
    outside counted by its link text. Recomputed here from that definition."""
    import hashlib
    import os

    from metaeval.tasks.bench_hash import benchmark_hash

    bench = tmp_path / "bench"
    task = bench / "t1"
    files = {"a/b": b"one", "a-b": b"two", "a.b": b"three", "tests/test.sh": b"exit 0\n"}
    for rel, data in files.items():
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_bytes(data)
    (tmp_path / "secret.txt").write_text("host file")
    os.symlink(tmp_path / "secret.txt", task / "leak")
    expected = hashlib.sha256()
    for path in sorted([task / rel for rel in files] + [task / "leak"]):
        expected.update(str(path.relative_to(bench)).encode() + b"\0")
        if path.name == "leak":
            expected.update(b"symlink:" + os.fsencode(os.readlink(path)) + b"\0")
        else:
            expected.update(files[str(path.relative_to(task))] + b"\0")
    assert benchmark_hash(bench, [task]) == "sha256:" + expected.hexdigest()
    (task / "a-b").write_bytes(b"changed")
    assert benchmark_hash(bench, [task]) != "sha256:" + expected.hexdigest()
