"""The shared helpers improve now stands on: one git helper, one process helper, and the
bundle written through RunDir (documents, the paper-format ledger, redaction, input check)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from metaeval.errors import RecordIntegrityError
from metaeval.protocols.improve.bundle import BundleFiles, open_bundle
from metaeval.records import RunDir
from metaeval.sandbox.git import GitError, git, git_result
from metaeval.sandbox.process_group import group_alive, spawn, stop_process_group


def _repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q")
    (path / "a.txt").write_text("one\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-q", "-m", "first")
    return path


def test_git_helper_returns_stdout_and_names_the_failing_command(tmp_path):
    repo = _repo(tmp_path / "repo")
    assert len(git(repo, "rev-parse", "HEAD").strip()) == 40
    with pytest.raises(GitError) as err:
        git(repo, "rev-parse", "--verify", "no-such-branch^{commit}")
    assert "git rev-parse --verify no-such-branch^{commit} failed in" in str(err.value)
    assert str(repo) in str(err.value)


def test_git_helper_ignores_variables_that_relocate_the_repository(tmp_path, monkeypatch):
    repo = _repo(tmp_path / "repo")
    other = _repo(tmp_path / "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    assert git(repo, "log", "--format=%s").strip() == "first"
    assert git_result(repo, "rev-parse", "--show-toplevel").stdout.strip() == str(repo)


def test_spawned_process_group_is_stopped_with_its_children(tmp_path):
    script = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    proc = spawn([sys.executable, "-c", script], cwd=tmp_path, env=os.environ)
    time.sleep(1.0)
    assert group_alive(proc.pid)
    started = time.monotonic()
    stop_process_group(proc, grace_s=2.0)
    assert not group_alive(proc.pid), "the sleeping grandchild went with the group"
    assert time.monotonic() - started < 15


def _run(path: Path) -> RunDir:
    return RunDir.open(path, protocol="improve", config={}, hashes={"file:a": "x"}, seeds={})


def test_documents_are_redacted_and_stay_inside_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TARGET_API_KEY", "very-secret-value-123")
    run = _run(tmp_path / "bundle")
    try:
        files = BundleFiles(run)
        files.json(tmp_path / "bundle" / "trials" / "001" / "x.json", {"api_key": "k-123456789"})
        files.text("trials/001/log.txt", "token very-secret-value-123 in a log\n")
        for bad in ("../escape.txt", "/etc/passwd", "manifest.json", "blobs/x"):
            with pytest.raises(ValueError):
                run.write_document(bad, "nope")
    finally:
        run.close()
    doc = (tmp_path / "bundle" / "trials" / "001" / "x.json").read_text()
    assert json.loads(doc) == {"api_key": "[REDACTED]"}
    assert doc.endswith("}\n") and doc.startswith("{\n  ")  # indented, as the bundle always was
    log = (tmp_path / "bundle" / "trials" / "001" / "log.txt").read_text()
    assert "very-secret-value-123" not in log and "[REDACTED]" in log
    assert not (tmp_path / "escape.txt").exists()


def test_the_ledger_keeps_its_paper_format_and_skips_a_torn_line(tmp_path):
    run = _run(tmp_path / "bundle")
    try:
        run.plain_records("trial_ledger").append({"trial": 1, "decision": "promoted"})
    finally:
        run.close()
    path = tmp_path / "bundle" / "trial_ledger.jsonl"
    assert path.read_text() == '{"decision":"promoted","trial":1}\n'  # no layer, no timestamp
    with path.open("a") as handle:
        handle.write('{"trial": 2, "deci')  # a kill mid-write
    run = _run(tmp_path / "bundle")
    try:
        assert run.read("trial_ledger", all_layers=True) == [{"decision": "promoted", "trial": 1}]
        run.plain_records("trial_ledger").append({"trial": 2, "decision": "rejected"})
        assert [e["trial"] for e in run.read("trial_ledger", all_layers=True)] == [1, 2]
    finally:
        run.close()


def test_a_bundle_is_resumed_only_with_the_same_input_files(tmp_path):
    class Plan:
        bundle = tmp_path / "bundle"
        run_id = "bundle"
        baseline_id = "baseline"
        trial_budget = 3
        host_env = ()
        documents = {"resolved_manifest.json": {"files": {"suite": {"sha256": "a" * 64}}}}

    open_bundle(Plan).close()
    open_bundle(Plan).close()  # same inputs: resumes
    Plan.documents = {"resolved_manifest.json": {"files": {"suite": {"sha256": "b" * 64}}}}
    with pytest.raises(RecordIntegrityError, match="file 'suite' changed") as err:
        open_bundle(Plan)
    assert "use a new output directory" in str(err.value) and "--new-layer" not in str(err.value)
    Plan.documents = {"resolved_manifest.json": {"files": {"suite": {"sha256": "a" * 64}}}}
    run = open_bundle(Plan)
    try:
        with pytest.raises(Exception, match="in use by another process"):
            open_bundle(Plan)
    finally:
        run.close()
