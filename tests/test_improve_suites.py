"""IMPROVE suites: the bundled task suites, their splits, and suite configs.

Tests marked `bwrap` run every bundled task's oracle and untouched environment in the
container-like sandbox; they skip only when harbor_sandbox_unavailable() says the sandbox
cannot run here (with METAEVAL_REQUIRE_BWRAP=1 they fail instead).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from metaeval.agents.in_trial import TrialAgent
from metaeval.agents.registry import get_agent
from metaeval.errors import ConfigError
from metaeval.protocols.audit.task_view import load_task
from metaeval.protocols.improve.suites import (
    SuiteConfig,
    load_suite_config,
    load_suite_manifest,
    suite_tasks,
)
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable
from metaeval.tasks.limits import trial_limits
from metaeval.tasks.rooms import BwrapBackend
from metaeval.tasks.task_dirs import discover_tasks
from metaeval.tasks.trial import run_trial

SUITES = Path(__file__).resolve().parents[1] / "examples" / "improve-suites"
SUITE_NAMES = ("terminal", "function-calling")
ALL_TASKS = [
    pytest.param(SUITES / suite / task_id, id=f"{suite}/{task_id}")
    for suite in SUITE_NAMES
    for task_id in sorted(p.name for p in (SUITES / suite).iterdir() if (p / "task.toml").is_file())
]


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    reason = harbor_sandbox_unavailable()
    if reason is not None:
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_BWRAP=1 but {reason}")
        pytest.skip(reason)


def run_task(task: Path, scratch: Path, *, solve: bool) -> tuple[float | None, str]:
    """(reward, log) of one trial of the task, solved by its oracle or not at all."""
    scratch.mkdir(parents=True)
    limits = trial_limits(load_task(task, bench_root=task.parent).config)
    agent = TrialAgent(get_agent("oracle" if solve else "null"))
    trial = run_trial(task, BwrapBackend(), limits=limits, scratch=scratch, agent=agent)
    if solve:
        assert trial.solve is not None and trial.solve.ok, f"solve.sh failed: {trial.log}"
    return trial.reward, trial.log


# --------------------------------------------------------------------------- layout


@pytest.mark.parametrize("suite", SUITE_NAMES)
def test_suite_splits_are_disjoint_and_cover_the_tasks(suite: str) -> None:
    manifest = load_suite_manifest(SUITES / suite)
    assert manifest.name == suite
    assert set(manifest.splits) == {"optimize", "held_out"}
    optimize, held_out = manifest.splits["optimize"], manifest.splits["held_out"]
    assert not set(optimize) & set(held_out)
    assert len(set(optimize)) == len(optimize) and len(set(held_out)) == len(held_out)
    tasks, skipped = discover_tasks(SUITES / suite)
    assert skipped == []
    assert sorted(optimize + held_out) == sorted(t.name for t in tasks)
    assert len(tasks) >= 12
    share = len(optimize) / len(tasks)
    assert 0.55 <= share <= 0.75  # roughly 2/3 optimize, 1/3 held out


@pytest.mark.parametrize("task", ALL_TASKS)
def test_every_task_has_the_harbor_layout_without_docker(task: Path) -> None:
    for rel in ("task.toml", "instruction.md", "tests/test.sh", "solution/solve.sh"):
        assert (task / rel).is_file(), rel
    assert (task / "environment").is_dir()
    assert not (task / "environment" / "Dockerfile").exists()
    assert "/logs/verifier/reward.txt" in (task / "tests" / "test.sh").read_text()
    assert "allow_internet = false" in (task / "task.toml").read_text()


def test_function_calling_suite_has_all_three_categories() -> None:
    manifest = load_suite_manifest(SUITES / "function-calling")
    ids = manifest.all_task_ids()
    for prefix in ("simple-", "multiple-", "parallel-"):
        assert sum(i.startswith(prefix) for i in ids) >= 3, prefix
    for split in ("optimize", "held_out"):
        for prefix in ("simple-", "multiple-", "parallel-"):
            assert any(i.startswith(prefix) for i in manifest.splits[split]), (split, prefix)
    for task_id in ids:
        task = SUITES / "function-calling" / task_id
        for rel in ("functions.json", "question.json"):
            assert (task / "environment" / rel).is_file()
        for rel in ("possible_answer.json", "check.py", "functions.json"):
            assert (task / "tests" / rel).is_file()


# --------------------------------------------------------------------------- execution


@pytest.mark.bwrap
@pytest.mark.parametrize("task", ALL_TASKS)
def test_oracle_passes_and_untouched_environment_fails(
    task: Path, tmp_path: Path, sandboxed: None
) -> None:
    reward, log = run_task(task, tmp_path / "oracle", solve=True)
    assert reward == 1.0, f"oracle did not pass:\n{log}"
    reward, log = run_task(task, tmp_path / "null", solve=False)
    assert reward == 0.0, f"untouched environment did not fail:\n{log}"


# --------------------------------------------------------------------------- configs


@pytest.mark.parametrize(
    ("config_name", "split"),
    [
        ("terminal-optimize.json", "optimize"),
        ("terminal-held-out.json", "held_out"),
        ("function-calling-optimize.json", "optimize"),
        ("function-calling-held-out.json", "held_out"),
    ],
)
def test_example_suite_configs_select_their_split(config_name: str, split: str) -> None:
    config = load_suite_config(SUITES / config_name)
    assert config.tasks_dir.is_absolute() and config.tasks_dir.is_dir()
    assert config.split_id == split
    tasks = suite_tasks(config)
    manifest = load_suite_manifest(config.tasks_dir)
    assert [t.name for t in tasks] == manifest.splits[split]
    assert all((t / "task.toml").is_file() for t in tasks)


def write_config(tmp_path: Path, data: dict, name: str = "suite.config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def suite_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "suites" / "terminal"
    shutil.copytree(SUITES / "terminal", dest)
    return dest


def test_relative_tasks_dir_resolves_against_the_config_file(
    tmp_path: Path, suite_copy: Path
) -> None:
    path = write_config(
        tmp_path / "suites",
        {"name": "t", "tasks_dir": "terminal", "split_id": "held_out", "concurrency": 3},
    )
    config = load_suite_config(path)
    assert config.tasks_dir == suite_copy.resolve()
    assert config.concurrency == 3
    assert config.max_steps_per_task == 30 and config.task_timeout_s == 600.0
    assert config.command_timeout_s == 60.0
    assert len(suite_tasks(config)) == 5


def test_explicit_task_ids_within_the_split(tmp_path: Path, suite_copy: Path) -> None:
    path = write_config(
        tmp_path / "suites",
        {
            "name": "t",
            "tasks_dir": "terminal",
            "split_id": "optimize",
            "task_ids": ["rename-photos", "count-error-lines"],
        },
    )
    tasks = suite_tasks(load_suite_config(path))
    assert [t.name for t in tasks] == ["rename-photos", "count-error-lines"]


def test_task_ids_without_split_and_all_tasks_without_either(
    tmp_path: Path, suite_copy: Path
) -> None:
    explicit = SuiteConfig(name="t", tasks_dir=suite_copy, task_ids=["checksum-file"])
    assert [t.name for t in suite_tasks(explicit)] == ["checksum-file"]
    everything = SuiteConfig(name="t", tasks_dir=suite_copy)
    assert len(suite_tasks(everything)) == 15


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"name": "t", "tasks_dir": "terminal", "bogus": 1}, "bogus", "unknown field"),
        ({"tasks_dir": "terminal"}, "name", "required field is missing"),
        ({"name": "t", "tasks_dir": "terminal", "concurrency": 0}, "concurrency", ""),
        ({"name": "t", "tasks_dir": "terminal", "task_timeout_s": "x"}, "task_timeout_s", ""),
        ({"name": "t", "tasks_dir": "nowhere"}, "tasks_dir", "not found"),
        ({"name": "t", "tasks_dir": "terminal", "split_id": "test"}, "split_id", "no split"),
        (
            {
                "name": "t",
                "tasks_dir": "terminal",
                "split_id": "optimize",
                "task_ids": ["checksum-file"],
            },
            "task_ids",
            "not in split",
        ),
        ({"name": "t", "tasks_dir": "terminal", "task_ids": ["missing"]}, "task_ids", "not found"),
        ({"name": "t", "tasks_dir": "terminal", "task_ids": ["../x"]}, "task_ids", "invalid"),
    ],
)
def test_bad_suite_configs_name_file_and_field(
    tmp_path: Path, suite_copy: Path, data: dict, field: str, message: str
) -> None:
    path = write_config(tmp_path / "suites", data)
    with pytest.raises(ConfigError) as info:
        load_suite_config(path)
    assert info.value.file == str(path)
    assert info.value.field == field
    assert message in str(info.value)


def test_unreadable_suite_config(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid JSON") as info:
        load_suite_config(path)
    assert info.value.file == str(path)
    with pytest.raises(ConfigError, match="not found"):
        load_suite_config(tmp_path / "absent.json")


def test_manifest_with_overlapping_splits_is_rejected(suite_copy: Path) -> None:
    manifest = json.loads((suite_copy / "suite.json").read_text())
    manifest["splits"]["held_out"].append(manifest["splits"]["optimize"][0])
    (suite_copy / "suite.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="in splits 'optimize' and 'held_out'") as info:
        load_suite_manifest(suite_copy)
    assert info.value.field == "splits.held_out"


def test_manifest_naming_a_missing_task_is_rejected(suite_copy: Path) -> None:
    manifest = json.loads((suite_copy / "suite.json").read_text())
    manifest["splits"]["optimize"].append("ghost-task")
    (suite_copy / "suite.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="'ghost-task' not found") as info:
        load_suite_manifest(suite_copy)
    assert info.value.field == "splits.optimize"
