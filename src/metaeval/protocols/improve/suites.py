"""Task suites for IMPROVE (AIE Bench Sections 3.3-3.4, Appendix C.3: the suite config layer).

A suite is a directory of Harbor tasks with a `suite.json` manifest naming its splits:

    {"name": "terminal",
     "splits": {"optimize": ["count-error-lines", ...], "held_out": ["checksum-file", ...]}}

(an optional "description" is allowed). The optimize split is what a meta-agent may see
results of; the held-out split is reserved for validation. Splits are disjoint, and every
task id names a task directory (holding task.toml) under the suite directory.

A suite config (JSON) selects one slice of a suite and fixes the target-agent evaluation
budget for it:

    {"name": "terminal-optimize", "tasks_dir": "terminal", "split_id": "optimize",
     "concurrency": 2, "max_steps_per_task": 30, "task_timeout_s": 300,
     "command_timeout_s": 60}

`tasks_dir` is resolved relative to the config file. `task_ids`, when given, lists the
tasks explicitly (with a `split_id` as well, they must all belong to that split, so a config
cannot reach into the held-out split by naming tasks). With neither, the suite is every task
the manifest's splits list.

A Harbor dataset directory as `harbor datasets download` writes it (Terminal-Bench 2.0,
`bfcl_parity@1.0`) has no `suite.json`: read as a suite, it is every task directory in it
(sorted by name), or the `task_ids` listed; it has no splits, so a `split_id` is refused.
A suite config names it as `tasks_dir`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from metaeval.config_files import load
from metaeval.errors import ConfigError
from metaeval.protocols.improve.episode_limits import EpisodeLimits
from metaeval.records.names import name_problem

MANIFEST = "suite.json"
MAX_STEPS = 100_000  # sane maxima (as in the experiment manifest)
MAX_SECONDS = 7 * 24 * 3600.0
TASK_CONFIG = "task.toml"
DEFAULT_STEPS = 30
DEFAULT_TASK_TIMEOUT_S = 600.0


class SuiteManifest(BaseModel):
    """A suite directory's `suite.json`: its name and its named splits of task ids."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    splits: dict[str, list[str]] = Field(min_length=1)

    def all_task_ids(self) -> list[str]:
        """Every task id of every split, in split order, without repeats."""
        return list(dict.fromkeys(t for ids in self.splits.values() for t in ids))


class SuiteConfig(BaseModel):
    """Which suite slice is evaluated and the per-candidate evaluation budget for it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    tasks_dir: Path
    split_id: str | None = None
    task_ids: list[str] | None = None
    concurrency: int = Field(default=1, ge=1, le=64)
    max_steps_per_task: int = Field(default=DEFAULT_STEPS, ge=1, le=MAX_STEPS)
    task_timeout_s: float = Field(default=DEFAULT_TASK_TIMEOUT_S, gt=0, le=MAX_SECONDS)
    command_timeout_s: float = Field(default=60.0, gt=0, le=MAX_SECONDS)

    def episode_limits(self, verifier_timeout_s: float | None = None) -> EpisodeLimits:
        """The bounds of each of this suite's episodes."""
        return EpisodeLimits(
            max_steps=self.max_steps_per_task,
            task_timeout_s=self.task_timeout_s,
            command_timeout_s=self.command_timeout_s,
            verifier_timeout_s=verifier_timeout_s,
        )


def load_suite_config(path: Path) -> SuiteConfig:
    """Read a suite config (JSON); `tasks_dir` comes back absolute.

    Raises ConfigError naming the file and the offending field for unreadable JSON, unknown
    or missing fields, wrong types, a missing tasks directory, or task ids / a split the
    suite does not have.
    """
    where = str(path)
    if Path(path).is_dir() and ((Path(path) / MANIFEST).is_file() or dataset_task_ids(Path(path))):
        config = SuiteConfig(name=Path(path).resolve().name, tasks_dir=Path(path).resolve())
        suite_tasks(config, source=where)
        return config
    if not Path(path).exists():
        raise ConfigError("suite config not found", file=where)
    config = load(path, SuiteConfig)
    tasks_dir = config.tasks_dir
    if not tasks_dir.is_absolute():
        tasks_dir = Path(path).resolve().parent / tasks_dir
    config.tasks_dir = tasks_dir.resolve()
    if not config.tasks_dir.is_dir():
        raise ConfigError(
            f"tasks directory not found: {config.tasks_dir}", file=where, field="tasks_dir"
        )
    suite_tasks(config, source=where)  # validates split and task ids now, not mid-run
    return config


def load_suite_manifest(tasks_dir: Path) -> SuiteManifest:
    """Read and check `<tasks_dir>/suite.json`: disjoint splits of existing task ids."""
    path = Path(tasks_dir) / MANIFEST
    where = str(path)
    if not path.exists():
        raise ConfigError("suite manifest not found", file=where)
    manifest = load(path, SuiteManifest)
    owner: dict[str, str] = {}
    for split, ids in manifest.splits.items():
        for task_id in ids:
            field = f"splits.{split}"
            if task_id in owner:
                other = owner[task_id]
                detail = "twice" if other == split else f"in splits {other!r} and {split!r}"
                raise ConfigError(f"task {task_id!r} is listed {detail}", file=where, field=field)
            owner[task_id] = split
            _check_task_dir(Path(tasks_dir), task_id, where, field)
    return manifest


def suite_tasks(config: SuiteConfig, *, source: str | None = None) -> list[Path]:
    """The task directories a suite config selects, in listed order.

    From `task_ids` when given (each must exist, and belong to `split_id` when that is set
    too), else from the split `split_id` of the suite's suite.json, else every task its
    splits list.
    """
    where = source or str(config.tasks_dir)
    root = Path(config.tasks_dir)
    if not (root / MANIFEST).exists() and (config.split_id is not None or config.task_ids is None):
        return _dataset_tasks(config, where)
    manifest: SuiteManifest | None = None
    if config.split_id is not None or config.task_ids is None:
        manifest = load_suite_manifest(root)
    split_ids: list[str] | None = None
    if config.split_id is not None:
        assert manifest is not None
        if config.split_id not in manifest.splits:
            known = ", ".join(sorted(manifest.splits))
            raise ConfigError(
                f"suite {manifest.name!r} has no split {config.split_id!r} (it has: {known})",
                file=where,
                field="split_id",
            )
        split_ids = manifest.splits[config.split_id]
    if config.task_ids is not None:
        if not config.task_ids:
            raise ConfigError("task_ids is empty", file=where, field="task_ids")
        if len(set(config.task_ids)) != len(config.task_ids):
            raise ConfigError("task_ids lists a task twice", file=where, field="task_ids")
        for task_id in config.task_ids:
            if split_ids is not None and task_id not in split_ids:
                raise ConfigError(
                    f"task {task_id!r} is not in split {config.split_id!r}",
                    file=where,
                    field="task_ids",
                )
            _check_task_dir(root, task_id, where, "task_ids")
        ids = list(config.task_ids)
    elif split_ids is not None:
        ids = list(split_ids)
    else:
        assert manifest is not None
        ids = manifest.all_task_ids()
    return [root / task_id for task_id in ids]


def dataset_task_ids(root: Path) -> list[str]:
    """The tasks of a Harbor dataset directory: each subdirectory holding task.toml, sorted."""
    return sorted(
        p.name for p in Path(root).iterdir() if p.is_dir() and (p / TASK_CONFIG).is_file()
    )


def _dataset_tasks(config: SuiteConfig, where: str) -> list[Path]:
    """Every task of a Harbor dataset directory without suite.json (Terminal-Bench 2.0 or
    BFCL Parity as `harbor datasets download` writes them; `task_ids` selects some of them,
    in `suite_tasks`). Such a directory has no splits, so a `split_id` is refused."""
    root = Path(config.tasks_dir)
    if config.split_id is not None:
        raise ConfigError(
            f"{root} has no {MANIFEST}, so it has no split {config.split_id!r}: drop split_id "
            f"to take every task, or list task_ids",
            file=where,
            field="split_id",
        )
    ids = dataset_task_ids(root)
    if not ids:
        raise ConfigError(
            f"no {MANIFEST} and no task directories (holding {TASK_CONFIG}) in {root}",
            file=where,
            field="tasks_dir",
        )
    for task_id in ids:
        _check_task_dir(root, task_id, where, "tasks_dir")
    return [root / task_id for task_id in ids]


def _check_task_dir(root: Path, task_id: str, where: str, field: str) -> None:
    problem = name_problem(task_id)
    if problem is not None:
        raise ConfigError(f"invalid task id: {problem}", file=where, field=field)
    if not (root / task_id / TASK_CONFIG).is_file():
        raise ConfigError(
            f"task {task_id!r} not found (no {TASK_CONFIG} under {root / task_id})",
            file=where,
            field=field,
        )
    _check_task_files(root / task_id, where, field)


def _check_task_files(task: Path, where: str, field: str) -> None:
    """A task that cannot be evaluated fails the same way on every candidate and every resume,
    so it is refused here, before anything runs, instead of becoming an infra error each time."""
    for rel in ("instruction.md", "tests/test.sh"):
        if not (task / rel).is_file():
            raise ConfigError(f"task {task.name!r} has no {rel}", file=where, field=field)
    toml_path = task / TASK_CONFIG
    try:
        tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(
            f"task {task.name!r}: {TASK_CONFIG} does not parse: {exc}", file=where, field=field
        ) from exc
