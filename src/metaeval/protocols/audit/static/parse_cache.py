"""Parses of shell scripts and Dockerfiles shared between tasks with the same file.

Real benchmarks repeat files: Terminal-Bench and Harbor tasks often carry the same
`tests/test.sh` boilerplate and the same Dockerfile. A static-check process keeps the parse
of each (path, text, start directory) it has seen, so an identical file in the next task
costs a dictionary lookup instead of a tree-sitter or BuildKit parse and the walk over it.

The cached objects are shared: the checks only read them (the parsers are the only code that
builds or changes a `ShellScript` or a `DockerInfo`). Python sources are not cached; each
task's Python is usually its own, and its trees are the largest objects.
"""

from __future__ import annotations

from functools import lru_cache

from metaeval.protocols.audit.static.dockerfile import DockerInfo, parse_dockerfile
from metaeval.protocols.audit.static.shell import parse_script
from metaeval.protocols.audit.static.shell_script import ShellScript

CACHED_PARSES = 512  # per kind and process; a parse is a few KiB of small objects
MAX_CACHED_TEXT = 64 * 1024  # larger files are parsed each time (rare, and costly to key)


@lru_cache(maxsize=CACHED_PARSES)
def _script(path: str, text: str, script_path: str, cwd: str | None) -> ShellScript:
    return parse_script(path, text, script_path=script_path, cwd=cwd)


@lru_cache(maxsize=CACHED_PARSES)
def _dockerfile(path: str, text: str) -> DockerInfo:
    return parse_dockerfile(path, text)


def shared_script(path: str, text: str, *, script_path: str, cwd: str | None) -> ShellScript:
    """`parse_script(path, text, ...)`, reused when the same file was parsed before.

    The result is shared with other tasks: read it, never change it.
    """
    if len(text) > MAX_CACHED_TEXT:
        return parse_script(path, text, script_path=script_path, cwd=cwd)
    return _script(path, text, script_path, cwd)


def shared_dockerfile(path: str, text: str) -> DockerInfo:
    """`parse_dockerfile(path, text)`, reused when the same file was parsed before (read-only)."""
    if len(text) > MAX_CACHED_TEXT:
        return parse_dockerfile(path, text)
    return _dockerfile(path, text)


def clear_parse_cache() -> None:
    """Forget every shared parse (tests; a long-lived process that wants its memory back)."""
    _script.cache_clear()
    _dockerfile.cache_clear()


def parse_cache_info() -> dict[str, tuple[int, int]]:
    """(hits, misses) of each shared parse kind in this process."""
    return {
        "shell": (_script.cache_info().hits, _script.cache_info().misses),
        "dockerfile": (_dockerfile.cache_info().hits, _dockerfile.cache_info().misses),
    }
