"""The auditor's view of a Harbor task: what an auditor sees of one task, and the loader.

A benchmark is a directory of Harbor tasks (BenchGuard Appendix C), found by
`metaeval.tasks.task_dirs.discover_tasks`; `load_task` turns one into a
`LoadedTask`: the parsed config, the keys Harbor would silently drop, and the text files an
auditor sees, in a fixed order and within size caps.

File order (each directory's key file first, the rest alphabetical by relative path):

1. `instruction.md` (role instruction)
2. `task.toml` (role other; the auditors' view of timeouts, resources, network)
3. `tests/` (role tests): `tests/test.sh`, then the rest
4. `solution/` (role solution, tiers definition and execution): `solution/solve.sh` first
5. `environment/` (role environment): `environment/Dockerfile` first
6. `domain_knowledge.md`, `data_description.md` (role docs)
7. other files at the task root (role other)
8. tier execution only: agent results from `<agent_results>/<task_id>/` (role agent),
   delivered as `agent/<relative path>`: the agent's program, evaluation result, log.

Binary files (a NUL byte in the first 8 KiB, or not UTF-8) are skipped and listed in
`skipped_files`. Caps: a file longer than `max_file_bytes` keeps its head and tail (cut at
line boundaries where possible) around one marker line saying how many bytes and which
lines were left out; the cap counts file content, the marker line comes on top. Once the
task's delivered bytes reach `max_task_bytes`, later files are shortened to what is left or
left out. Every shortening or omission is described in `cuts` (`task_delivery.py` reads one
file within the caps).

Hints (`benchguard_hints.yaml` at the benchmark root) are described in `task_hints.py`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from metaeval.errors import ConfigError
from metaeval.protocols.audit.task_delivery import deliver_file
from metaeval.protocols.audit.task_hints import Hints, load_hints
from metaeval.tasks.safe_files import TreeEntry, classify, is_inside, walk_tree
from metaeval.tasks.task_dirs import (
    AGENT_RESULTS_DIR,
    IGNORED_DIR_NAMES,
    TASK_CONFIG,
    discover_tasks,
    parse_task_toml,
)
from metaeval.tasks.toml_schema import unknown_keys

InputTier = Literal["minimal", "definition", "execution"]
Role = Literal["instruction", "tests", "solution", "environment", "docs", "agent", "other"]

DOC_FILES = ("domain_knowledge.md", "data_description.md")


class TaskFile(BaseModel):
    """One text file of a task, as delivered to auditors (possibly shortened)."""

    path: str  # task-relative, posix, e.g. "tests/test.sh"
    role: Role
    text: str  # delivered text (shortened when over the cap)
    raw_bytes: int
    delivered_bytes: int
    truncated: bool = False

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()


class LoadedTask(BaseModel):
    """A task directory loaded for auditing."""

    task_id: str
    root: Path
    tier: InputTier = "definition"
    config: dict[str, Any] = Field(default_factory=dict)  # parsed task.toml
    config_error: str | None = None  # set when task.toml did not parse
    unknown_keys: list[str] = Field(default_factory=list)  # dotted keys Harbor would drop
    files: list[TaskFile] = Field(default_factory=list)  # in deterministic order
    skipped_files: list[str] = Field(default_factory=list)  # binary or unreadable, with reason
    outside_links: list[str] = Field(
        default_factory=list
    )  # "rel -> target": links leaving the task
    special_files: list[str] = Field(default_factory=list)  # "rel (FIFO)": never opened
    missing_files: list[str] = Field(default_factory=list)  # required files not present
    cuts: list[str] = Field(default_factory=list)  # size-cap cuts, human-readable
    hints: str = ""  # benchguard_hints.yaml guidance for this task (benchmark + task level)

    def file(self, path: str) -> TaskFile | None:
        """The loaded file at a task-relative path, if any."""
        return next((f for f in self.files if f.path == path), None)

    def by_role(self, role: str) -> list[TaskFile]:
        return [f for f in self.files if f.role == role]


# --------------------------------------------------------------------------- loading


def load_task(
    task_dir: Path,
    *,
    tier: InputTier = "definition",
    bench_root: Path | None = None,
    agent_results: Path | None = None,
    max_file_bytes: int = 60_000,
    max_task_bytes: int = 200_000,
    hints: Hints | None = None,
) -> LoadedTask:
    """Load one task directory; problems with the task are recorded, never raised.

    `bench_root` (default: the task's parent) fixes the task id, the directory path
    relative to it. `agent_results` is the directory holding `<task_id>/` result folders
    (default `<bench_root>/agent_results`), read for tier execution only. `hints` defaults
    to the benchmark's benchguard_hints.yaml (a malformed hints file raises ConfigError:
    it is a benchmark-level error, not a task-level one).
    """
    if tier not in ("minimal", "definition", "execution"):
        raise ConfigError(f"unknown input tier {tier!r}", field="tier")
    root = Path(task_dir).resolve()
    if not root.is_dir():
        raise ConfigError("task directory not found", file=str(task_dir))
    bench = Path(bench_root).resolve() if bench_root is not None else root.parent
    task_id = _task_id(root, bench)
    if hints is None:
        hints = load_hints(bench)
    task = LoadedTask(task_id=task_id, root=root, tier=tier, hints=hints.for_task(task_id))
    _load_config(task)

    if not (root / "instruction.md").is_file():
        task.missing_files.append("instruction.md")
    if not (root / "tests" / "test.sh").is_file():
        task.missing_files.append("tests/test.sh")
    with_solution = tier in ("definition", "execution")
    if with_solution and not (root / "solution" / "solve.sh").is_file():
        task.missing_files.append("solution/solve.sh")

    sources: list[tuple[str, Role, Path]] = []
    sources += _single(task, "instruction.md", "instruction")
    sources += _single(task, TASK_CONFIG, "other")
    sources += _tree(task, "tests", "tests", first="test.sh")
    if with_solution:
        sources += _tree(task, "solution", "solution", first="solve.sh")
    sources += _tree(task, "environment", "environment", first="Dockerfile")
    for name in DOC_FILES:
        sources += _single(task, name, "docs")
    sources += _root_others(task)
    if tier == "execution":
        sources += _agent_results(task, bench, agent_results)

    used = 0
    for rel, role, path in sources:
        used += _deliver(task, rel, role, path, max_file_bytes, max_task_bytes, used)
    return task


def load_benchmark(
    bench_dir: Path, **kwargs: Any
) -> tuple[list[LoadedTask], list[tuple[str, str]]]:
    """Discover and load every task of a benchmark (keyword arguments go to load_task)."""
    bench = Path(bench_dir).resolve()
    task_dirs, skipped = discover_tasks(bench)
    if "hints" not in kwargs:
        kwargs["hints"] = load_hints(bench)
    kwargs.setdefault("bench_root", bench)
    return [load_task(d, **kwargs) for d in task_dirs], skipped


def _task_id(root: Path, bench: Path) -> str:
    try:
        rel = root.relative_to(bench).as_posix()
    except ValueError:
        return root.name
    return rel if rel not in ("", ".") else root.name


def _load_config(task: LoadedTask) -> None:
    path = task.root / TASK_CONFIG
    kind, detail = classify(path, task.root)
    if kind == "outside_link":
        task.outside_links.append(f"{TASK_CONFIG} -> {detail}")
        task.config_error = "task.toml: symlink outside the task, not read"
        return
    if kind == "special":
        task.special_files.append(f"{TASK_CONFIG} ({detail})")
        task.config_error = f"task.toml: not a regular file ({detail}), not read"
        return
    if kind not in ("file", "link"):
        task.missing_files.append(TASK_CONFIG)
        task.config_error = "task.toml: file not found"
        return
    task.config, task.config_error = parse_task_toml(path, task.root)
    task.unknown_keys = unknown_keys(task.config)


def _single(task: LoadedTask, name: str, role: Role) -> list[tuple[str, Role, Path]]:
    path = task.root / name
    if not os.path.lexists(path):
        return []
    kind, detail = classify(path, task.root)
    if kind in ("file", "link"):
        return [(name, role, path)]
    _note_unusable(task, name, kind, detail)
    return []


def _note_unusable(task: LoadedTask, rel: str, kind: str, detail: str) -> None:
    """Record an entry that is neither a file nor a directory metaeval may read."""
    if kind == "outside_link":
        if f"{rel} -> {detail}" not in task.outside_links:  # task.toml is met twice
            task.outside_links.append(f"{rel} -> {detail}")
        task.skipped_files.append(f"{rel}: symlink outside the task")
    elif kind == "special":
        task.special_files.append(f"{rel} ({detail})")
        task.skipped_files.append(f"{rel}: not a regular file ({detail}), not opened")
    elif kind == "dangling_link":
        task.skipped_files.append(f"{rel}: dangling symlink")
    elif kind == "link_dir":
        task.skipped_files.append(f"{rel}/: symlinked directory not followed")
    elif kind == "error":
        task.skipped_files.append(f"{rel}: unreadable ({detail})")


def _tree(
    task: LoadedTask, dirname: str, role: Role, *, first: str
) -> list[tuple[str, Role, Path]]:
    directory = task.root / dirname
    kind, detail = classify(directory, task.root)
    if kind != "dir":
        if kind != "error" or os.path.lexists(directory):
            _note_unusable(task, dirname, kind, detail)
        return []
    entries = list(_walk_files(directory, task, label_prefix=f"{dirname}/", boundary=task.root))
    entries.sort(key=lambda item: (item[0] != first, item[0]))
    return [(f"{dirname}/{rel}", role, path) for rel, path in entries]


def _root_others(task: LoadedTask) -> list[tuple[str, Role, Path]]:
    known = {TASK_CONFIG, "instruction.md", *DOC_FILES, "tests", "solution", "environment"}
    found: list[tuple[str, Role, Path]] = []
    for entry in sorted(os.scandir(task.root), key=lambda e: e.name):
        if entry.name in known or entry.name.startswith("."):
            continue
        kind, detail = classify(entry.path, task.root)
        if kind in ("file", "link"):
            found.append((entry.name, "other", Path(entry.path)))
        elif kind in ("outside_link", "special", "dangling_link"):
            _note_unusable(task, entry.name, kind, detail)
    return found


def _agent_results(
    task: LoadedTask, bench: Path, agent_results: Path | None
) -> list[tuple[str, Role, Path]]:
    """The files of `<results root>/<task_id>/`, as `agent/<rel>` sources.

    The boundary is the results root itself (its real path when given explicitly; the
    benchmark when it is the default `<bench>/agent_results`): a task folder, or a folder on
    its way, that is a symlink leading out of it is refused, and so is every link below it
    that leaves it. What is refused goes to `skipped_files` (shown to auditors as not shown),
    not to the task's findings: agent results are not part of the benchmark.
    """
    if agent_results is not None:
        boundary = Path(os.path.realpath(agent_results))
        results_root = boundary
    else:
        boundary, results_root = bench, bench / AGENT_RESULTS_DIR
    agent_dir = results_root / task.task_id
    label = f"{AGENT_RESULTS_DIR}/{task.task_id}/"
    kind, detail = classify(agent_dir, boundary)
    if kind == "dir" and not is_inside(boundary, agent_dir):
        kind = "outside_link"  # a folder on the way is a symlink leading out
        detail = os.path.realpath(agent_dir)
    if kind == "error" and not os.path.lexists(agent_dir):
        task.missing_files.append(label)
        return []
    if kind not in ("dir", "link_dir"):
        reason = TreeEntry(label, agent_dir, kind, detail).describe()
        if kind == "file":
            reason = "not a directory"
        elif kind == "outside_link":
            reason = f"symlink leading outside the agent results ({detail})"
        task.skipped_files.append(f"agent/: {label} not read: {reason}")
        return []
    real = Path(os.path.realpath(agent_dir))
    found: list[tuple[str, Role, Path]] = []
    for entry in walk_tree(real, boundary=boundary, ignore_dirs=IGNORED_DIR_NAMES):
        if entry.kind in ("file", "link"):
            found.append((f"agent/{entry.rel}", "agent", entry.path))
        elif entry.kind not in ("dir", "link_dir"):
            task.skipped_files.append(f"agent/{entry.rel}: {entry.describe()}")
    return found


def _walk_files(
    directory: Path,
    task: LoadedTask | None,
    label_prefix: str = "",
    boundary: Path | None = None,
) -> Iterator[tuple[str, Path]]:
    """(relative posix path, path) of the regular files below `directory`, sorted.

    Symlinks are followed only to regular files inside `boundary` (default `directory`);
    symlinked directories are not entered; links leading outside and special files are
    recorded on `task` and never opened.
    """
    for entry in walk_tree(
        directory, boundary=boundary or directory, ignore_dirs=IGNORED_DIR_NAMES
    ):
        if entry.kind in ("file", "link"):
            yield entry.rel, entry.path
        elif entry.kind != "dir" and task is not None:
            if entry.kind == "link_dir":
                continue  # not followed, as before: its files are reached through their own path
            _note_unusable(task, f"{label_prefix}{entry.rel}", entry.kind, entry.detail)


def _deliver(
    task: LoadedTask,
    rel: str,
    role: Role,
    path: Path,
    max_file_bytes: int,
    max_task_bytes: int,
    used: int,
) -> int:
    """Read one file into `task.files` within the caps; returns the bytes delivered."""
    got = deliver_file(
        path, rel, max_file_bytes=max_file_bytes, max_task_bytes=max_task_bytes, used=used
    )
    if got.skipped is not None:
        task.skipped_files.append(got.skipped)
    if got.text is not None:
        task.files.append(
            TaskFile(
                path=rel,
                role=role,
                text=got.text,
                raw_bytes=got.raw_bytes,
                delivered_bytes=got.delivered_bytes,
                truncated=got.truncated,
            )
        )
    if got.cut is not None:
        task.cuts.append(got.cut)
    return got.delivered_bytes
