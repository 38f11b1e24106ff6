"""Settings that change what a cell means (`RunDir.open(settings=...)`): compared on a rerun
like input hashes, named with both values when they differ, recorded per evidence layer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metaeval.errors import RecordIntegrityError
from metaeval.records import RunDir


def _open(path: Path, settings: dict | None, config: dict | None = None, **kw) -> RunDir:
    return RunDir.open(
        path,
        protocol="p",
        config=config if config is not None else {"execution_checks": False},
        hashes={"prompt:a": "text"},
        seeds={},
        settings=settings,
        **kw,
    )


def test_same_settings_resume_and_a_changed_one_is_named_with_both_values(tmp_path):
    run_dir = tmp_path / "run"
    _open(run_dir, {"execution_checks": False, "sandbox": "auto"}).close()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["layers"][0]["settings"] == {"execution_checks": False, "sandbox": "auto"}
    assert "setting:execution_checks" in manifest["layers"][0]["hashes"]
    _open(run_dir, {"execution_checks": False, "sandbox": "auto"}).close()  # resumes
    with pytest.raises(RecordIntegrityError) as refused:
        _open(run_dir, {"execution_checks": True, "sandbox": "bwrap"})
    message = str(refused.value)
    assert "setting 'execution_checks' changed: off -> on" in message
    assert "setting 'sandbox' changed: auto -> bwrap" in message
    assert "-o NEW_DIR" in message and "--new-layer NAME" in message


def test_a_new_layer_records_its_settings_and_resumes_with_them(tmp_path):
    run_dir = tmp_path / "run"
    _open(run_dir, {"max_tokens": 100}).close()
    _open(run_dir, {"max_tokens": 200}, new_layer="long").close()
    layers = [json.loads(line) for line in (run_dir / "layers.jsonl").read_text().splitlines()]
    assert layers[-1]["settings"] == {"max_tokens": 200}
    run = _open(run_dir, {"max_tokens": 200})  # the current layer is 'long'
    assert run.layer == "long"
    run.close()
    with pytest.raises(RecordIntegrityError, match=r"setting 'max_tokens' changed: 200 -> 300"):
        _open(run_dir, {"max_tokens": 300}, new_layer="long")


def test_a_run_recorded_before_settings_were_compares_them_with_its_config(tmp_path):
    run_dir = tmp_path / "old"
    _open(run_dir, None, config={"execution_checks": False}).close()  # no settings recorded
    _open(run_dir, {"execution_checks": False}).close()  # the same value: resumes
    _open(run_dir, {"unknown_then": 1}).close()  # a value it never recorded: not compared
    with pytest.raises(
        RecordIntegrityError, match=r"setting 'execution_checks' changed: off -> on"
    ):
        _open(run_dir, {"execution_checks": True})
