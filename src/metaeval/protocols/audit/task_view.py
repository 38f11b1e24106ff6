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
left out. Every shortening or omission is described in `cuts`.

Hints (`benchguard_hints.yaml` at the benchmark root) are described at `load_hints`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from metaeval.errors import ConfigError
from metaeval.tasks.safe_files import (
    TreeEntry,
    classify,
    is_inside,
    open_checked,
    read_regular,
    walk_tree,
)
from metaeval.tasks.task_dirs import (
    AGENT_RESULTS_DIR,
    IGNORED_DIR_NAMES,
    MAX_CONFIG_BYTES,
    TASK_CONFIG,
    discover_tasks,
    parse_task_toml,
)
from metaeval.tasks.toml_schema import unknown_keys

InputTier = Literal["minimal", "definition", "execution"]
Role = Literal["instruction", "tests", "solution", "environment", "docs", "agent", "other"]

HINTS_FILE = "benchguard_hints.yaml"
DOC_FILES = ("domain_knowledge.md", "data_description.md")
BINARY_SNIFF_BYTES = 8192
MIN_BUDGET_SHARE = 512
"""Below this many bytes of task budget left, a file is omitted instead of shortened."""


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


# --------------------------------------------------------------------------- hints


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
    where = str(path)
    kind, detail = classify(path, bench_root)
    if kind == "outside_link":
        raise ConfigError(f"symlink leading outside the benchmark ({detail}), not read", file=where)
    if kind not in ("file", "link"):
        raise ConfigError("not a regular file, not read", file=where)
    import yaml  # about 20 ms to import; most benchmarks have no hints file

    try:
        text = read_regular(path, bench_root, max_bytes=MAX_CONFIG_BYTES).decode("utf-8")
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read hints: {exc}", file=where) from exc
    except RecursionError as exc:
        raise ConfigError("cannot read hints: nested too deeply", file=where) from exc
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
    tasks: dict[str, str] = {}
    raw_tasks = data.get("tasks") or {}
    if not isinstance(raw_tasks, dict):
        raise ConfigError("expected a mapping of task id to hint", file=where, field="tasks")
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
    return Hints(general=general, tasks=tasks, local=sorted(local), source=path)


def _string_list(value: Any, where: str, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError("expected a list of task ids", file=where, field=field)
    return list(value)


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
    try:
        fd = open_checked(path)  # a file the walk found regular; refused if it changed since
    except OSError as exc:
        task.skipped_files.append(f"{rel}: unreadable ({exc.strerror or exc})")
        return 0
    try:
        return _deliver_open(task, rel, role, fd, max_file_bytes, max_task_bytes, used)
    finally:
        os.close(fd)


def _deliver_open(
    task: LoadedTask,
    rel: str,
    role: Role,
    fd: int,
    max_file_bytes: int,
    max_task_bytes: int,
    used: int,
) -> int:
    try:
        size = os.fstat(fd).st_size
    except OSError as exc:
        task.skipped_files.append(f"{rel}: unreadable ({exc.strerror or exc})")
        return 0
    remaining = max_task_bytes - used
    cap = max(0, min(max_file_bytes, remaining))
    if size > cap and remaining < MIN_BUDGET_SHARE:
        try:
            head = _read_range(fd, 0, min(size, BINARY_SNIFF_BYTES))
        except OSError as exc:
            task.skipped_files.append(f"{rel}: unreadable ({exc.strerror or exc})")
            return 0
        if b"\0" in head:
            task.skipped_files.append(f"{rel}: binary (NUL byte in the first 8 KiB)")
            return 0
        task.cuts.append(
            f"{rel}: omitted ({size} bytes): the task budget of {max_task_bytes} bytes is used up"
        )
        return 0
    try:
        if size <= cap:
            head_window = tail_window = _read_range(fd, 0, size)
            total_newlines = 0
        else:
            head_window = _read_range(fd, 0, min(size, cap))
            tail_window = _read_range(fd, max(0, size - cap), min(size, cap))
            total_newlines = _count_newlines(fd)
    except OSError as exc:
        task.skipped_files.append(f"{rel}: unreadable ({exc.strerror or exc})")
        return 0
    if b"\0" in head_window[:BINARY_SNIFF_BYTES]:
        task.skipped_files.append(f"{rel}: binary (NUL byte in the first 8 KiB)")
        return 0

    if size <= cap:
        try:
            text = head_window.decode("utf-8")
        except UnicodeDecodeError as exc:
            task.skipped_files.append(f"{rel}: binary (not UTF-8 at byte {exc.start})")
            return 0
        delivered = len(head_window)
        task.files.append(
            TaskFile(path=rel, role=role, text=text, raw_bytes=size, delivered_bytes=delivered)
        )
        return delivered

    try:
        text, kept = shorten_text(head_window, tail_window, size, total_newlines, cap)
    except UnicodeDecodeError as exc:
        task.skipped_files.append(f"{rel}: binary (not UTF-8 at byte {exc.start})")
        return 0
    delivered = len(text.encode("utf-8"))
    task.files.append(
        TaskFile(
            path=rel,
            role=role,
            text=text,
            raw_bytes=size,
            delivered_bytes=delivered,
            truncated=True,
        )
    )
    if cap == max_file_bytes:
        why = f"file cap {max_file_bytes} bytes"
    else:
        why = f"task budget: {remaining} of {max_task_bytes} bytes left"
    task.cuts.append(
        f"{rel}: shortened from {size} to {kept} bytes of content, {size - kept} omitted ({why})"
    )
    return delivered


def shorten_text(
    head_window: bytes, tail_window: bytes, size: int, total_newlines: int, cap: int
) -> tuple[str, int]:
    """Head and tail of a file around one marker line; returns (text, content bytes kept).

    `head_window` starts at the file's first byte and `tail_window` ends at its last (each
    at least `cap` bytes long, or the whole file). The head gets ceil(cap/2) bytes and the
    tail floor(cap/2), each cut back to a line boundary when the piece holds one (else to a
    UTF-8 character boundary). The marker line reads
    `[... metaeval: N bytes omitted (lines A-B of L) ...]`; the line numbers appear only
    when both cuts fell on line boundaries. Raises UnicodeDecodeError for non-UTF-8 pieces.
    """
    head_budget = cap - cap // 2
    tail_budget = cap // 2
    head = head_window[:head_budget]
    head_on_line = head.endswith(b"\n")
    if not head_on_line and b"\n" in head:
        head = head[: head.rindex(b"\n") + 1]
        head_on_line = True
    elif not head_on_line:
        head = _trim_utf8_end(head)

    tail = tail_window[len(tail_window) - tail_budget :] if tail_budget else b""
    start = len(tail_window) - len(tail)
    tail_on_line = start > 0 and tail_window[start - 1 : start] == b"\n"
    if tail and not tail_on_line and b"\n" in tail[:-1]:
        tail = tail[tail.index(b"\n") + 1 :]
        tail_on_line = True
    elif not tail_on_line:
        tail = _trim_utf8_start(tail)
    if not tail:
        tail_on_line = True

    kept = len(head) + len(tail)
    omitted = size - kept
    total_lines = total_newlines + (0 if tail_window.endswith(b"\n") or size == 0 else 1)
    if head_on_line and tail_on_line:
        first = head.count(b"\n") + 1
        tail_lines = tail.count(b"\n") + (0 if not tail or tail.endswith(b"\n") else 1)
        last = total_lines - tail_lines
        detail = f" (lines {first}-{last} of {total_lines})"
    else:
        detail = ""
    marker = f"[... metaeval: {omitted} bytes omitted{detail} ...]\n"
    if not head_on_line and head:
        marker = "\n" + marker
    return head.decode("utf-8") + marker + tail.decode("utf-8"), kept


def _trim_utf8_end(data: bytes) -> bytes:
    """Drop an incomplete multi-byte character at the end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # ASCII or the lead byte of a sequence
            length = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if length <= back else data[:-back]
    return data


def _trim_utf8_start(data: bytes) -> bytes:
    """Drop continuation bytes of a character cut at the start."""
    skip = 0
    while skip < len(data) and skip < 3 and data[skip] & 0xC0 == 0x80:
        skip += 1
    return data[skip:]


def _read_range(fd: int, offset: int, length: int) -> bytes:
    """`length` bytes of an open file from `offset` (fewer at its end)."""
    parts = []
    while length > 0:
        chunk = os.pread(fd, min(length, 1 << 20), offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(parts)


def _count_newlines(fd: int) -> int:
    count = 0
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        count += chunk.count(b"\n")
        offset += len(chunk)
    return count
