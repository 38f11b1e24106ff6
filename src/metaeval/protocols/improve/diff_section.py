"""One file section of a patch, and the consistency checks git applies to it once read.

`finish_section` decides a section's old and new name and its kind of change (add, modify,
delete, rename, copy), and records every way its header lines disagree with one another:
git trusts the `---`/`+++` names over the `diff --git` line and silently turns a section whose
two names differ into a rename, so a section whose names disagree is malformed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from metaeval.protocols.improve.diff_names import MAX_NAME_CHARS, strip_components

ChangeKind = Literal["add", "modify", "delete", "rename", "copy"]


@dataclass
class FileSection:
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
    # results of finish_section
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


def finish_section(sec: FileSection) -> None:
    """Settle `sec`'s names and change kind; append every inconsistency to `sec.problems`."""
    is_rename = bool(sec.rename_from or sec.rename_to)
    is_copy = bool(sec.copy_from or sec.copy_to)
    if sec.fmt == "traditional":
        sec.is_new, sec.is_delete = sec.minus_null, sec.plus_null
    _check_header_kinds(sec, is_rename, is_copy)
    olds = list(dict.fromkeys([*sec.minus, *sec.rename_from, *sec.copy_from]))
    news = list(dict.fromkeys([*sec.plus, *sec.rename_to, *sec.copy_to]))
    old, new = _pick_names(sec, olds, news, moved=is_rename or is_copy)
    _check_diff_git_line(sec, olds, news, old, new)
    _check_hunk_sides(sec)
    sec.old_path, sec.new_path = old, new
    _set_change(sec, is_rename, is_copy)


def _check_header_kinds(sec: FileSection, is_rename: bool, is_copy: bool) -> None:
    """New/deleted/rename/copy/mode lines that cannot go together, or come without their pair."""
    p = sec.problems
    where = f"line {sec.line_no}"
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
    if bool(sec.old_mode_lines) != bool(sec.new_mode_lines) and not (sec.is_new or sec.is_delete):
        p.append(f"{where}: 'old mode' and 'new mode' must come together")
    if sec.minus_null and sec.plus_null:
        p.append(f"{where}: both sides are /dev/null")


def _pick_names(
    sec: FileSection, olds: list[str], news: list[str], *, moved: bool
) -> tuple[str | None, str | None]:
    """The old and new file name git would use; a problem for every name that disagrees."""
    p = sec.problems
    where = f"line {sec.line_no}"
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
    if old and new and old != new and not moved:
        p.append(
            f"{where}: old name {old!r} and new name {new!r} differ without a rename or copy "
            "header (git apply would move the file)"
        )
    if moved and old and old == new:
        p.append(f"{where}: a rename or copy onto the same name")
    return old, new


def _check_diff_git_line(
    sec: FileSection, olds: list[str], news: list[str], old: str | None, new: str | None
) -> None:
    """The `diff --git` line must name the files the section changes."""
    p = sec.problems
    where = f"line {sec.line_no}"
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
    elif sec.fmt == "git" and old and new and not _header_split_matches(sec, old, new):
        p.append(f"{where}: the diff --git line does not name {old!r} and {new!r}")


def _check_hunk_sides(sec: FileSection) -> None:
    """Hunks that contradict a new or deleted file; what a traditional diff may add or delete."""
    where = f"line {sec.line_no}"
    if sec.is_new and any(o for o, _n in sec.hunks):
        sec.problems.append(f"{where}: a new file whose hunk removes lines")
    if sec.is_delete and any(nw for _o, nw in sec.hunks):
        sec.problems.append(f"{where}: a deleted file whose hunk adds lines")
    if sec.fmt == "traditional" and sec.hunks:
        single = len(sec.hunks) == 1
        sec.may_add = sec.is_new or (single and sec.hunks[0][0] == 0)
        sec.may_delete = sec.is_delete or all(nw == 0 for _o, nw in sec.hunks)


def _set_change(sec: FileSection, is_rename: bool, is_copy: bool) -> None:
    """The section's kind of change; a section that changes nothing is a problem."""
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
        sec.problems.append(f"line {sec.line_no}: file section without any change")


def _header_split_matches(sec: FileSection, old: str, new: str) -> bool:
    rest = sec.header_rest.split("\r", 1)[0]
    if len(rest) > 2 * MAX_NAME_CHARS + 8:
        return False
    for k, ch in enumerate(rest):
        if ch in " \t" and (
            strip_components(rest[:k], 1) == old and strip_components(rest[k + 1 :], 1) == new
        ):
            return True
    return False
