"""A new run's slow input hashes are computed in the background (RunDir.open deferred_hashes):
the caller starts at once, no record reaches the disk before the manifest, a resume still
compares every hash, a failed hash loses nothing, and a run killed before its manifest was
written can be opened again as a new run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import metaeval
from metaeval.errors import MetaevalError, RecordIntegrityError
from metaeval.records import RunDir, sha256_text
from metaeval.records.envinfo import metaeval_git_revision

SRC = str(Path(metaeval.__file__).resolve().parent.parent)
DIGEST = sha256_text("the whole benchmark")


def _open(path: Path, deferred: dict, **extra) -> RunDir:
    return RunDir.open(
        path,
        protocol="audit",
        config={"concurrency": 2},
        hashes={"prompt:x": "a prompt"},
        seeds={"model_seed": 0},
        deferred_hashes=deferred,
        **extra,
    )


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_new_run_starts_before_its_slow_hash_and_records_wait_for_the_manifest(tmp_path):
    release = threading.Event()

    def slow() -> str:
        assert release.wait(30)
        return DIGEST

    path = tmp_path / "run"
    run = _open(path, {"benchmark": slow})
    try:
        assert run.layer == "base" and run.base_layer == "base"
        assert run.read("cells") == []  # a new run has no records: no need to wait
        blob = run.blobs.put("evidence", defer_sync=True)
        written = run.submit([("cells", {"task": "a", "status": "ok"})])
        time.sleep(0.3)
        assert not written.done()
        assert not (path / "manifest.json").exists()
        assert not (path / "cells.jsonl").exists()
        assert not (path / "sessions.jsonl").exists()
        release.set()
        written.result(timeout=30)
        manifest = json.loads((path / "manifest.json").read_text())
        assert manifest["hashes"]["benchmark"] == DIGEST
        assert manifest["hashes"]["prompt:x"] == sha256_text("a prompt")
        assert run.manifest["hashes"] == manifest["hashes"]
        assert [r["task"] for r in _lines(path / "cells.jsonl")] == ["a"]
        assert run.blobs.get(blob) == b"evidence"
    finally:
        release.set()
        run.close()
    sessions = _lines(path / "sessions.jsonl")
    assert len(sessions) == 1
    # the git revision, read in the background too, is the same in both places
    revision = metaeval_git_revision()
    assert manifest["git_revision"] == sessions[0]["git_revision"] == revision


def test_a_resume_computes_the_deferred_hash_at_once_and_compares_it(tmp_path):
    path = tmp_path / "run"
    with _open(path, {"benchmark": lambda: DIGEST}) as run:
        run.submit([("cells", {"task": "a", "status": "ok"})]).result(timeout=30)
    calls: list[str] = []

    def counted() -> str:
        calls.append("hash")
        return DIGEST

    with _open(path, {"benchmark": counted}) as run:
        assert calls == ["hash"]  # before open returned
        assert run.completed_cells("cells", ("task",)) == {("a",)}
    changed = sha256_text("one task file edited")
    with pytest.raises(RecordIntegrityError, match="benchmark"):
        _open(path, {"benchmark": lambda: changed})
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["hashes"]["benchmark"] == DIGEST


def test_a_failed_hash_fails_every_write_and_leaves_a_directory_that_opens_as_new(tmp_path):
    def broken() -> str:
        raise OSError("disk went away")

    path = tmp_path / "run"
    run = _open(path, {"benchmark": broken})
    written = run.submit([("cells", {"task": "a", "status": "ok"})])
    with pytest.raises(MetaevalError, match="manifest could not be written.*disk went away"):
        written.result(timeout=30)
    with pytest.raises(MetaevalError, match="disk went away"):
        run.write_summary({"cells": 1})
    with pytest.raises(MetaevalError, match="disk went away"):
        run.close()
    assert not (path / "manifest.json").exists() and not (path / "cells.jsonl").exists()
    run.close()  # the error was raised once; closing again is quiet
    with _open(path, {"benchmark": lambda: DIGEST}) as again:
        assert again.manifest["hashes"]["benchmark"] == DIGEST


def test_a_deferred_hash_must_be_a_digest(tmp_path):
    run = _open(tmp_path / "run", {"benchmark": lambda: "not a digest"})
    with pytest.raises(MetaevalError, match="'benchmark' returned 'not a digest'"):
        run.close()
    _open(tmp_path / "other", {"benchmark": lambda: DIGEST}).close()
    with pytest.raises(ValueError, match="not 'sha256:<hex>'"):  # a resume: checked at once
        _open(tmp_path / "other", {"benchmark": lambda: "nope"})


_KILLED_BEFORE_MANIFEST = """
import sys, threading
from metaeval.records import RunDir
run = RunDir.open(sys.argv[1], protocol="audit", config={}, hashes={}, seeds={},
                  deferred_hashes={"benchmark": lambda: threading.Event().wait() or ""})
run.blobs.put("a blob written before the manifest")
run.submit([("cells", {"task": "a", "status": "ok"})])
print("ready", flush=True)
threading.Event().wait()
"""


def test_a_run_killed_before_its_manifest_opens_again_as_a_new_run(tmp_path):
    path = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_BEFORE_MANIFEST, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert sorted(p.name for p in path.iterdir()) == [".lock", "blobs"]
    with _open(path, {"benchmark": lambda: DIGEST}) as run:
        run.submit([("cells", {"task": "b", "status": "ok"})]).result(timeout=30)
    assert json.loads((path / "manifest.json").read_text())["hashes"]["benchmark"] == DIGEST
    assert [r["task"] for r in _lines(path / "cells.jsonl")] == ["b"]
    # a directory of other things is still refused
    other = tmp_path / "other"
    (other / "blobs").mkdir(parents=True)
    (other / "notes.txt").write_text("mine")
    with pytest.raises(MetaevalError, match="not a metaeval run directory"):
        _open(other, {"benchmark": lambda: DIGEST})
