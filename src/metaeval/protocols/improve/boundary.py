"""Mutation boundary for the IMPROVE protocol: which paths a meta-agent's patch may touch.

AIE Bench (Sections 2.4, 3.1, Appendix C.2) makes only the target-agent mutable, and only
inside a declared boundary. This module holds the boundary policy (`MutationBoundary`), its
loading, derivation from a target-agent `SystemProfile` and narrowing. Patches are read by
`diff_parser` and checked against a boundary by `patch_check.check_patch`.

Paths
-----
All paths are scaffold-relative: the optimizer worktree root is the scaffold repository.
`mutable_root` is a directory under that root ("." or "" = the root itself). `allowed_paths`
are paths or glob patterns relative to `mutable_root`. Patterns are matched one path
component at a time: `*`, `?` and `[...]` never cross a `/`, and a component that is exactly
`**` matches any number of components (including none). An entry allows the paths it matches
*and everything under them*, so a directory entry allows its whole subtree; "." allows the
whole mutable root; the list must not be empty. Matching is case-sensitive: a path spelled
differently from the allow-list is outside it. Some paths are out of bounds whatever the
allow-list says (git metadata, benchmark-owned files, symbolic links): see `patch_check`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metaeval.config_files import load, validation_error
from metaeval.errors import ConfigError
from metaeval.protocols.improve.profiles import SystemProfile

BENCHMARK_DIR = ".aie_bench_recursive"
"""The benchmark-owned directory in a worktree (the session's context and boundary files)."""
_GLOB_CHARS = frozenset("*?[")


def _split_config_path(value: str, *, what: str, allow_glob: bool) -> tuple[str, ...]:
    """Validate a configured relative path; return its components (empty tuple = the root)."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string")
    text = value.strip()
    if "\\" in text:
        raise ValueError(f"{what} {value!r}: use '/' as the separator")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise ValueError(f"{what} {value!r}: control characters are not allowed")
    if text.startswith("/") or re.match(r"^[A-Za-z]:", text):
        raise ValueError(f"{what} {value!r}: must be relative, not absolute")
    parts = tuple(p for p in text.split("/") if p not in ("", "."))
    if ".." in parts:
        raise ValueError(f"{what} {value!r}: '..' components are not allowed")
    if not allow_glob and any(_GLOB_CHARS & set(p) for p in parts):
        raise ValueError(f"{what} {value!r}: glob characters are not allowed here")
    return parts


def _join(parts: tuple[str, ...]) -> str:
    return "/".join(parts) if parts else "."


class MutationBoundary(BaseModel):
    """What a candidate patch may change. See the module docstring for the matching rules."""

    model_config = ConfigDict(extra="forbid")

    mutable_root: str = "."
    allowed_paths: list[str] = Field(min_length=1)
    allow_binary: bool = False
    allow_new_files: bool = True
    allow_deletions: bool = True
    max_patch_bytes: int | None = Field(default=None, ge=1)

    @field_validator("mutable_root")
    @classmethod
    def _check_root(cls, value: str) -> str:
        return _join(_split_config_path(value, what="mutable_root", allow_glob=False))

    @field_validator("allowed_paths")
    @classmethod
    def _check_allowed(cls, value: list[str]) -> list[str]:
        out: list[str] = []
        for item in value:
            norm = _join(_split_config_path(item, what="allowed path", allow_glob=True))
            if norm not in out:
                out.append(norm)
        return out

    @property
    def root_parts(self) -> tuple[str, ...]:
        return _split_config_path(self.mutable_root, what="mutable_root", allow_glob=False)

    def effective_patterns(self) -> list[tuple[str, ...]]:
        """Allowed patterns as scaffold-relative component tuples (mutable_root prepended)."""
        root = self.root_parts
        return [
            root + _split_config_path(p, what="allowed path", allow_glob=True)
            for p in self.allowed_paths
        ]

    def allows(self, path: str) -> bool:
        """True if the scaffold-relative, already-normalized `path` is inside the boundary."""
        parts = tuple(p for p in path.split("/") if p not in ("", "."))
        return any(_matches_prefix(pat, parts) for pat in self.effective_patterns())

    def to_json(self) -> str:
        """The machine-readable record (`sum_boundary.json`, `.aie_bench_recursive/...`)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def _matches_prefix(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Does `pattern` match `path` or one of its ancestors (component-wise, `**` = any depth)?"""
    memo: dict[tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(pattern):
            result = True
        elif pattern[i] == "**":
            result = any(go(i + 1, k) for k in range(j, len(path) + 1))
        elif j == len(path):
            result = False
        else:
            result = fnmatchcase(path[j], pattern[i]) and go(i + 1, j + 1)
        memo[key] = result
        return result

    return go(0, 0)


def _is_literal(component: str) -> bool:
    return not (_GLOB_CHARS & set(component))


def _pattern_within(inner: tuple[str, ...], outer: tuple[str, ...]) -> bool:
    """Conservative containment: is everything `inner` allows also allowed by `outer`?

    Accepted when `inner` is `outer` or a syntactic sub-path of it, or when a literal (glob-free)
    leading part of `inner` is itself allowed by `outer` (then everything below it is too).
    Anything else, e.g. `src/a*` under `src/*`, is refused even if it happens to be contained.
    """
    if len(inner) >= len(outer) and inner[: len(outer)] == outer:
        return True
    for k in range(len(inner) + 1):
        if k and not _is_literal(inner[k - 1]):
            break
        if _matches_prefix(outer, inner[:k]):
            return True
    return False


def load_boundary(path: Path | str) -> MutationBoundary:
    """Read a boundary JSON file. Errors name the file and, where there is one, the field."""
    return load(path, MutationBoundary)


def boundary_from_profile(profile: SystemProfile) -> MutationBoundary:
    """The boundary a target-agent profile declares (`mutable_root`, `allowed_mutation_paths`).

    Fails closed: a profile without a mutable root, or without allowed paths, declares no
    boundary (write `["."]` to make the whole mutable root mutable).
    """
    where = f"profile '{profile.name}'"
    if profile.mutable_root is None:
        raise ConfigError(
            f"{where} declares no mutable_root; it cannot be the target of a recursive run",
            field="mutable_root",
        )
    if not profile.allowed_mutation_paths:
        raise ConfigError(
            f'{where} declares no allowed_mutation_paths (use ["."] for the whole mutable root)',
            field="allowed_mutation_paths",
        )
    try:
        return MutationBoundary(
            mutable_root=profile.mutable_root, allowed_paths=list(profile.allowed_mutation_paths)
        )
    except ValidationError as exc:
        err = validation_error(exc, file=None)
        fld = {"allowed_paths": "allowed_mutation_paths"}.get(err.field or "", err.field)
        raise ConfigError(f"{where}: {exc.errors()[0].get('msg')}", field=fld) from exc


def narrow(
    base: MutationBoundary,
    override: MutationBoundary | Mapping[str, Any],
    *,
    source: str | None = None,
) -> MutationBoundary:
    """Apply an experiment's mutation policy: it may narrow `base`, never widen it.

    `override` is a full boundary or a mapping of the fields to change (the others are taken
    from `base`; a mapping that moves `mutable_root` without `allowed_paths` means the whole
    new root). Every widening raises one ConfigError naming the (first) widened field; `source`
    names the policy file in the error.
    """
    candidate = _merged(base, override, source)
    problems = _widenings(base, candidate)
    if problems:
        detail = "; ".join(f"{f}: {m}" for f, m in problems)
        raise ConfigError(
            f"the mutation policy widens the boundary: {detail}", file=source, field=problems[0][0]
        )
    return candidate


def _merged(
    base: MutationBoundary, override: MutationBoundary | Mapping[str, Any], source: str | None
) -> MutationBoundary:
    """The policy's boundary: `override` itself, or `base` with the fields it sets."""
    if isinstance(override, MutationBoundary):
        return override
    merged = base.model_dump()
    if "mutable_root" in override and "allowed_paths" not in override:
        merged["allowed_paths"] = ["."]
    merged.update(dict(override))
    try:
        return MutationBoundary.model_validate(merged)
    except ValidationError as exc:
        raise validation_error(exc, file=source) from None


def _widenings(base: MutationBoundary, candidate: MutationBoundary) -> list[tuple[str, str]]:
    """Every way `candidate` allows more than `base`, as (field, what is wrong)."""
    problems: list[tuple[str, str]] = []
    base_root, new_root = base.root_parts, candidate.root_parts
    if new_root[: len(base_root)] != base_root:
        problems.append(
            (
                "mutable_root",
                f"'{candidate.mutable_root}' is not inside the base mutable root "
                f"'{base.mutable_root}' (a policy may only move it deeper)",
            )
        )
    base_patterns = base.effective_patterns()
    for raw, pattern in zip(candidate.allowed_paths, candidate.effective_patterns(), strict=True):
        if not any(_pattern_within(pattern, b) for b in base_patterns):
            problems.append(
                (
                    "allowed_paths",
                    f"'{raw}' (scaffold path '{_join(pattern)}') is not equal to or under any "
                    f"base allowed path {[_join(b) for b in base_patterns]}",
                )
            )
    for flag in ("allow_binary", "allow_new_files", "allow_deletions"):
        if getattr(candidate, flag) and not getattr(base, flag):
            problems.append((flag, "can only go from true to false"))
    if base.max_patch_bytes is not None and (
        candidate.max_patch_bytes is None or candidate.max_patch_bytes > base.max_patch_bytes
    ):
        problems.append(
            (
                "max_patch_bytes",
                f"{candidate.max_patch_bytes} exceeds the base limit {base.max_patch_bytes} "
                "(it can only decrease)",
            )
        )
    return problems


__all__ = ["BENCHMARK_DIR", "MutationBoundary", "boundary_from_profile", "load_boundary", "narrow"]
