"""A benchmark's `benchguard_hints.yaml`: guidance for the auditors and tasks marked local.

The file sits at the benchmark root; `load_hints` reads and checks it (schema at `Hints`),
`Hints.for_task` gives the text one task's auditors see (`LoadedTask.hints`), and
`Hints.is_local` tells the execution checks which tasks may run without their image.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from metaeval.errors import ConfigError
from metaeval.tasks.safe_files import classify, read_regular
from metaeval.tasks.task_dirs import MAX_CONFIG_BYTES

HINTS_FILE = "benchguard_hints.yaml"


class Hints(BaseModel):
    """Parsed `benchguard_hints.yaml`.

    Schema (every key optional)::

        general: |                      # benchmark-level guidance, given to every task
          Input files are mounted at /app at run time.
        local: [task-a, group/task-b]   # tasks that run without Docker
        tasks:                          # per-task guidance, keyed by task id
          task-a: "Plain text hint."    # short form: just the text
          group/task-b:                 # long form
            hint: "Text for this task."
            local: true                 # same meaning as listing it under `local`

    A task marked local can be executed in metaeval's container-like sandbox even though it
    ships an environment/Dockerfile (the Dockerfile only documents the image).
    """

    general: str = ""
    tasks: dict[str, str] = Field(default_factory=dict)
    local: list[str] = Field(default_factory=list)
    source: Path | None = None

    def for_task(self, task_id: str) -> str:
        """The hint text for one task: the benchmark-level text, then the task's own."""
        parts = [self.general.strip(), self.tasks.get(task_id, "").strip()]
        return "\n\n".join(part for part in parts if part)

    def is_local(self, task_id: str) -> bool:
        return task_id in self.local

    def unknown_task_ids(self, known: set[str]) -> list[str]:
        """Task ids named in the hints that are not among `known` (likely typos)."""
        named = set(self.tasks) | set(self.local)
        return sorted(named - known)


def load_hints(bench_root: Path) -> Hints:
    """Read `<bench_root>/benchguard_hints.yaml`; no file gives empty hints.

    Raises ConfigError (naming the file and field) for malformed YAML or a wrong shape.
    """
    path = Path(bench_root) / HINTS_FILE
    if not os.path.lexists(path):
        return Hints()
    data = _read_yaml(path, bench_root)
    where = str(path)
    if data is None:
        return Hints(source=path)
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", file=where)
    extra = sorted(set(data) - {"general", "tasks", "local"})
    if extra:
        raise ConfigError(
            "unknown key (expected general, tasks, local)", file=where, field=extra[0]
        )
    general = data.get("general") or ""
    if not isinstance(general, str):
        raise ConfigError("expected text", file=where, field="general")
    local = _string_list(data.get("local"), where, "local")
    tasks = _task_hints(data.get("tasks") or {}, where, local)
    return Hints(general=general, tasks=tasks, local=sorted(local), source=path)


def _read_yaml(path: Path, bench_root: Path) -> Any:
    """The parsed hints file, read without following a link out of the benchmark."""
    where = str(path)
    kind, detail = classify(path, bench_root)
    if kind == "outside_link":
        raise ConfigError(f"symlink leading outside the benchmark ({detail}), not read", file=where)
    if kind not in ("file", "link"):
        raise ConfigError("not a regular file, not read", file=where)
    from metaeval.config_files import parse_yaml  # YAML: most benchmarks have no hints file

    try:
        text = read_regular(path, bench_root, max_bytes=MAX_CONFIG_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read hints: {exc}", file=where) from exc
    return parse_yaml(text, where)  # duplicate keys and alias bombs refused, naming the file


def _task_hints(raw_tasks: Any, where: str, local: list[str]) -> dict[str, str]:
    """The `tasks` mapping as task id -> hint text; a long-form entry marked `local: true`
    adds its task to `local`."""
    if not isinstance(raw_tasks, dict):
        raise ConfigError("expected a mapping of task id to hint", file=where, field="tasks")
    tasks: dict[str, str] = {}
    for task_id, entry in raw_tasks.items():
        field = f"tasks.{task_id}"
        if entry is None:
            entry = ""
        if isinstance(entry, str):
            tasks[str(task_id)] = entry
            continue
        if not isinstance(entry, dict):
            raise ConfigError("expected text or a mapping", file=where, field=field)
        bad = sorted(set(entry) - {"hint", "local"})
        if bad:
            raise ConfigError(
                "unknown key (expected hint, local)", file=where, field=f"{field}.{bad[0]}"
            )
        text = entry.get("hint") or ""
        if not isinstance(text, str):
            raise ConfigError("expected text", file=where, field=f"{field}.hint")
        is_local = entry.get("local", False)
        if not isinstance(is_local, bool):
            raise ConfigError("expected true or false", file=where, field=f"{field}.local")
        tasks[str(task_id)] = text
        if is_local and str(task_id) not in local:
            local.append(str(task_id))
    return tasks


def _string_list(value: Any, where: str, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError("expected a list of task ids", file=where, field=field)
    return list(value)
