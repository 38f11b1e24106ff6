"""RunDir: manifest once, integrity checks, evidence layers, resume, lock, summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import metaeval
from metaeval.errors import ConfigError, MetaevalError, RecordIntegrityError
from metaeval.records import RunDir, new_run, read_jsonl, sha256_text

SRC = str(Path(metaeval.__file__).resolve().parent.parent)
KEY = ("task", "seed")


def _inputs(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "protocol": "build_and_find",
        "config": {"model": "scripted/echo", "concurrency": 2},
        "hashes": {
            "prompt:toolloop_system": "You are a coding agent.",
            "spec:calc": b"spec bytes",
            "price_table:default": sha256_text("prices"),
        },
        "seeds": [0, 1],
        "command": ["metaeval", "run", "build-and-find"],
    }
    args.update(overrides)
    return args


def _open(path: Path, **overrides: Any) -> RunDir:
    return RunDir.open(path, **_inputs(**overrides))


def test_new_run_dir_has_manifest_with_all_fields(tmp_path: Path) -> None:
    path = tmp_path / "a" / "run"
    with _open(path) as run:
        assert run.layer == "base"
        m = json.loads((path / "manifest.json").read_text())
    assert m["schema_version"] == 1
    assert m["protocol"] == "build_and_find"
    assert m["command"] == ["metaeval", "run", "build-and-find"]
    assert m["config"] == {"model": "scripted/echo", "concurrency": 2}
    assert m["hashes"] == {
        "price_table:default": sha256_text("prices"),
        "prompt:toolloop_system": sha256_text("You are a coding agent."),
        "spec:calc": sha256_text(b"spec bytes"),
    }
    assert m["seeds"] == [0, 1]
    assert m["metaeval_version"] == metaeval.__version__
    assert "git_revision" in m
    assert m["environment_hash"].startswith("sha256:")
    assert m["created_at"].endswith("Z")
    assert [layer["name"] for layer in m["layers"]] == ["base"]
    assert (path / ".lock").exists()
    assert not list(path.glob(".manifest-*"))


def test_manifest_written_once_and_reused_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "run"
    _open(path).close()
    manifest = path / "manifest.json"
    before, mtime = manifest.read_bytes(), manifest.stat().st_mtime_ns
    time.sleep(0.01)
    # Same hashes, different config (concurrency) and command: allowed, manifest untouched.
    with _open(path, config={"model": "scripted/echo", "concurrency": 16}, command=["x"]) as run:
        assert run.layer == "base"
    assert manifest.read_bytes() == before
    assert manifest.stat().st_mtime_ns == mtime
    sessions, problems = read_jsonl(path / "sessions.jsonl")
    assert problems == []
    assert [s["config"]["concurrency"] for s in sessions] == [2, 16]


def test_changed_prompt_names_the_prompt(tmp_path: Path) -> None:
    path = tmp_path / "run"
    _open(path).close()
    before = (path / "manifest.json").read_bytes()
    hashes = dict(_inputs()["hashes"], **{"prompt:toolloop_system": "You are a DIFFERENT agent."})
    with pytest.raises(RecordIntegrityError) as info:
        _open(path, hashes=hashes)
    msg = str(info.value)
    assert "prompt 'toolloop_system' changed" in msg
    assert sha256_text("You are a coding agent.") in msg
    assert sha256_text("You are a DIFFERENT agent.") in msg
    assert "--new-layer" in msg
    assert "spec" not in msg  # unchanged items are not named
    assert (path / "manifest.json").read_bytes() == before
    # The failed open released its lock: a matching open still works.
    _open(path).close()


def test_added_and_removed_hashes_are_named(tmp_path: Path) -> None:
    path = tmp_path / "run"
    _open(path).close()
    hashes = dict(_inputs()["hashes"])
    del hashes["spec:calc"]
    hashes["question_bank:qb1"] = "q"
    with pytest.raises(RecordIntegrityError) as info:
        _open(path, hashes=hashes)
    msg = str(info.value)
    assert "spec 'calc' removed" in msg
    assert "question_bank 'qb1' added" in msg


def test_different_protocol_is_refused_even_with_new_layer(tmp_path: Path) -> None:
    path = tmp_path / "run"
    _open(path).close()
    with pytest.raises(RecordIntegrityError, match="protocol 'build_and_find', not 'audit'"):
        _open(path, protocol="audit", new_layer="v2")


def test_new_layer_starts_fresh_cells_and_resumes_by_name(tmp_path: Path) -> None:
    path = tmp_path / "run"
    with _open(path) as run:
        run.records("cells").append({"task": "a", "seed": 0, "status": "ok"})
        assert run.completed_cells("cells", KEY) == {("a", 0)}
    manifest_before = (path / "manifest.json").read_bytes()

    changed = dict(_inputs()["hashes"], **{"prompt:toolloop_system": "v2 prompt"})
    with _open(path, hashes=changed, new_layer="v2") as run:
        assert run.layer == "v2"
        assert run.completed_cells("cells", KEY) == set()
        run.records("cells").append({"task": "b", "seed": 0, "status": "ok"})
        assert run.completed_cells("cells", KEY) == {("b", 0)}
        assert [r["task"] for r in run.read("cells", layer="base")] == ["a"]
        assert len(run.read("cells", all_layers=True)) == 2
    assert (path / "manifest.json").read_bytes() == manifest_before
    layers, _ = read_jsonl(path / "layers.jsonl")
    assert [(e["name"], e["hashes"]["prompt:toolloop_system"]) for e in layers] == [
        ("v2", sha256_text("v2 prompt"))
    ]
    assert "created_at" in layers[0]

    # Re-running the same command (same --new-layer) resumes v2 instead of adding a layer.
    with _open(path, hashes=changed, new_layer="v2") as run:
        assert run.completed_cells("cells", KEY) == {("b", 0)}
    # Without --new-layer, the current (latest) layer is resumed.
    with _open(path, hashes=changed) as run:
        assert run.layer == "v2"
    assert len(read_jsonl(path / "layers.jsonl")[0]) == 1
    # The original inputs no longer match the current layer.
    with pytest.raises(RecordIntegrityError, match="layer 'v2'"):
        _open(path)
    # Reusing a layer name with different inputs is refused.
    with pytest.raises(RecordIntegrityError, match="layer 'v2' already exists"):
        _open(path, new_layer="v2")
    records = [json.loads(x) for x in (path / "cells.jsonl").read_text().splitlines()]
    assert [(r["task"], r["layer"]) for r in records] == [("a", "base"), ("b", "v2")]


def test_first_layer_of_a_new_dir_takes_the_new_layer_name(tmp_path: Path) -> None:
    path = tmp_path / "run"
    with _open(path, new_layer="v2") as run:
        run.records("cells").append({"task": "a", "seed": 0, "status": "ok"})
    with _open(path, new_layer="v2") as run:  # killed and re-run: resumes
        assert run.layer == "v2"
        assert run.completed_cells("cells", KEY) == {("a", 0)}
    assert not (path / "layers.jsonl").exists()


def test_invalid_layer_name_is_a_config_error_before_anything_exists(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="new_layer"):
        _open(tmp_path / "run", new_layer="bad name/..")
    assert not (tmp_path / "run").exists()


def test_completed_cells_latest_record_wins(tmp_path: Path) -> None:
    with _open(tmp_path / "run") as run:
        w = run.records("cells")
        rows = [
            {"task": "ok", "seed": 0, "status": "ok", "attempt": 1},
            {"task": "agent_timeout", "seed": 0, "status": "timeout", "attempt": 1},
            {"task": "agent_error", "seed": 0, "status": "error", "attempt": 1},
            {"task": "infra", "seed": 0, "status": "error", "infra_error": True, "attempt": 1},
            {"task": "retried", "seed": 0, "status": "error", "infra_error": True, "attempt": 1},
            {"task": "retried", "seed": 0, "status": "ok", "infra_error": False, "attempt": 2},
            {"task": "regressed", "seed": 1, "status": "ok", "attempt": 1},
            {"task": "regressed", "seed": 1, "status": "error", "infra_error": True, "attempt": 2},
            {"task": "started", "seed": 0, "status": "started", "attempt": 1},
            {"event": "not a cell record"},
        ]
        for row in rows:
            w.append(row)
        assert run.completed_cells("cells", KEY) == {
            ("ok", 0),
            ("agent_timeout", 0),
            ("agent_error", 0),
            ("retried", 0),
        }
        latest = run.latest_records("cells", KEY)
        assert latest[("retried", 0)]["attempt"] == 2
        assert latest[("regressed", 1)]["infra_error"] is True
        assert all(r["layer"] == "base" and r["created_at"] for r in run.read("cells"))
        with pytest.raises(ValueError, match="layer"):
            w.append({"task": "x", "seed": 0, "status": "ok", "layer": "other"})
    # Records are only ever appended.
    lines = (tmp_path / "run" / "cells.jsonl").read_text().splitlines()
    assert len(lines) == len(rows)


def test_read_skips_torn_line_and_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "run"
    with _open(path) as run:
        run.records("cells").append({"task": "a", "seed": 0, "status": "ok"})
    with open(path / "cells.jsonl", "ab") as f:
        f.write(b'{"task":"b","seed":0,"sta')
    with _open(path) as run, caplog.at_level("WARNING", logger="metaeval.records"):
        assert run.completed_cells("cells", KEY) == {("a", 0)}
        assert any("cells.jsonl: line 2: torn last line" in m for m in caplog.messages)
        run.records("cells").append({"task": "b", "seed": 0, "status": "ok"})
        assert run.completed_cells("cells", KEY) == {("a", 0), ("b", 0)}


def test_summary_is_atomically_replaced(tmp_path: Path) -> None:
    with _open(tmp_path / "run") as run:
        run.write_summary({"n": 1})
        run.write_summary({"n": 2, "accuracy": 0.5})
        summary = tmp_path / "run" / "summary.json"
        assert json.loads(summary.read_text()) == {"accuracy": 0.5, "n": 2}
        assert not list((tmp_path / "run").glob(".summary-*"))


def test_failed_manifest_write_removes_the_new_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_a: Any, **_k: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(new_run, "write_manifest", boom)  # where the first manifest is written
    with pytest.raises(OSError, match="disk full"):
        _open(tmp_path / "new" / "run")
    assert not (tmp_path / "new").exists()


def test_unserialisable_config_fails_before_creating_anything(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        _open(tmp_path / "run", config={"obj": object()})
    assert not (tmp_path / "run").exists()


def test_non_run_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run"
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    with pytest.raises(MetaevalError, match="not a metaeval run directory"):
        _open(path)
    assert sorted(p.name for p in path.iterdir()) == [".lock", "notes.txt"]
    # An empty existing directory is fine.
    empty = tmp_path / "empty"
    empty.mkdir()
    _open(empty).close()
    assert (empty / "manifest.json").exists()


_SECOND_OPEN = """
import sys
from metaeval.errors import MetaevalError
from metaeval.records import RunDir
try:
    RunDir.open(sys.argv[1], protocol="build_and_find", config={}, hashes={}, seeds=[])
except MetaevalError as exc:
    print(exc)
    sys.exit(3)
print("opened")
"""


def _second_process(path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-c", _SECOND_OPEN, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_second_process_gets_a_clear_in_use_error(tmp_path: Path) -> None:
    path = tmp_path / "run"
    run = RunDir.open(path, protocol="build_and_find", config={}, hashes={}, seeds=[])
    try:
        proc = _second_process(path)
        assert proc.returncode == 3, proc.stderr
        assert "run directory" in proc.stdout
        assert "is in use by another process" in proc.stdout
        assert f"pid {os.getpid()}" in proc.stdout
    finally:
        run.close()
    proc = _second_process(path)  # released: the other process may now open it
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "opened"
    assert (path / ".lock").exists()


def test_closed_run_refuses_new_writers(tmp_path: Path) -> None:
    run = _open(tmp_path / "run")
    w = run.records("cells")
    run.close()
    run.close()  # idempotent
    with pytest.raises(ValueError):
        w.append({"task": "a"})
    with pytest.raises(ValueError):
        run.records("cells")
    with _open(tmp_path / "run") as again, pytest.raises(ValueError, match="reserved"):
        again.records("layers")


def test_open_existing_reopens_with_recorded_inputs_and_names_bad_dirs(tmp_path):
    from metaeval.errors import ConfigError
    from metaeval.records import RunDir

    run = RunDir.open(
        tmp_path / "r", protocol="audit", config={"a": 1}, hashes={"prompt:p": "x"}, seeds={}
    )
    run.records("cells").append({"task": "t", "status": "ok"})
    run.close()
    again = RunDir.open_existing(tmp_path / "r", "audit")
    assert again.read("cells")[0]["task"] == "t"
    again.close()
    with pytest.raises(ConfigError, match="holds protocol 'audit', not 'buildfind'"):
        RunDir.open_existing(tmp_path / "r", "buildfind")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="not a run directory of the audit protocol"):
        RunDir.open_existing(tmp_path / "empty", "audit")
