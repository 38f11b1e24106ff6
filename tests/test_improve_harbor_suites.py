"""A suite read from a Harbor dataset directory without suite.json (Terminal-Bench 2.0 and
BFCL Parity as `harbor datasets download` writes them) (issue 40)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from improve_experiment import ROOT, experiment
from metaeval.errors import ConfigError
from metaeval.protocols.improve.plan import build_plan
from metaeval.protocols.improve.suites import load_suite_config, suite_tasks

TERMINAL = ROOT / "examples" / "improve-suites" / "terminal"
TASKS = ("csv-column", "count-error-lines", "checksum-file")


def dataset(root: Path) -> Path:
    """Three Harbor task directories side by side, no suite.json."""
    root.mkdir(parents=True)
    for name in TASKS:
        shutil.copytree(TERMINAL / name, root / name)
    (root / "README.md").write_text("not a task\n")
    (root / "notes").mkdir()  # a directory without task.toml is not a task
    return root


def test_a_harbor_dataset_directory_is_a_suite_of_every_task(tmp_path):
    dataset(tmp_path / "tb2")
    file = tmp_path / "tb2.json"
    file.write_text(json.dumps({"name": "tb2", "tasks_dir": "tb2"}))
    assert [t.name for t in suite_tasks(load_suite_config(file))] == sorted(TASKS)
    file.write_text(json.dumps({"name": "tb2", "tasks_dir": "tb2", "task_ids": ["csv-column"]}))
    assert [t.name for t in suite_tasks(load_suite_config(file))] == ["csv-column"]


@pytest.mark.parametrize(
    ("content", "field", "words"),
    [
        ({"split_id": "optimize"}, "split_id", "has no suite.json, so it has no split"),
        ({"task_ids": ["missing-task"]}, "task_ids", "not found"),
    ],
)
def test_a_dataset_suite_config_names_the_bad_field(tmp_path, content, field, words):
    dataset(tmp_path / "tb2")
    file = tmp_path / "tb2.json"
    file.write_text(json.dumps({"name": "tb2", "tasks_dir": "tb2", **content}))
    with pytest.raises(ConfigError) as caught:
        load_suite_config(file)
    assert caught.value.file == str(file) and caught.value.field == field
    assert words in str(caught.value)


def test_an_empty_directory_is_not_a_suite(tmp_path):
    (tmp_path / "empty").mkdir()
    file = tmp_path / "empty.json"
    file.write_text(json.dumps({"name": "e", "tasks_dir": "empty"}))
    with pytest.raises(ConfigError) as caught:
        load_suite_config(file)
    assert caught.value.field == "tasks_dir" and "no task directories" in str(caught.value)


def test_a_manifest_optimizes_on_a_dataset_directory_with_its_hash_in_the_contract(tmp_path):
    manifest = experiment(tmp_path)
    dataset(tmp_path / "tb2")
    suite = tmp_path / "tb2.json"
    suite.write_text(json.dumps({"name": "terminal-bench-2.0", "tasks_dir": "tb2"}))
    data = json.loads(manifest.read_text())
    data["evaluation"] = {"optimize": {"suite_config": str(suite)}}  # held-out off, as the paper
    manifest.write_text(json.dumps(data))
    plan, _ = build_plan(manifest)
    assert [t.name for t in plan.optimize_tasks] == sorted(TASKS)
    suites = plan.documents["resolved_manifest.json"]["suites"]
    assert suites["optimize"]["tasks"] == sorted(TASKS)
    assert suites["optimize"]["sha256"].startswith("sha256:")
