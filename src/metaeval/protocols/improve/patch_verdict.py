"""A patch checker's verdict: the stable reason codes, the reasons found, the files changed.

The meaning of every reason code is listed in `patch_check`'s docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from metaeval.protocols.improve.diff_section import ChangeKind

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


class Reason(BaseModel):
    """Why a proposal is invalid: a code, the file it concerns (when one does) and a
    sentence. `path` is written when it was given, even as None (the boundary check gives
    it for every reason; a reason about the proposal as a whole has none)."""

    code: str
    path: str | None = None
    detail: str

    @model_serializer(mode="wrap")
    def _path_when_given(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if "path" not in self.model_fields_set and isinstance(data, dict):
            data.pop("path", None)
        return data


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


@dataclass
class ReasonCollector:
    """The reasons found so far, each (code, path) once (a malformed one once per detail)."""

    reasons: list[Reason] = field(default_factory=list)
    seen: set[tuple[str | None, ...]] = field(default_factory=set)

    def add(self, code: str, path: str | None, detail: str) -> None:
        key = (code, path) if path is not None and code != "malformed" else (code, path, detail)
        if key in self.seen:
            return
        self.seen.add(key)
        self.reasons.append(Reason(code=code, path=path, detail=detail))


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
