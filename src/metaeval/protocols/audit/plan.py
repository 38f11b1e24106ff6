"""What an audit covers: the task directories of a benchmark, narrowed by `--task`, and the
(task, source) cells they hold: the static source on every task, each model on the tasks it
audits."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from metaeval.errors import ConfigError
from metaeval.protocols.audit.summary import STATIC_SOURCE
from metaeval.tasks.task_dirs import discover_tasks


def plan_tasks(
    bench_dir: Path, task_filter: Sequence[str] = ()
) -> tuple[list[Path], list[tuple[str, str]]]:
    """The task directories to audit (`task_filter` narrows them, by task id) and the
    directories skipped with why; a filter naming no task, or no task at all, is refused."""
    task_dirs, skipped = discover_tasks(bench_dir)
    if task_filter:
        wanted = set(task_filter)
        ids = {str(d.relative_to(bench_dir).as_posix()): d for d in task_dirs}
        unknown = sorted(wanted - set(ids))
        if unknown:
            raise ConfigError(f"no such task(s): {', '.join(unknown)}", field="task")
        task_dirs = [d for t, d in ids.items() if t in wanted]
    if not task_dirs:
        raise ConfigError("no task directories (with task.toml) found", file=str(bench_dir))
    return task_dirs, skipped


def cell_keys(
    task_ids: Sequence[str],
    models: Sequence[str],
    *,
    static_only: bool = False,
    model_tasks: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """The (task id, source) key of every cell, task by task: the static source always,
    then each model unless `static_only`, or unless `model_tasks` (None: every task)
    leaves the task out. A task id in `model_tasks` that is not audited is refused."""
    unknown = sorted(set(model_tasks or []) - set(task_ids))
    if unknown:
        raise ConfigError(f"no such task(s): {', '.join(unknown)}", field="model_tasks")
    keys: list[tuple[str, str]] = []
    for task_id in task_ids:
        keys.append((task_id, STATIC_SOURCE))
        if static_only or (model_tasks is not None and task_id not in model_tasks):
            continue
        keys += [(task_id, model) for model in models]
    return keys
