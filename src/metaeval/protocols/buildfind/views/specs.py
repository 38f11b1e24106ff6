"""Restricted finder views: which files of an artifact a finder may see (an ablation layer).

A view keeps the artifact files whose relative path matches one of its `include` globs and
none of its `exclude` globs. It is applied when the finder's read-only clone is made, so the
hidden files are not in the finder's workspace at all: list_dir, read_file, grep and bash see
only what the view kept.

Glob rules (matched against the POSIX path relative to the artifact root):

* a pattern with no ``/`` matches the file name at any depth (``README*``, ``*.py``);
* a pattern with a ``/`` matches the whole relative path; ``**`` spans any number of
  directories (``tests/**``, ``**/test_*.py``), ``*`` and ``?`` stay inside one path segment,
  ``[...]`` is a character class.

Presets (paper Appendix I): `readme_only`, `source_only` (source code, tests left out),
`tests_only` and `config_only`. A run config names presets or gives its own views:

    views:
      - readme_only
      - {name: source_and_tests, include: ["*.py"], exclude: ["README*"]}
"""

from __future__ import annotations

import os
import re
import shutil
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from metaeval.sandbox.workspace import (
    STRIPPED_DIR_NAMES,
    STRIPPED_DIR_SUFFIXES,
    STRIPPED_FILE_SUFFIXES,
    Workspace,
)

FULL_VIEW = "full"
_VIEW_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

_README = ["[Rr][Ee][Aa][Dd][Mm][Ee]", "[Rr][Ee][Aa][Dd][Mm][Ee].*"]
_TESTS = [
    "test/**",
    "tests/**",
    "**/test/**",
    "**/tests/**",
    "test_*.*",
    "*_test.*",
    "*_tests.*",
    "*.test.*",
    "*.spec.*",
    "*_spec.*",
    "conftest.py",
]
_SOURCE = [
    f"*.{ext}"
    for ext in (
        "py",
        "pyi",
        "rs",
        "go",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "java",
        "kt",
        "scala",
        "js",
        "mjs",
        "cjs",
        "ts",
        "tsx",
        "jsx",
        "rb",
        "php",
        "cs",
        "swift",
        "m",
        "lua",
        "sh",
        "zig",
        "hs",
        "ml",
        "ex",
        "exs",
        "erl",
        "clj",
        "jl",
        "r",
        "R",
        "sql",
    )
]
_CONFIG = [
    "*.toml",
    "*.yaml",
    "*.yml",
    "*.ini",
    "*.cfg",
    "*.conf",
    "*.json",
    "*.lock",
    "setup.py",
    "Makefile",
    "makefile",
    "*.mk",
    "CMakeLists.txt",
    "Dockerfile",
    "*.dockerfile",
    "requirements*.txt",
    "go.mod",
    "go.sum",
    ".editorconfig",
    ".gitignore",
    ".env.example",
]


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    """Regex of one glob (see the module docstring for the rules)."""
    anchored = "/" in pattern
    out = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                raise ValueError(f"glob {pattern!r}: unclosed '['")
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    prefix = "" if anchored else "(?:[^/]+/)*"
    return re.compile(prefix + "".join(out) + r"\Z")


def _matches(pattern: str, rel: str) -> bool:
    return _compile(pattern).match(rel) is not None


class ViewSpec(BaseModel):
    """One finder view: the files kept are those matching `include` and not `exclude`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    include: list[str] = Field(min_length=1)
    exclude: list[str] = Field(default_factory=list)
    description: str = ""

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _VIEW_NAME.match(value) or value == FULL_VIEW:
            raise ValueError(
                f"view name {value!r}: use 1-64 letters, digits, '_', '.' or '-' "
                f"(and not {FULL_VIEW!r}, the unrestricted view)"
            )
        return value

    @field_validator("include", "exclude")
    @classmethod
    def _valid_globs(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
                raise ValueError(f"glob {pattern!r} must be a non-empty relative pattern")
            _compile(pattern)
        return patterns

    def keeps(self, rel: str) -> bool:
        """True when the view keeps the file at relative POSIX path `rel`."""
        return any(_matches(p, rel) for p in self.include) and not any(
            _matches(p, rel) for p in self.exclude
        )


PRESETS: dict[str, ViewSpec] = {
    "readme_only": ViewSpec(
        name="readme_only", include=_README, description="README files only (any directory)"
    ),
    "source_only": ViewSpec(
        name="source_only",
        include=_SOURCE,
        exclude=_TESTS,
        description="source code files, tests left out",
    ),
    "tests_only": ViewSpec(name="tests_only", include=_TESTS, description="test files only"),
    "config_only": ViewSpec(
        name="config_only",
        include=_CONFIG,
        description="configuration, packaging and build files only",
    ),
}


def resolve_view(entry: str | ViewSpec | dict[str, Any]) -> ViewSpec:
    """A preset name or a view mapping as a ViewSpec (ValueError for an unknown preset)."""
    if isinstance(entry, ViewSpec):
        return entry
    if isinstance(entry, str):
        if entry not in PRESETS:
            raise ValueError(f"unknown view {entry!r} (presets: {', '.join(PRESETS)})")
        return PRESETS[entry]
    return ViewSpec.model_validate(entry)


def source_files(root: Path) -> list[str]:
    """Relative POSIX paths of every file and symlink under `root` (links not followed)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in [*filenames, *links]:
            found.append((rel_dir / name).as_posix())
    return sorted(found)


def restricted_clone(source: Path, dest: Path, view: ViewSpec) -> tuple[Workspace, dict[str, Any]]:
    """The finder's read-only clone of `source` holding only the files `view` keeps.

    The kept files (symlinks as links) are staged beside `dest`, the staging copy is cloned
    with `Workspace.read_only_clone` (so its stripping and symlink rules apply as for the full
    view: a link to a hidden file dangles and is dropped) and then removed. Returns the
    workspace and what to record: the view, the files the finder sees and the files hidden.
    """
    staging = dest.parent / f"{dest.name}-view-staging"
    staging.mkdir(parents=True)
    try:
        all_files = source_files(source)
        for rel in all_files:
            if not view.keeps(rel):
                continue
            src, dst = source / rel, staging / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            else:
                shutil.copy2(src, dst, follow_symlinks=False)
        workspace = Workspace.read_only_clone(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    hidden = [rel for rel in all_files if not view.keeps(rel) and not _build_output(rel)]
    info = {
        "name": view.name,
        "include": list(view.include),
        "exclude": list(view.exclude),
        "kept_files": workspace.list_files(),
        "hidden_files": hidden,
    }
    return workspace, info


def _build_output(rel: str) -> bool:
    """Left out of every finder clone anyway (VCS data, build outputs)."""
    *dirs, name = rel.split("/")
    if any(d in STRIPPED_DIR_NAMES or d.endswith(STRIPPED_DIR_SUFFIXES) for d in dirs):
        return True
    return name.endswith(STRIPPED_FILE_SUFFIXES)
