"""Harbor task directories: finding the tasks of a benchmark, and reading a task.toml.

A benchmark is a directory of Harbor tasks; a task is any directory holding a `task.toml`
(BenchGuard Appendix C). What an auditor sees of a task is loaded by
`metaeval.protocols.audit.task_view`; the trial environments are in `metaeval.tasks.trial`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from metaeval.errors import ConfigError
from metaeval.safe_text import printable
from metaeval.tasks.safe_files import read_regular
from metaeval.tasks.toml_schema import network_setting

TASK_CONFIG = "task.toml"
AGENT_RESULTS_DIR = "agent_results"
IGNORED_DIR_NAMES = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".venv"})
NOT_UTF8 = "folder name is not UTF-8 (metaeval records names as UTF-8): rename it to audit it"
MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""A task.toml larger than this is not parsed (a config error)."""


# --------------------------------------------------------------------------- discovery


def discover_tasks(bench_dir: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Task directories under `bench_dir`, and the directories skipped, with the reason.

    A task is a directory holding task.toml, found at any depth (a task's own
    subdirectories are not searched further). Directories without a task anywhere below
    them are reported once, at their topmost level, as (relative posix path, "no
    task.toml"); a directory whose name is not UTF-8 is skipped (`NOT_UTF8`, its name shown
    with the undecodable bytes as ``\\xNN``). Hidden directories, caches and the benchmark's own `agent_results/`
    directory are not reported. Both lists are sorted.
    If `bench_dir` itself holds task.toml it is the only task.
    """
    root = Path(bench_dir)
    if not root.is_dir():
        raise ConfigError("benchmark directory not found", file=str(root))
    if (root / TASK_CONFIG).is_file():
        return [root], []
    tasks: list[Path] = []
    skipped: list[tuple[str, str]] = []
    _discover(root, root, tasks, skipped)
    return sorted(tasks, key=lambda p: p.relative_to(root).as_posix()), sorted(skipped)


def _discover(
    root: Path, directory: Path, tasks: list[Path], skipped: list[tuple[str, str]]
) -> bool:
    """Collect tasks below `directory`; True when at least one was found."""
    found_any = False
    for child in sorted(_subdirs(directory), key=lambda p: p.name):
        if not _utf8(child.name):  # records name tasks in UTF-8: one such folder is skipped
            skipped.append((printable(child.relative_to(root).as_posix()), NOT_UTF8))
            continue
        if (child / TASK_CONFIG).is_file():
            tasks.append(child)
            found_any = True
            continue
        inner_skipped: list[tuple[str, str]] = []
        if _discover(root, child, tasks, inner_skipped):
            found_any = True
            skipped.extend(inner_skipped)
        elif not (directory == root and child.name == AGENT_RESULTS_DIR):
            skipped.append((child.relative_to(root).as_posix(), "no task.toml"))
    return found_any


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes, kept by "surrogateescape"
        return False
    return True


def _subdirs(directory: Path) -> Iterator[Path]:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.name in IGNORED_DIR_NAMES:
            continue
        if entry.is_dir(follow_symlinks=False):
            yield Path(entry.path)


# --------------------------------------------------------------------------- task.toml


def network_allowed(config: dict[str, Any], phase: str = "environment") -> bool | None:
    """Whether task.toml allows network access (None when it does not say).

    Reads `[environment] network_mode` (Harbor schema 1.4), the phase's own override for
    phase "agent" or "verifier", and the deprecated `[environment] allow_internet`.
    Harbor's default when nothing is set is public network.
    """
    return network_setting(config, phase)


def parse_task_toml(path: Path, boundary: Path) -> tuple[dict[str, Any], str | None]:
    """(parsed config, error) of a task.toml; every problem is an error string, never raised.

    The file is read only when it is a regular file inside `boundary`, at most
    MAX_CONFIG_BYTES; deeply nested TOML (which exhausts the parser's recursion) is an error
    like any other syntax error.
    """
    try:
        data = read_regular(path, boundary, max_bytes=MAX_CONFIG_BYTES)
    except OSError as exc:
        return {}, f"task.toml: {exc}"
    try:
        return tomllib.loads(data.decode("utf-8")), None
    except UnicodeDecodeError as exc:
        return {}, f"task.toml: not UTF-8 text ({exc.reason} at byte {exc.start})"
    except tomllib.TOMLDecodeError as exc:
        return {}, f"task.toml: {exc}"
    except RecursionError:
        return {}, "task.toml: nested too deeply to parse (arrays or inline tables)"
