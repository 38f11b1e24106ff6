"""What an audit covers: the task directories of a benchmark, narrowed by `--task`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from metaeval.errors import ConfigError
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
