"""Mutation boundary for the IMPROVE protocol: which paths a meta-agent's patch may touch.

AIE Bench (Sections 2.4, 3.1, Appendix C.2) makes only the target-agent mutable, and only
inside a declared boundary. Every candidate patch is validated *before* it is applied; a patch
that touches anything outside the boundary is rejected and no candidate is produced for the
trial. This module holds the boundary (`MutationBoundary`), its loading, derivation from a
target-agent `SystemProfile` and narrowing, and the validator (`check_patch`).

Paths
-----
All paths are scaffold-relative: the optimizer worktree root is the scaffold repository.
`mutable_root` is a directory under that root ("." or "" = the root itself). `allowed_paths`
are paths or glob patterns relative to `mutable_root`. Patterns are matched one path
component at a time: `*`, `?` and `[...]` never cross a `/`, and a component that is exactly
`**` matches any number of components (including none). An entry allows the paths it matches
*and everything under them*, so a directory entry allows its whole subtree; "." allows the
whole mutable root; the list must not be empty. Matching is case-sensitive: a path spelled
differently from the allow-list is outside it. Absolute names and names that resolve above the
repository root are reported as `outside_boundary` as well as `absolute_path`/`path_traversal`.

Patch paths are read the way `git apply` reads them with its default `-p1`: the first
component of a `diff --git`, `---` and `+++` name is stripped, `rename`/`copy` lines are taken
as they are, C-style quoted names ("a/with space", octal escapes) are unquoted. The validator
checks *every* name a file section mentions, not only the one git would end up using: git
trusts the `---`/`+++` names over the `diff --git` line, and silently turns a section whose
two names differ into a rename, so checking only the header would let a patch through that
rewrites a file the header never names. A section whose names disagree is also malformed.

Always out of bounds, whatever `allowed_paths` says (decisions, conservative on purpose):

* git metadata: any path component `.git` (the repository, a submodule's `.git` file, hooks,
  config), `.gitmodules` (submodule URLs and paths) and `.gitattributes` (checkout filters,
  eol conversion and diff drivers change how *other* files are materialized), anywhere in the
  tree. Components are compared after case folding, dropping the code points HFS+ ignores and
  trailing dots/spaces and NTFS stream suffixes, and NTFS short names (`GIT~1`) count too.
  `.gitignore` is ordinary content: it is allowed where the allow-list allows it.
* benchmark-owned context: any component `.aie_bench_recursive` (the session writes
  `optimizer_context.md` and `mutation_boundary.json` there).
* symbolic links, in any role: a mode whose type is 120000 on either side (created,
  retargeted, deleted, or a file turned into a link). With `worktree=` the validator also
  rejects a path that goes through, or ends at, a symlink that already exists in the worktree:
  a patch without mode lines can rewrite an existing link's target.
* submodule pointers (gitlinks, mode 160000).

Other rules: `..` components, absolute paths, empty or `.` components, backslashes and
control characters in names are rejected; a rename or copy is checked on both sides (copying
*from* outside the boundary is rejected too: the content comes from an immutable file); a
rename counts as a deletion and a new file, a copy as a new file; binary patches need
`allow_binary`. Traditional (non-git) sections need directory-prefixed names (git apply would
otherwise guess `-p0` for the rest of the patch); since git can create or delete a file from a
traditional section without saying so, such sections count as possible additions/deletions
when `allow_new_files`/`allow_deletions` is off. Apply accepted patches with
`git apply -p1` at the worktree root.

Reason codes (stable; a verdict lists every reason found, not just the first)
-----------------------------------------------------------------------------
empty_patch                   the patch text is empty or only whitespace
malformed                     not a patch git would read the same way: no file sections,
                              corrupt hunks or binary data, unreadable or inconsistent names,
                              stray header lines, a binary change without data
patch_too_large               the patch is larger than `max_patch_bytes` (UTF-8 bytes)
absolute_path                 a name is absolute (`/x`, `C:/x`)
path_traversal                a name has a `..` component
unsafe_path                   empty or `.` components, backslash, control or non-UTF-8 bytes
git_metadata                  touches `.git`, `.gitmodules` or `.gitattributes`
benchmark_owned               touches `.aie_bench_recursive/`
symlink                       a symbolic link is created, changed, deleted or written through
gitlink                       a submodule pointer (mode 160000) is changed
unsupported_mode              a mode other than 100644, 100755, 120000, 160000
outside_boundary              a name (either side of a rename/copy) is outside the allowed paths
mode_change_outside_boundary  a mode change (e.g. +x) on a path outside the allowed paths
binary_patch                  a binary change while `allow_binary` is false
new_file_not_allowed          a file is created (add, copy, rename) while `allow_new_files`
                              is false
deletion_not_allowed          a file is removed (delete, rename) while `allow_deletions` is
                              false
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metaeval.errors import ConfigError
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.safe_text import printable

REASON_CODES: tuple[str, ...] = (
    "empty_patch",
    "malformed",
    "patch_too_large",
    "absolute_path",
    "path_traversal",
    "unsafe_path",
    "git_metadata",
    "benchmark_owned",
    "symlink",
    "gitlink",
    "unsupported_mode",
    "outside_boundary",
    "mode_change_outside_boundary",
    "binary_patch",
    "new_file_not_allowed",
    "deletion_not_allowed",
)

BENCHMARK_DIR = ".aie_bench_recursive"
MAX_NAME_CHARS = 4096  # PATH_MAX: a longer name is no file git could write (and bounds our work)
_GLOB_CHARS = frozenset("*?[")

# --------------------------------------------------------------------------------------------
# Boundary model
# --------------------------------------------------------------------------------------------


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


def _validation_to_config_error(exc: ValidationError, *, file: str | None) -> ConfigError:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or None
    msg = first.get("msg", "invalid value")
    if len(exc.errors()) > 1:
        others = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
            for e in exc.errors()[1:]
        )
        msg = f"{msg} (also: {others})"
    return ConfigError(msg, file=file, field=loc)


def load_boundary(path: Path | str) -> MutationBoundary:
    """Read a boundary JSON file. Errors name the file and, where there is one, the field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read mutation boundary: {exc}", file=str(path)) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}", file=str(path)
        ) from exc
    except RecursionError as exc:
        raise ConfigError("JSON nested too deeply", file=str(path)) from exc
    if not isinstance(data, dict):
        raise ConfigError("a mutation boundary must be a JSON object", file=str(path))
    try:
        return MutationBoundary.model_validate(data)
    except ValidationError as exc:
        raise _validation_to_config_error(exc, file=str(path)) from exc


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
        err = _validation_to_config_error(exc, file=None)
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
    if isinstance(override, MutationBoundary):
        candidate = override
    else:
        merged = base.model_dump()
        if "mutable_root" in override and "allowed_paths" not in override:
            merged["allowed_paths"] = ["."]
        merged.update(dict(override))
        try:
            candidate = MutationBoundary.model_validate(merged)
        except ValidationError as exc:
            raise _validation_to_config_error(exc, file=source) from exc

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
    if problems:
        detail = "; ".join(f"{f}: {m}" for f, m in problems)
        raise ConfigError(
            f"the mutation policy widens the boundary: {detail}", file=source, field=problems[0][0]
        )
    return candidate


# --------------------------------------------------------------------------------------------
# Verdict model
# --------------------------------------------------------------------------------------------


class Reason(BaseModel):
    code: str
    path: str | None = None
    detail: str


ChangeKind = Literal["add", "modify", "delete", "rename", "copy"]


class FileChange(BaseModel):
    """One file section. `path` is the post-image name (the removed name for a delete);
    `old_path` is set only for renames and copies (their source)."""

    path: str
    old_path: str | None = None
    change: ChangeKind
    old_mode: str | None = None
    new_mode: str | None = None
    binary: bool = False


class PatchVerdict(BaseModel):
    accepted: bool
    reasons: list[Reason] = Field(default_factory=list)
    files: list[FileChange] = Field(default_factory=list)

    @property
    def codes(self) -> list[str]:
        """Distinct reason codes, in the order they were found."""
        return list(dict.fromkeys(r.code for r in self.reasons))

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


# --------------------------------------------------------------------------------------------
# Unified-diff parser (what `git apply` reads)
# --------------------------------------------------------------------------------------------

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX_RE = re.compile(r"^([0-9a-fA-F]+)\.\.([0-9a-fA-F]+)(?: (\S+))?\s*$")
_MODE_RE = re.compile(r"^[0-7]{6}$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}

# Lines that only make sense inside a file section; outside one they mean the patch is broken
# (or that the validator and git would disagree about where a section starts).
_HEADERISH = (
    "@@",
    "+++ ",
    "--- ",
    "diff ",
    "Binary files ",
    "GIT binary patch",
    "literal ",
    "delta ",
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "rename from ",
    "rename to ",
    "rename old ",
    "rename new ",
    "copy from ",
    "copy to ",
    "similarity index ",
    "dissimilarity index ",
    "index ",
)


def _unquote(text: str) -> tuple[str | None, str]:
    """Unquote a C-style quoted name at the start of `text`; return (name, rest after it)."""
    assert text.startswith('"')
    out = bytearray()
    i = 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return out.decode("utf-8", "surrogateescape"), text[i + 1 :]
        if ch == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            octal = text[i + 1 : i + 4]
            if re.fullmatch(r"[0-3][0-7][0-7]", octal):
                out.append(int(octal, 8))
                i += 4
                continue
            return None, text
        out += ch.encode("utf-8", "surrogateescape")
        i += 1
    return None, text


def _strip_components(name: str, count: int) -> str | None:
    for _ in range(count):
        k = name.find("/")
        if k < 0:
            return None
        name = name[k + 1 :]
    return name or None


def _read_name(text: str, *, strip: int, stop_at_tab: bool) -> str | None:
    """A file name as git's find_name reads it (quoted or not), `strip` components removed."""
    if text.startswith('"'):
        name, _rest = _unquote(text)
        if name is None:
            return None
    else:
        end = len(text)
        for stop in ("\r", "\t") if stop_at_tab else ("\r",):
            k = text.find(stop)
            if k >= 0:
                end = min(end, k)
        name = text[:end]
    return _strip_components(name, strip)


def _is_dev_null(text: str) -> bool:
    return text == "/dev/null" or (text.startswith("/dev/null") and text[9:10] in ("\t", " ", "\r"))


@dataclass
class _Section:
    line_no: int
    fmt: Literal["git", "traditional"]
    header_rest: str = ""
    def_name: str | None = None
    header_names: list[str] = field(default_factory=list)
    minus: list[str] = field(default_factory=list)
    plus: list[str] = field(default_factory=list)
    minus_null: bool = False
    plus_null: bool = False
    rename_from: list[str] = field(default_factory=list)
    rename_to: list[str] = field(default_factory=list)
    copy_from: list[str] = field(default_factory=list)
    copy_to: list[str] = field(default_factory=list)
    extra_names: list[str] = field(default_factory=list)
    is_new: bool = False
    is_delete: bool = False
    old_mode_lines: list[str] = field(default_factory=list)
    new_mode_lines: list[str] = field(default_factory=list)
    index_mode: str | None = None
    modes: list[tuple[str, str]] = field(default_factory=list)  # (label, mode) as written
    hunks: list[tuple[int, int]] = field(default_factory=list)  # (old count, new count)
    binary: bool = False
    binary_data: bool = False
    problems: list[str] = field(default_factory=list)
    # results of _finish
    old_path: str | None = None
    new_path: str | None = None
    change: ChangeKind = "modify"
    may_add: bool = False
    may_delete: bool = False

    @property
    def display(self) -> str | None:
        return self.new_path or self.old_path or self.def_name or next(iter(self.all_names()), None)

    def all_names(self) -> list[str]:
        names = [
            *self.header_names,
            *self.minus,
            *self.plus,
            *self.rename_from,
            *self.rename_to,
            *self.copy_from,
            *self.copy_to,
            *self.extra_names,
        ]
        if self.def_name:
            names.insert(0, self.def_name)
        return list(dict.fromkeys(names))


class _Parser:
    def __init__(self, text: str):
        self.lines = text.split("\n")
        self.unterminated: int | None = None
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        elif self.lines:
            self.unterminated = len(self.lines) - 1
        self.n = len(self.lines)
        self.sections: list[_Section] = []
        self.problems: list[str] = []

    # -- driver ------------------------------------------------------------------------------

    def parse(self) -> _Parser:
        i, seen_section, after_signature = 0, False, False
        lines, n = self.lines, self.n
        while i < n:
            line = lines[i]
            if line.startswith("diff --git "):
                i = self._git_section(i)
                seen_section = True
                continue
            if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
                i = self._traditional_section(i)
                seen_section = True
                continue
            if (
                line.startswith("diff ")
                and not line.startswith("diff --")
                and i + 1 < n
                and lines[i + 1].startswith("--- ")
            ):
                i += 1  # `diff -u a/x b/x` line in front of a traditional section
                continue
            if line.startswith(_HEADERISH):
                self.problems.append(f"line {i + 1}: {line[:60]!r} is outside any file section")
            elif seen_section and line == "-- ":
                after_signature = True  # format-patch signature
            elif seen_section and not after_signature and line[:1] in ("+", "-", " ", "\\"):
                self.problems.append(
                    f"line {i + 1}: {line[:60]!r} is outside any hunk (do the hunk line counts "
                    "match the @@ headers?)"
                )
            i += 1
        return self

    def _touch(self, sec: _Section, i: int) -> None:
        if i == self.unterminated:
            sec.problems.append(
                f"line {i + 1}: the patch ends without a newline inside a file section "
                "(git apply reads it as corrupt)"
            )

    # -- git sections --------------------------------------------------------------------------

    def _git_section(self, i: int) -> int:
        lines = self.lines
        sec = _Section(line_no=i + 1, fmt="git")
        self._touch(sec, i)
        sec.header_rest = lines[i][len("diff --git ") :]
        self._parse_git_header(sec)
        i += 1
        while i < self.n and self._git_header_line(sec, lines[i], i):
            self._touch(sec, i)
            i += 1
        if i < self.n and lines[i].startswith("@@ -"):
            i = self._hunks(sec, i)
        elif i < self.n and lines[i] == "GIT binary patch":
            self._touch(sec, i)
            i = self._binary(sec, i + 1)
        elif i < self.n and lines[i].startswith("Binary files ") and lines[i].endswith(" differ"):
            self._touch(sec, i)
            sec.binary = True
            i += 1
        self._finish(sec)
        self.sections.append(sec)
        return i

    def _parse_git_header(self, sec: _Section) -> None:
        rest = sec.header_rest.split("\r", 1)[0]
        if len(rest) > 2 * MAX_NAME_CHARS + 8:
            sec.problems.append(f"line {sec.line_no}: the diff --git line is too long")
            return
        a_raw: str | None
        b_raw: str | None
        if rest.startswith('"'):
            a_raw, tail = _unquote(rest)
            if a_raw is None:
                sec.problems.append(f"line {sec.line_no}: bad quoting in the diff --git line")
                return
            tail = tail.lstrip(" ")
            b_raw = _unquote(tail)[0] if tail.startswith('"') else tail
        elif '"' in rest:
            q = rest.index('"')
            a_raw, b_raw = rest[:q].rstrip(" \t"), _unquote(rest[q:])[0]
        else:
            for k, ch in enumerate(rest):
                if ch in " \t":
                    a = _strip_components(rest[:k], 1)
                    if a is not None and a == _strip_components(rest[k + 1 :], 1):
                        sec.def_name = a
                        sec.header_names = [a]
                        return
            return  # two different unquoted names: only usable for a consistency check
        if b_raw is None:
            sec.problems.append(f"line {sec.line_no}: bad quoting in the diff --git line")
            return
        a, b = _strip_components(a_raw, 1), _strip_components(b_raw, 1)
        sec.header_names = [x for x in (a, b) if x is not None]
        if a is not None and a == b:
            sec.def_name = a

    def _name(self, sec: _Section, text: str, i: int, *, strip: int, stop_at_tab: bool) -> str:
        name = _read_name(text, strip=strip, stop_at_tab=stop_at_tab)
        if name is None:
            sec.problems.append(f"line {i + 1}: cannot read a file name from {text[:60]!r}")
            return ""
        if len(name) > MAX_NAME_CHARS:
            sec.problems.append(f"line {i + 1}: file name longer than {MAX_NAME_CHARS} characters")
            return ""
        return name

    def _mode(self, sec: _Section, label: str, text: str, i: int) -> str | None:
        mode = text.rstrip("\r").strip()
        if not _MODE_RE.match(mode):
            sec.problems.append(f"line {i + 1}: invalid {label} {text[:20]!r}")
            return None
        sec.modes.append((label, mode))
        return mode

    def _git_header_line(self, sec: _Section, line: str, i: int) -> bool:
        """Consume one extended header line; False at the first line that is not one."""

        def after(prefix: str) -> str:
            return line[len(prefix) :]

        if line.startswith("--- "):
            text = after("--- ")
            if _is_dev_null(text):
                sec.minus_null = True
            else:
                sec.minus.append(self._name(sec, text, i, strip=1, stop_at_tab=True))
        elif line.startswith("+++ "):
            text = after("+++ ")
            if _is_dev_null(text):
                sec.plus_null = True
            else:
                sec.plus.append(self._name(sec, text, i, strip=1, stop_at_tab=True))
        elif line.startswith("old mode "):
            if m := self._mode(sec, "old mode", after("old mode "), i):
                sec.old_mode_lines.append(m)
        elif line.startswith("new mode "):
            if m := self._mode(sec, "new mode", after("new mode "), i):
                sec.new_mode_lines.append(m)
        elif line.startswith("deleted file mode "):
            sec.is_delete = True
            if m := self._mode(sec, "deleted file mode", after("deleted file mode "), i):
                sec.old_mode_lines.append(m)
        elif line.startswith("new file mode "):
            sec.is_new = True
            if m := self._mode(sec, "new file mode", after("new file mode "), i):
                sec.new_mode_lines.append(m)
        elif line.startswith(("copy from ", "copy to ", "rename from ", "rename to ")):
            kind, side, text = line.split(" ", 2)
            name = self._name(sec, text, i, strip=0, stop_at_tab=False)
            target = {
                ("copy", "from"): sec.copy_from,
                ("copy", "to"): sec.copy_to,
                ("rename", "from"): sec.rename_from,
                ("rename", "to"): sec.rename_to,
            }[(kind, side)]
            target.append(name)
        elif line.startswith(("rename old ", "rename new ")):  # obsolete spelling
            text = line[len("rename old ") :]
            name = self._name(sec, text, i, strip=0, stop_at_tab=False)
            (sec.rename_from if line.startswith("rename old ") else sec.rename_to).append(name)
        elif line.startswith(("similarity index ", "dissimilarity index ")):
            pass
        elif line.startswith("index "):
            index = _INDEX_RE.match(after("index "))
            if not index:
                sec.problems.append(f"line {i + 1}: invalid index line {line[:60]!r}")
            elif index.group(3) is not None:
                sec.index_mode = self._mode(sec, "index mode", index.group(3), i)
        else:
            return False
        return True

    # -- traditional sections ------------------------------------------------------------------

    def _traditional_section(self, i: int) -> int:
        lines = self.lines
        sec = _Section(line_no=i + 1, fmt="traditional")
        self._touch(sec, i)
        self._touch(sec, i + 1)
        for text, names, null_attr in (
            (lines[i][4:], sec.minus, "minus_null"),
            (lines[i + 1][4:], sec.plus, "plus_null"),
        ):
            if _is_dev_null(text):
                setattr(sec, null_attr, True)
                continue
            raw = _read_name(text, strip=0, stop_at_tab=True)
            if raw is not None and len(raw) <= MAX_NAME_CHARS and "/" not in raw:
                sec.problems.append(
                    f"line {sec.line_no}: traditional diff name {raw!r} has no directory prefix "
                    "(git apply would guess -p0 for the rest of the patch)"
                )
            name = self._name(sec, text, i, strip=1, stop_at_tab=True)
            names.append(name)
            if name and not text.startswith('"') and "\t" not in text and " " in name:
                # git strips a trailing timestamp separated by spaces: check every reading
                for k, ch in enumerate(name):
                    if ch == " " and name[:k]:
                        sec.extra_names.append(name[:k])
        i += 2
        if i < self.n and lines[i].startswith("@@ -"):
            i = self._hunks(sec, i)
        else:
            sec.problems.append(f"line {sec.line_no}: '---'/'+++' header without a hunk")
        self._finish(sec)
        self.sections.append(sec)
        return i

    # -- bodies --------------------------------------------------------------------------------

    def _hunks(self, sec: _Section, i: int) -> int:
        lines = self.lines
        while i < self.n and lines[i].startswith("@@ -"):
            self._touch(sec, i)
            m = _HUNK_RE.match(lines[i])
            if not m:
                sec.problems.append(f"line {i + 1}: invalid hunk header {lines[i][:60]!r}")
                return i + 1
            old = int(m.group(2)) if m.group(2) is not None else 1
            new = int(m.group(4)) if m.group(4) is not None else 1
            sec.hunks.append((old, new))
            start = i + 1
            i += 1
            while old > 0 or new > 0:
                if i >= self.n:
                    sec.problems.append(f"line {start}: hunk is truncated (the patch ends early)")
                    return i
                line = lines[i]
                self._touch(sec, i)
                first = line[:1]
                if line == "" or first == " ":
                    old, new = old - 1, new - 1
                elif first == "-":
                    old -= 1
                elif first == "+":
                    new -= 1
                elif line.startswith("\\ ") and len(line) >= 11:
                    pass
                else:
                    sec.problems.append(
                        f"line {i + 1}: {line[:60]!r} is not a context, removed or added line"
                    )
                    return i
                if old < 0 or new < 0:
                    sec.problems.append(
                        f"line {i + 1}: hunk starting at line {start} has more lines than its "
                        "header declares"
                    )
                    return i + 1
                i += 1
            if i < self.n and lines[i].startswith("\\ ") and len(lines[i]) >= 11:
                self._touch(sec, i)
                i += 1
        return i

    def _binary(self, sec: _Section, i: int) -> int:
        sec.binary = True
        sec.binary_data = True
        i, ok = self._binary_hunk(sec, i)
        if ok and i < self.n and self.lines[i].startswith(("literal ", "delta ")):
            i, _ok = self._binary_hunk(sec, i)
        return i

    def _binary_hunk(self, sec: _Section, i: int) -> tuple[int, bool]:
        head = self.lines[i] if i < self.n else ""
        m = re.fullmatch(r"(literal|delta) (\d+)", head)
        if not m:
            sec.problems.append(f"line {i + 1}: expected 'literal N' or 'delta N' binary data")
            return i, False
        self._touch(sec, i)
        expected = int(m.group(2))
        data = bytearray()
        start = i + 1
        i += 1
        while True:
            if i >= self.n:
                sec.problems.append(f"line {start}: binary data is not ended by a blank line")
                return i, False
            line = self.lines[i]
            self._touch(sec, i)
            i += 1
            if line == "":
                break
            if len(line) < 6 or (len(line) - 1) % 5:
                sec.problems.append(f"line {i}: corrupt binary data line")
                return i, False
            c = line[0]
            if "A" <= c <= "Z":
                nbytes = ord(c) - ord("A") + 1
            elif "a" <= c <= "z":
                nbytes = ord(c) - ord("a") + 27
            else:
                sec.problems.append(f"line {i}: corrupt binary data line (bad length byte)")
                return i, False
            room = (len(line) - 1) // 5 * 4
            if room < nbytes or nbytes <= room - 4:
                sec.problems.append(f"line {i}: corrupt binary data line (length mismatch)")
                return i, False
            try:
                data += base64.b85decode(line[1:])[:nbytes]
            except (ValueError, binascii.Error):
                sec.problems.append(f"line {i}: corrupt binary data line (not base85)")
                return i, False
        if not _inflates_to(bytes(data), expected):
            sec.problems.append(
                f"line {start}: binary data does not inflate to the declared {expected} bytes"
            )
            return i, False
        return i, True

    # -- per-section consistency ---------------------------------------------------------------

    def _finish(self, sec: _Section) -> None:
        p = sec.problems
        where = f"line {sec.line_no}"
        is_rename = bool(sec.rename_from or sec.rename_to)
        is_copy = bool(sec.copy_from or sec.copy_to)
        if sec.fmt == "traditional":
            sec.is_new, sec.is_delete = sec.minus_null, sec.plus_null
        if sum((sec.is_new, sec.is_delete, is_rename, is_copy)) > 1:
            p.append(f"{where}: inconsistent header lines (new/deleted/rename/copy combined)")
        if is_rename and not (sec.rename_from and sec.rename_to):
            p.append(f"{where}: rename without both 'rename from' and 'rename to'")
        if is_copy and not (sec.copy_from and sec.copy_to):
            p.append(f"{where}: copy without both 'copy from' and 'copy to'")
        if sec.minus_null and sec.minus or sec.plus_null and sec.plus:
            p.append(f"{where}: duplicate '---'/'+++' lines")
        if sec.fmt == "git":
            if sec.minus_null and not sec.is_new:
                p.append(f"{where}: '--- /dev/null' without 'new file mode'")
            if sec.plus_null and not sec.is_delete:
                p.append(f"{where}: '+++ /dev/null' without 'deleted file mode'")
            if sec.hunks and not ((sec.minus or sec.minus_null) and (sec.plus or sec.plus_null)):
                p.append(f"{where}: hunks without '---'/'+++' lines")
        if bool(sec.old_mode_lines) != bool(sec.new_mode_lines) and not (
            sec.is_new or sec.is_delete
        ):
            p.append(f"{where}: 'old mode' and 'new mode' must come together")
        if sec.minus_null and sec.plus_null:
            p.append(f"{where}: both sides are /dev/null")

        olds = list(dict.fromkeys([*sec.minus, *sec.rename_from, *sec.copy_from]))
        news = list(dict.fromkeys([*sec.plus, *sec.rename_to, *sec.copy_to]))
        if len(olds) > 1:
            p.append(f"{where}: the section names different old files {olds}")
        if len(news) > 1:
            p.append(f"{where}: the section names different new files {news}")
        old = olds[0] if olds else None
        new = news[0] if news else None
        if old is None and new is None:
            old = new = sec.def_name
        if sec.is_new:
            if olds:
                p.append(f"{where}: a new file with an old name {olds[0]!r}")
            old = None
            new = new or sec.def_name
        if sec.is_delete:
            if news:
                p.append(f"{where}: a deleted file with a new name {news[0]!r}")
            new = None
            old = old or sec.def_name
        if not sec.is_new and not old:
            p.append(f"{where}: the section lacks the old file name")
        if not sec.is_delete and not new:
            p.append(f"{where}: the section lacks the new file name")
        if old and new and old != new and not (is_rename or is_copy):
            p.append(
                f"{where}: old name {old!r} and new name {new!r} differ without a rename or copy "
                "header (git apply would move the file)"
            )
        if (is_rename or is_copy) and old and old == new:
            p.append(f"{where}: a rename or copy onto the same name")
        if sec.def_name is not None:
            stray = [x for x in (*olds, *news) if x != sec.def_name]
            if stray:
                p.append(
                    f"{where}: the diff --git line names {sec.def_name!r} but the section changes "
                    f"{stray} (git apply follows the latter)"
                )
        elif sec.fmt == "git" and old and new and sec.header_names:
            if set(sec.header_names) != {old, new}:
                p.append(f"{where}: the diff --git line does not name {old!r} and {new!r}")
        elif sec.fmt == "git" and old and new and not self._header_split_matches(sec, old, new):
            p.append(f"{where}: the diff --git line does not name {old!r} and {new!r}")
        if sec.is_new and any(o for o, _n in sec.hunks):
            p.append(f"{where}: a new file whose hunk removes lines")
        if sec.is_delete and any(nw for _o, nw in sec.hunks):
            p.append(f"{where}: a deleted file whose hunk adds lines")
        if sec.fmt == "traditional" and sec.hunks:
            single = len(sec.hunks) == 1
            sec.may_add = sec.is_new or (single and sec.hunks[0][0] == 0)
            sec.may_delete = sec.is_delete or all(nw == 0 for _o, nw in sec.hunks)

        sec.old_path, sec.new_path = old, new
        if sec.is_new:
            sec.change = "add"
        elif sec.is_delete:
            sec.change = "delete"
        elif is_rename:
            sec.change = "rename"
        elif is_copy:
            sec.change = "copy"
        has_change = (
            sec.hunks
            or sec.binary
            or sec.is_new
            or sec.is_delete
            or is_rename
            or is_copy
            or (sec.old_mode_lines and sec.new_mode_lines)
        )
        if not has_change:
            p.append(f"{where}: file section without any change")

    @staticmethod
    def _header_split_matches(sec: _Section, old: str, new: str) -> bool:
        rest = sec.header_rest.split("\r", 1)[0]
        if len(rest) > 2 * MAX_NAME_CHARS + 8:
            return False
        for k, ch in enumerate(rest):
            if ch in " \t" and (
                _strip_components(rest[:k], 1) == old and _strip_components(rest[k + 1 :], 1) == new
            ):
                return True
        return False


def _inflates_to(data: bytes, expected: int) -> bool:
    """Does zlib `data` inflate to exactly `expected` bytes? (streamed: no bomb in memory)"""
    d = zlib.decompressobj()
    total = 0
    buf = data
    try:
        while True:
            out = d.decompress(buf, 1 << 20)
            total += len(out)
            if total > expected:
                return False
            buf = d.unconsumed_tail
            if not buf:
                break
        total += len(d.flush())
    except zlib.error:
        return False
    return d.eof and total == expected


# --------------------------------------------------------------------------------------------
# Boundary checks
# --------------------------------------------------------------------------------------------

_IGNORABLE = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
_GIT_NAMES = {
    ".git": "the repository's git metadata",
    ".gitmodules": "submodule configuration",
    ".gitattributes": "git attributes (checkout filters, eol, diff drivers)",
}
_SHORT_NAMES = re.compile(r"^(git|gitmod|gitatt)~\d+$")


def _fold(component: str) -> str:
    """How case-insensitive / HFS+ / NTFS file systems may read a component."""
    c = _IGNORABLE.sub("", component).casefold()
    c = c.split(":", 1)[0]
    return c.rstrip(" .")


@dataclass
class _Collector:
    reasons: list[Reason] = field(default_factory=list)
    seen: set[tuple[str | None, ...]] = field(default_factory=set)

    def add(self, code: str, path: str | None, detail: str) -> None:
        key = (code, path) if path is not None and code != "malformed" else (code, path, detail)
        if key in self.seen:
            return
        self.seen.add(key)
        self.reasons.append(Reason(code=code, path=path, detail=detail))


def _check_path(
    path: str,
    role: str,
    boundary: MutationBoundary,
    out: _Collector,
    worktree: Path | None,
) -> bool:
    """Check one name; return True if it is inside the boundary."""
    comps = path.split("/")
    absolute = path.startswith("/") or bool(re.match(r"^[A-Za-z]:", path))
    if absolute:
        out.add("absolute_path", path, f"{role} is an absolute path")
    inner = comps[1:] if path.startswith("/") else comps
    if any(c in ("", ".") for c in inner):
        out.add("unsafe_path", path, f"{role} has an empty or '.' component")
    if "\\" in path:
        out.add("unsafe_path", path, f"{role} contains a backslash")
    unsafe = any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in path)
    if unsafe:
        out.add("unsafe_path", path, f"{role} contains control characters or non-UTF-8 bytes")

    stack: list[str] = []
    escaped = False
    for c in comps:
        if c in ("", "."):
            continue
        if c == "..":
            if stack:
                stack.pop()
            else:
                escaped = True
        else:
            stack.append(c)
    if ".." in comps:
        where = "resolves outside the repository root" if escaped else "stays inside the repo"
        out.add("path_traversal", path, f"{role} has a '..' component ({where})")

    for c in dict.fromkeys([*comps, *stack]):
        folded = _fold(c)
        if folded in _GIT_NAMES or _SHORT_NAMES.match(folded):
            what = _GIT_NAMES.get(folded, "git metadata (NTFS short name)")
            out.add("git_metadata", path, f"{role} touches {what}: immutable")
        elif folded == BENCHMARK_DIR:
            out.add("benchmark_owned", path, f"{role} touches benchmark-owned {BENCHMARK_DIR}/")

    inside = not absolute and not escaped and boundary.allows("/".join(stack))
    if not inside:
        out.add(
            "outside_boundary",
            path,
            f"{role} is outside the mutation boundary (root '{boundary.mutable_root}', "
            f"allowed: {', '.join(boundary.allowed_paths) or 'none'})",
        )
    elif worktree is not None and not unsafe:
        here = Path(worktree)
        for c in stack:
            here = here / c
            if here.is_symlink():
                out.add(
                    "symlink",
                    path,
                    f"{role} goes through or is an existing symbolic link "
                    f"'{here.relative_to(worktree)}' in the worktree",
                )
                break
            if not here.exists():
                break
    return inside


def _roles(sec: _Section) -> list[tuple[str, str]]:
    roles: list[tuple[str, str]] = []
    change = sec.change
    if change in ("rename", "copy"):
        if sec.old_path:
            roles.append((sec.old_path, f"{change} source"))
        if sec.new_path:
            roles.append((sec.new_path, f"{change} destination"))
    elif change == "add" and sec.new_path:
        roles.append((sec.new_path, "new file"))
    elif change == "delete" and sec.old_path:
        roles.append((sec.old_path, "deleted file"))
    elif sec.new_path:
        roles.append((sec.new_path, "modified file"))
    known = {p for p, _r in roles}
    for name in sec.all_names():
        if name and name not in known:
            roles.append((name, "a name in the file section's header lines"))
            known.add(name)
    return roles


def _check_section(
    sec: _Section, boundary: MutationBoundary, out: _Collector, worktree: Path | None
) -> None:
    display = sec.display
    for problem in sec.problems:
        out.add("malformed", display, problem)
    all_inside = True
    for name, role in _roles(sec):
        all_inside &= _check_path(name, role, boundary, out, worktree)

    for label, mode in sec.modes:
        kind = int(mode, 8) & 0o170000
        if kind == 0o120000:
            out.add("symlink", display, f"{label} {mode}: symbolic links may not be touched")
        elif kind == 0o160000:
            out.add("gitlink", display, f"{label} {mode}: submodule pointers are immutable")
        elif mode not in ("100644", "100755"):
            out.add("unsupported_mode", display, f"{label} {mode} is not 100644 or 100755")

    old_mode = sec.old_mode_lines[0] if sec.old_mode_lines else None
    new_mode = sec.new_mode_lines[0] if sec.new_mode_lines else None
    if old_mode and new_mode and old_mode != new_mode and not all_inside:
        becomes_exec = int(new_mode, 8) & 0o111 and not int(old_mode, 8) & 0o111
        what = "makes the file executable" if becomes_exec else "changes the file mode"
        out.add(
            "mode_change_outside_boundary",
            display,
            f"mode {old_mode} -> {new_mode} {what} outside the mutation boundary",
        )

    if sec.binary:
        if not boundary.allow_binary:
            out.add("binary_patch", display, "binary changes are not allowed by the boundary")
        elif not sec.binary_data:
            out.add(
                "malformed",
                display,
                f"line {sec.line_no}: binary change without data (produce it with git diff --binary)",
            )

    if not boundary.allow_new_files:
        if sec.change in ("add", "copy", "rename"):
            out.add("new_file_not_allowed", display, f"a {sec.change} creates a file")
        elif sec.may_add:
            out.add(
                "new_file_not_allowed", display, "a traditional diff from empty may create the file"
            )
    if not boundary.allow_deletions:
        if sec.change in ("delete", "rename"):
            what = "a delete" if sec.change == "delete" else "a rename"
            out.add("deletion_not_allowed", sec.old_path or display, f"{what} removes a file")
        elif sec.may_delete:
            out.add(
                "deletion_not_allowed",
                display,
                "a traditional diff to empty may delete the file",
            )


def _patch_size(patch_text: str) -> int:
    try:
        return len(patch_text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return len(patch_text.encode("utf-8", "surrogatepass"))


def check_patch(
    patch_text: str, boundary: MutationBoundary, *, worktree: Path | None = None
) -> PatchVerdict:
    """Validate a candidate patch against the boundary; list every reason to reject it.

    The check is text-only unless `worktree` (the checkout the patch would be applied to) is
    given; then paths that go through or end at an existing symlink are rejected as well.
    """
    out = _Collector()
    size = _patch_size(patch_text)
    if boundary.max_patch_bytes is not None and size > boundary.max_patch_bytes:
        out.add(
            "patch_too_large",
            None,
            f"the patch is {size} bytes, the boundary allows {boundary.max_patch_bytes}",
        )
    if not patch_text.strip():
        out.add("empty_patch", None, "the patch is empty")
        return PatchVerdict(accepted=False, reasons=out.reasons)

    parsed = _Parser(patch_text).parse()
    for problem in parsed.problems:
        out.add("malformed", None, problem)
    if not parsed.sections:
        out.add("malformed", None, "no file sections found: not a unified or git diff")

    files: list[FileChange] = []
    for sec in parsed.sections:
        _check_section(sec, boundary, out, worktree)
        path = sec.new_path or sec.old_path
        if path:
            old_mode = sec.old_mode_lines[0] if sec.old_mode_lines else None
            new_mode = sec.new_mode_lines[0] if sec.new_mode_lines else None
            if sec.index_mode is not None:
                old_mode = old_mode or (None if sec.is_new else sec.index_mode)
                new_mode = new_mode or (None if sec.is_delete else sec.index_mode)
            files.append(
                FileChange(
                    path=path,
                    old_path=sec.old_path if sec.change in ("rename", "copy") else None,
                    change=sec.change,
                    old_mode=old_mode,
                    new_mode=new_mode,
                    binary=sec.binary,
                )
            )
    return PatchVerdict(accepted=not out.reasons, reasons=out.reasons, files=files)


# --------------------------------------------------------------------------------------------
# CLI helper
# --------------------------------------------------------------------------------------------


def format_verdict(verdict: PatchVerdict) -> str:
    """Human-readable verdict: a status line, then one line per reason (or per file)."""
    if verdict.accepted:
        lines = [f"accepted: {len(verdict.files)} file(s) changed"]
        for f in verdict.files:
            src = f"{f.old_path} -> " if f.old_path else ""
            lines.append(f"  {f.change}: {src}{f.path}")
    else:
        lines = [f"rejected: {len(verdict.reasons)} reason(s)"]
        for r in verdict.reasons:
            lines.append(f"{r.code}: {r.path}: {r.detail}" if r.path else f"{r.code}: {r.detail}")
    return "\n".join(lines)


def check_patch_cli(
    boundary_path: Path,
    patch_path: Path,
    *,
    worktree: Path | None = None,
    out: TextIO | None = None,
) -> int:
    """`metaeval improve check-patch --boundary BOUNDARY.json PATCH`: 0 accepted, 1 rejected."""
    boundary = load_boundary(boundary_path)
    try:
        raw = Path(patch_path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read patch: {exc}", file=str(patch_path)) from exc
    verdict = check_patch(raw.decode("utf-8", "surrogateescape"), boundary, worktree=worktree)
    # the reasons quote the patch's file names: no escape sequence of theirs reaches a terminal
    print(printable(format_verdict(verdict)), file=out or sys.stdout)
    return 0 if verdict.accepted else 1


__all__ = [
    "BENCHMARK_DIR",
    "REASON_CODES",
    "FileChange",
    "MutationBoundary",
    "PatchVerdict",
    "Reason",
    "boundary_from_profile",
    "check_patch",
    "check_patch_cli",
    "format_verdict",
    "load_boundary",
    "narrow",
]
