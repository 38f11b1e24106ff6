"""The improve protocol end to end: scripted budget-5 run, bundle, resume after SIGKILL, CLI."""

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

from metaeval.protocols.improve.init_target import init_target

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "improve"
TOP_FILES = {
    "source_manifest.json",
    "resolved_manifest.json",
    "sut_contract.json",
    "sum_boundary.json",
    "report.md",
    "trial_ledger.jsonl",
    "lineage_summary.json",
    "promotion_history.json",
    "final_feedback_packet.json",
    "execution_trace.txt",
}
TRIAL_FILES = {
    "optimizer_input.json",
    "optimizer_instruction.md",
    "optimizer_output.json",
    "optimizer_trace.jsonl",
    "candidate.patch",
    "feedback_packet.json",
    "selection_decision.json",
    "trial_result.json",
    "artifacts",
}


def experiment(tmp_path: Path, manifest: str = "manifest-scripted.json") -> Path:
    """A copy of the example configs whose baseline repo and output live in tmp_path."""
    configs = tmp_path / "examples" / "improve"
    shutil.copytree(EXAMPLES, configs)
    shutil.copytree(ROOT / "examples" / "improve-suites", tmp_path / "examples" / "improve-suites")
    init_target("toolloop", tmp_path / "runs" / "improve-target")
    return configs / manifest


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ledger(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "trial_ledger.jsonl").read_text().splitlines()]


def assert_report_explains_trials(bundle: Path, html: str) -> None:
    """The report shows per trial its diff (collapsed), the gate decision and reason, scores
    per suite with the baseline, the failure class with its evidence; no raw JSON dump."""
    import re

    from metaeval.report.html import shared_css

    assert str(shared_css()) in html  # the style shared by all three reports
    assert "<pre>{" not in html and '"best_optimize"' not in html
    sections = dict(
        re.findall(r'<section class="card trial" id="(trial-\d+)">(.*?)</section>', html, re.S)
    )
    assert sorted(sections) == [f"trial-{n:03d}" for n in range(1, 6)]
    promoted = sections["trial-001"]
    assert "Decision: promoted: optimize 0.200 is above the parent&#39;s 0.000" in promoted
    assert "held-out gate &#39;must not regress&#39; passed" in promoted
    # suite table: suite, baseline, parent, candidate
    assert re.search(
        r"<td>optimize</td><td class=\"num\">0.000</td><td class=\"num\">0.000</td><td class=\"num\">0.200</td>",
        promoted,
    )
    patch = (bundle / "trials" / "001" / "candidate.patch").read_text()
    first_added = next(
        line for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")
    )
    assert "<details>\n<summary>Diff: target_agent/" in promoted
    import html as html_lib

    assert html_lib.escape(first_added) in promoted
    rejected = sections["trial-002"]
    assert "Decision: rejected: optimize 0.000 is not above the parent&#39;s 0.200" in rejected
    invalid = sections["trial-003"]
    assert "<code>meta_agent_failure</code>" in invalid
    assert "outside_boundary (README.md): modified file is outside the mutation boundary" in invalid
    assert "allowed: " in invalid and "[&#39;" not in invalid
    broken = sections["trial-004"]
    assert "<code>target_agent_failure</code>" in broken and "evaluation launch_failed:" in broken
    markdown = (bundle / "report.md").read_text()
    assert "Decision: rejected: optimize 0.000 is not above the parent's 0.200" in markdown
    assert "{'id'" not in markdown and "{'id'" not in html


@pytest.mark.bwrap
@pytest.mark.parametrize("policy", ["recursive", "pareto", "archive"])
def test_scripted_budget_5_run_classifies_every_trial(tmp_path, policy):
    manifest = experiment(tmp_path)
    if policy != "recursive":  # the same classification under every search policy
        data = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**data, "search": {"policy": policy}}))
    result = cli("improve", "run", str(manifest))
    assert result.returncode == 0, result.stderr
    bundle = tmp_path / "runs" / "improve-demo"
    assert {p.name for p in bundle.iterdir()} >= TOP_FILES
    entries = ledger(bundle)
    assert [e["trial"] for e in entries] == [1, 2, 3, 4, 5]
    outcome = [(e["decision"], e["failure_class"]) for e in entries]
    assert outcome == [
        ("promoted", None),  # recipes for two optimize tasks: 0.0 -> 0.2
        ("rejected", None),  # recipe matching disabled: below its parent
        ("invalid", "meta_agent_failure"),  # README.md is outside the boundary
        ("invalid", "target_agent_failure"),  # syntax error: the candidate cannot launch
        ("rejected", None),  # prompt reworded: no strict gain over its parent
    ]
    assert entries[0]["optimize_score"] == pytest.approx(2 / 10)
    parents = [e["parent_id"] for e in entries]
    if policy == "archive":  # a seeded draw among every valid node before the trial
        for entry in entries:
            earlier = [e for e in entries if e["trial"] < entry["trial"]]
            valid = {"baseline"} | {e["candidate_id"] for e in earlier if not e["failure_class"]}
            assert entry["parent_id"] in valid
    else:  # pareto: trial-001 is the whole front after trial 1
        assert parents == ["baseline", *["trial-001"] * 4]
    for n in range(1, 6):
        assert {p.name for p in (bundle / "trials" / f"{n:03d}").iterdir()} >= TRIAL_FILES
    violation = json.loads((bundle / "trials" / "003" / "selection_decision.json").read_text())
    assert {r["code"] for r in violation["reasons"]} == {"outside_boundary"}
    assert any(r["path"] == "README.md" for r in violation["reasons"])
    regress = json.loads((bundle / "trials" / "002" / "selection_decision.json").read_text())
    assert regress["gate"]["optimize"] == {
        "parent": pytest.approx(0.2),
        "candidate": 0.0,
        "strictly_better": False,
    }
    summary = json.loads((bundle / "lineage_summary.json").read_text())["summary"]
    assert summary["promotions"] == 1 and summary["valid_candidates"] == 3
    assert summary["invalid_or_broken_trials"] == 2 and summary["trials_consumed"] == 5
    assert summary["best_optimize"] == {"id": "trial-001", "score": pytest.approx(0.2)}
    assert summary["final"]["id"] == "trial-001"
    assert summary["final"]["gain_optimize"] == pytest.approx(0.2)
    assert summary["best_so_far"] == [pytest.approx(0.2)] * 5
    history = json.loads((bundle / "promotion_history.json").read_text())
    assert [h["to"] for h in history] == ["trial-001"]
    html = (bundle / "report.html").read_text()
    assert html.count("<svg") == 2 and "target_agent_failure" in html
    assert_report_explains_trials(bundle, html)
    # The CLI says it in words, no Python reprs.
    assert "final trial-001: optimize 0.200 (+20.0 pp)" in result.stdout
    assert "{" not in result.stdout and "[" not in result.stdout
    # The trial loop shows progress: one line per trial when the output is not a terminal.
    for n in range(1, 6):
        assert f"improve trials {n}/5: trial {n:03d}" in result.stderr
    # Worktrees are removed after each trial; promoted and evaluated candidates stay reachable.
    assert not list(bundle.glob("trials/*/optimizer-worktree"))
    refs = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)"],
        cwd=tmp_path / "runs" / "improve-target",
        capture_output=True,
        text=True,
    ).stdout
    assert "refs/metaeval/improve-demo/trial-001" in refs

    rerun = cli("improve", "run", str(manifest))
    assert rerun.returncode == 0, rerun.stderr
    assert ledger(bundle) == entries  # nothing repeated


@pytest.mark.bwrap
def test_killed_run_resumes_without_repeating_or_losing_a_trial(tmp_path):
    manifest = experiment(tmp_path)
    bundle = tmp_path / "runs" / "improve-demo"
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaeval.cli", "improve", "run", str(manifest)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    path = bundle / "trial_ledger.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if (
            path.exists()
            and path.read_bytes().count(b"\n") >= 1
            and (bundle / "trials" / "002").exists()
        ):
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = path.read_bytes()
    assert 1 <= kept.count(b"\n") < 5, "the kill should land mid-run"
    rerun = cli("improve", "run", str(manifest))
    assert rerun.returncode == 0, rerun.stderr
    assert path.read_bytes().startswith(kept)
    assert [e["trial"] for e in ledger(bundle)] == [1, 2, 3, 4, 5]
    assert [e["decision"] for e in ledger(bundle)] == [
        "promoted",
        "rejected",
        "invalid",
        "invalid",
        "rejected",
    ]


def test_check_patch_cli_exit_codes(tmp_path):
    boundary = tmp_path / "boundary.json"
    boundary.write_text(json.dumps({"mutable_root": "target_agent", "allowed_paths": ["."]}))
    inside = tmp_path / "inside.patch"
    inside.write_text(
        "diff --git a/target_agent/prompts.py b/target_agent/prompts.py\n"
        "--- a/target_agent/prompts.py\n+++ b/target_agent/prompts.py\n"
        "@@ -1 +1 @@\n-old\n+new\n"
    )
    outside = tmp_path / "outside.patch"
    outside.write_text(
        "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n"
    )
    ok = cli("improve", "check-patch", "--boundary", str(boundary), str(inside))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = cli("improve", "check-patch", "--boundary", str(boundary), str(outside))
    assert bad.returncode == 1
    assert "outside_boundary" in bad.stdout and "git_metadata" in bad.stdout


def test_bad_manifest_exits_2_naming_file_and_field(tmp_path):
    manifest = experiment(tmp_path)
    data = json.loads(manifest.read_text())
    data["trial_budgett"] = 3
    manifest.write_text(json.dumps(data))
    result = cli("improve", "run", str(manifest))
    assert result.returncode == 2
    assert "manifest-scripted.json" in result.stderr and "trial_budgett" in result.stderr


@pytest.mark.local_model
@pytest.mark.bwrap
def test_one_real_trial_with_the_toolloop_meta_agent(tmp_path):
    manifest = experiment(tmp_path, "manifest-toolloop.json")
    data = json.loads(manifest.read_text())
    data["sum"] = {"model": "none"}  # keep the target fast; the meta-agent is the real model
    data["budget_step_timeout_s"] = 120
    manifest.write_text(json.dumps(data))
    result = cli("improve", "run", str(manifest), "--budget", "1")
    assert result.returncode == 0, result.stderr
    bundle = tmp_path / "runs" / "improve-toolloop"
    entries = ledger(bundle)
    assert len(entries) == 1
    entry = entries[0]
    assert entry["decision"] in {"promoted", "rejected", "invalid"}
    trace = (bundle / "trials" / "001" / "optimizer_trace.jsonl").read_text().splitlines()
    assert trace, "the meta-agent's transcript is recorded"
    output = json.loads((bundle / "trials" / "001" / "optimizer_output.json").read_text())
    assert output["usage"]["input_tokens"] > 0


def test_resuming_with_another_host_variable_allow_list_is_refused(tmp_path):
    """`--allow-host-env` can change what verifiers score, so a bundle started with one allow
    list resumes only with the same one (names recorded, never values)."""
    from metaeval.errors import RecordIntegrityError
    from metaeval.protocols.improve.bundle import open_bundle
    from metaeval.protocols.improve.plan import build_plan

    manifest = experiment(tmp_path)
    plan, _ = build_plan(manifest, tmp_path / "bundle", 1, ("JUDGE_API_KEY",))
    open_bundle(plan).close()
    manifest_json = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest_json["config"]["host_env"] == ["JUDGE_API_KEY"]
    same, _ = build_plan(manifest, tmp_path / "bundle", 1, ("JUDGE_API_KEY",))
    open_bundle(same).close()  # the same list resumes
    other, _ = build_plan(manifest, tmp_path / "bundle", 1)
    with pytest.raises(RecordIntegrityError, match="allow_host_env"):
        open_bundle(other)


def test_best_is_the_promoted_lineage_never_a_rejected_candidate():
    """Under held-out gating a rejected candidate can have the top optimize score; the summary
    names the final promoted candidate instead, and ties on held-out go to the later one."""
    from types import SimpleNamespace

    from metaeval.protocols.improve.bundle import benchmark_summary, summary_text
    from metaeval.protocols.improve.loop import NodeEval

    plan = SimpleNamespace(baseline_id="baseline", trial_budget=4)
    base = NodeEval(status="evaluated", optimize={"score": 0.1}, held_out={"score": 0.2})

    def entry(n, decision, opt, held, cost=0.5):
        return {
            "trial": n,
            "parent_id": "baseline",
            "candidate_id": f"trial-{n:03d}",
            "decision": decision,
            "failure_class": None,
            "optimize_score": opt,
            "held_out_score": held,
            "meta_agent": {
                "status": "ok",
                "cost_usd": cost,
                "usage": {"input_tokens": 10, "output_tokens": 2},
            },
        }

    ledger = [
        entry(1, "rejected", 0.4, 0.0),  # best optimize of all, but the held-out gate said no
        entry(2, "promoted", 0.2, 0.3),
        entry(3, "promoted", 0.3, 0.3),
        entry(4, "rejected", 0.35, 0.9),
    ]
    typed = benchmark_summary(plan, base, ledger)
    summary = typed.model_dump()
    assert summary["best_optimize"] == {"id": "trial-003", "score": 0.3}
    assert summary["best_held_out"] == {"id": "trial-003", "score": 0.3}
    assert summary["final"] == {
        "id": "trial-003",
        "optimize_score": 0.3,
        "held_out_score": 0.3,
        "gain_optimize": pytest.approx(0.2),
        "gain_held_out": pytest.approx(0.1),
    }
    assert summary["best_so_far"] == [0.1, 0.2, 0.3, 0.3]
    assert summary["meta_agent_cost_usd"] == 2.0
    assert summary["meta_agent_tokens"] == {"input_tokens": 40, "output_tokens": 8}
    assert "final trial-003: optimize 0.300 (+20.0 pp), held-out 0.300 (+10.0 pp)" in (
        summary_text(typed)
    )
    nothing = benchmark_summary(plan, base, [entry(1, "rejected", 0.9, 0.9)])
    assert nothing.best_optimize is None and nothing.final.id == "baseline"
    assert "no candidate promoted" in summary_text(nothing)


@pytest.mark.bwrap
def test_resume_with_a_changed_budget_seed_or_task_file_is_refused(tmp_path):
    """The contract a bundle ran under is fixed: its effective budget (`--budget` included),
    seed and every suite's content are in resolved_manifest.json, and a resume with any of
    them changed is refused naming the difference, exit 2; the unchanged resume works."""
    manifest = experiment(tmp_path)
    first = cli("improve", "run", str(manifest), "--budget", "1")
    assert first.returncode == 0, first.stderr
    bundle = tmp_path / "runs" / "improve-demo"
    resolved = json.loads((bundle / "resolved_manifest.json").read_text())
    assert resolved["trial_budget"] == 1
    assert set(resolved["suites"]) == {"optimize", "held_out"}
    assert len(resolved["suites"]["optimize"]["tasks"]) == 10
    kept = (bundle / "trial_ledger.jsonl").read_bytes()

    data = json.loads(manifest.read_text())
    data["seed"] = 7
    seeded = tmp_path / "examples" / "improve" / "manifest-seed.json"
    seeded.write_text(json.dumps(data))
    reseeded = cli("improve", "run", str(seeded), "--budget", "1")
    assert reseeded.returncode == 2 and "seed" in reseeded.stderr
    # a larger budget is an extension, but only of the same contract: with the seed changed too
    # it is refused as well
    reseeded = cli("improve", "run", str(seeded), "--budget", "3")
    assert reseeded.returncode == 2 and "seed" in reseeded.stderr

    test_sh = tmp_path / "examples" / "improve-suites" / "terminal" / "csv-column" / "tests"
    original = (test_sh / "test.sh").read_text()
    (test_sh / "test.sh").write_text(original + "\n# edited\n")
    edited = cli("improve", "run", str(manifest), "--budget", "1")
    assert edited.returncode == 2 and "suite 'optimize' changed" in edited.stderr
    assert (bundle / "trial_ledger.jsonl").read_bytes() == kept  # nothing was run or lost
    (test_sh / "test.sh").write_text(original)


@pytest.mark.bwrap
def test_a_finished_run_is_extended_by_a_larger_budget_of_the_same_contract(tmp_path):
    """`--budget 3` on a finished budget-1 bundle runs trials 2 and 3 after the kept trial 1,
    in an evidence layer of its own, recorded in contract_extensions.json; the same with
    another input file changed is refused naming it; afterwards a resume without --budget
    continues the extended budget and a smaller budget is refused."""
    manifest = experiment(tmp_path)
    assert cli("improve", "run", str(manifest), "--budget", "1").returncode == 0
    bundle = tmp_path / "runs" / "improve-demo"
    kept = (bundle / "trial_ledger.jsonl").read_bytes()

    sut = tmp_path / "examples" / "improve" / "suts" / "scripted_sut.json"
    original = sut.read_text()
    sut.write_text(json.dumps({**json.loads(original), "description": "changed"}))
    changed = cli("improve", "run", str(manifest), "--budget", "3")
    assert changed.returncode == 2
    assert "extending the trial budget 1 -> 3" in changed.stderr
    assert "sut_config" in changed.stderr
    assert (bundle / "trial_ledger.jsonl").read_bytes() == kept
    assert not (bundle / "contract_extensions.json").exists()
    sut.write_text(original)

    extended = cli("improve", "run", str(manifest), "--budget", "3")
    assert extended.returncode == 0, extended.stderr
    assert (bundle / "trial_ledger.jsonl").read_bytes().startswith(kept)
    entries = ledger(bundle)
    assert [e["trial"] for e in entries] == [1, 2, 3]
    assert [e["decision"] for e in entries] == ["promoted", "rejected", "invalid"]
    assert [e["parent_id"] for e in entries] == ["baseline", "trial-001", "trial-001"]
    record = json.loads((bundle / "contract_extensions.json").read_text())
    assert [(r["from"], r["to"], r["layer"]) for r in record] == [(1, 3, "budget-3")]
    later = (bundle / "layers.jsonl").read_text().splitlines()
    assert [json.loads(line)["name"] for line in later] == ["budget-3"]
    summary = json.loads((bundle / "lineage_summary.json").read_text())["summary"]
    assert summary["trial_budget"] == 3 and summary["trials_consumed"] == 3

    again = cli("improve", "run", str(manifest))
    assert again.returncode == 0, again.stderr
    assert ledger(bundle) == entries
    smaller = cli("improve", "run", str(manifest), "--budget", "2")
    assert smaller.returncode == 2 and "3 -> 2" in smaller.stderr
    assert ledger(bundle) == entries


@pytest.mark.bwrap
def test_a_target_that_fails_to_serve_shows_the_cause_on_the_console(tmp_path):
    """The reason is in the target's server log; the console shows its last lines, not just
    'target agent failed to serve'."""
    manifest = experiment(tmp_path)
    repo = tmp_path / "runs" / "improve-target"
    policy = repo / "target_agent" / "policy.py"
    policy.write_text(
        policy.read_text().replace(
            "    def act(self, observation: Observation):\n",
            "    def act(self, observation: Observation):\n"
            "        raise RuntimeError('boom-from-the-target')\n",
        )
    )
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-qam", "break act"], check=True)
    data = json.loads(manifest.read_text())
    data["baseline"]["base_commit"] = "HEAD"
    manifest.write_text(json.dumps(data))
    result = cli("improve", "run", str(manifest), "--budget", "1")
    assert result.returncode != 0
    assert "target agent failed to serve" in result.stderr
    assert "boom-from-the-target" in result.stderr
