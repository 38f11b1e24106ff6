"""Contract hygiene of an improve experiment (issue 40): disjoint optimize and held-out views,
and the target's pinned source stated in the bundle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from improve_experiment import experiment
from metaeval.errors import ConfigError
from metaeval.protocols.improve.gitops import git, resolve_commit
from metaeval.protocols.improve.plan import build_plan
from metaeval.protocols.improve.target_source import target_source


def _optimize_without_split(manifest: Path) -> None:
    """The optimize suite config of the example with its split_id dropped (every task)."""
    data = json.loads(manifest.read_text())
    del data["evaluation"]["optimize"]["split_id"]
    manifest.write_text(json.dumps(data))
    suite = manifest.parent / "suites" / "terminal_optimize.json"
    config = json.loads(suite.read_text())
    del config["split_id"]
    suite.write_text(json.dumps(config))


def test_an_optimize_view_that_reaches_held_out_tasks_is_refused(tmp_path):
    manifest = experiment(tmp_path)
    _optimize_without_split(manifest)
    held = json.loads((tmp_path / "examples/improve-suites/terminal/suite.json").read_text())
    with pytest.raises(ConfigError) as caught:
        build_plan(manifest)
    error = caught.value
    assert error.file == str(manifest.resolve()) or error.file == str(manifest)
    assert error.field == "evaluation.optimize.split_id"
    assert held["splits"]["held_out"][0] in str(error)
    assert not (tmp_path / "runs" / "improve-demo").exists()  # refused before anything ran


def test_the_cli_refuses_overlapping_views_with_exit_2(tmp_path):
    manifest = experiment(tmp_path)
    _optimize_without_split(manifest)
    result = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "improve", "run", str(manifest)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert "evaluation.optimize.split_id" in result.stderr
    assert "manifest-scripted.json" in result.stderr


def test_disjoint_views_are_accepted_and_the_target_source_is_stated(tmp_path):
    manifest = experiment(tmp_path)
    plan, _ = build_plan(manifest)
    assert not set(plan.optimize_tasks) & set(plan.held_out_tasks or [])
    stated = plan.documents["resolved_manifest.json"]["target_source"]
    repo = tmp_path / "runs" / "improve-target"
    assert stated["baseline_commit"] == resolve_commit(repo, "HEAD")
    assert stated["provenance"] is None  # the toolloop target has no target.json
    assert stated["pinned_by"] == "baseline commit"


def test_a_mini_swe_agent_target_states_its_release_and_the_paper_difference(tmp_path):
    """target.json as `init-target mini-swe-agent` writes it (`copy_mini_source`'s record),
    committed in a real repository: the bundle names the release and how it differs from
    the paper's pinned commit."""
    repo = tmp_path / "target"
    repo.mkdir()
    provenance = {
        "family": "mini-swe-agent",
        "distribution": "mini-swe-agent",
        "version": "2.4.6",
        "package": "minisweagent",
    }
    (repo / "target.json").write_text(json.dumps(provenance))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "baseline")
    commit = resolve_commit(repo, "HEAD")
    stated = target_source(repo, commit)
    assert stated["provenance"] == provenance
    assert stated["pinned_by"] == "PyPI release mini-swe-agent==2.4.6"
    assert "commit" in stated["versus_paper"]
    # a later commit that drops target.json is stated as unrecorded, not as the old release
    git(repo, "rm", "-q", "target.json")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "drop")
    assert target_source(repo, resolve_commit(repo, "HEAD"))["provenance"] is None


def test_an_unknown_pull_policy_is_refused_naming_the_option(tmp_path):
    manifest = experiment(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "improve", "run", str(manifest)]
        + ["--pull", "sometimes"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert "field 'pull'" in result.stderr
    assert "unknown pull policy 'sometimes' (never, missing, always)" in result.stderr
    assert not (tmp_path / "runs" / "improve-demo").exists()


@pytest.mark.bwrap
def test_the_pull_policy_is_part_of_the_contract(tmp_path):
    manifest = experiment(tmp_path)

    def run(*extra: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "metaeval.cli", "improve", "run", str(manifest), *extra]
        return subprocess.run(argv, capture_output=True, text=True, timeout=600)

    assert run().returncode == 0
    bundle = tmp_path / "runs" / "improve-demo"
    assert json.loads((bundle / "resolved_manifest.json").read_text())["pull"] == "never"
    other = run("--pull", "missing")
    assert other.returncode == 2 and "setting 'pull' changed" in other.stderr
