"""A reader of unified and git diffs that reads a patch the way `git apply` does.

Patch paths are read the way `git apply` reads them with its default `-p1`: the first
component of a `diff --git`, `---` and `+++` name is stripped, `rename`/`copy` lines are taken
as they are, C-style quoted names ("a/with space", octal escapes) are unquoted. The validator
checks *every* name a file section mentions, not only the one git would end up using: git
trusts the `---`/`+++` names over the `diff --git` line, and silently turns a section whose
two names differ into a rename, so checking only the header would let a patch through that
rewrites a file the header never names. A section whose names disagree is also malformed.

`parse_patch(text)` returns the file sections with every name each mentions, their modes,
hunk line counts and binary data checks, and the problems that make the patch malformed.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from dataclasses import dataclass, field
from typing import Literal

MAX_NAME_CHARS = 4096  # PATH_MAX: a longer name is no file git could write (and bounds our work)

ChangeKind = Literal["add", "modify", "delete", "rename", "copy"]


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
        self.sections: list[FileSection] = []
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

    def _touch(self, sec: FileSection, i: int) -> None:
        if i == self.unterminated:
            sec.problems.append(
                f"line {i + 1}: the patch ends without a newline inside a file section "
                "(git apply reads it as corrupt)"
            )

    # -- git sections --------------------------------------------------------------------------

    def _git_section(self, i: int) -> int:
        lines = self.lines
        sec = FileSection(line_no=i + 1, fmt="git")
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

    def _parse_git_header(self, sec: FileSection) -> None:
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

    def _name(self, sec: FileSection, text: str, i: int, *, strip: int, stop_at_tab: bool) -> str:
        name = _read_name(text, strip=strip, stop_at_tab=stop_at_tab)
        if name is None:
            sec.problems.append(f"line {i + 1}: cannot read a file name from {text[:60]!r}")
            return ""
        if len(name) > MAX_NAME_CHARS:
            sec.problems.append(f"line {i + 1}: file name longer than {MAX_NAME_CHARS} characters")
            return ""
        return name

    def _mode(self, sec: FileSection, label: str, text: str, i: int) -> str | None:
        mode = text.rstrip("\r").strip()
        if not _MODE_RE.match(mode):
            sec.problems.append(f"line {i + 1}: invalid {label} {text[:20]!r}")
            return None
        sec.modes.append((label, mode))
        return mode

    def _git_header_line(self, sec: FileSection, line: str, i: int) -> bool:
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
        sec = FileSection(line_no=i + 1, fmt="traditional")
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

    def _hunks(self, sec: FileSection, i: int) -> int:
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

    def _binary(self, sec: FileSection, i: int) -> int:
        sec.binary = True
        sec.binary_data = True
        i, ok = self._binary_hunk(sec, i)
        if ok and i < self.n and self.lines[i].startswith(("literal ", "delta ")):
            i, _ok = self._binary_hunk(sec, i)
        return i

    def _binary_hunk(self, sec: FileSection, i: int) -> tuple[int, bool]:
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

    def _finish(self, sec: FileSection) -> None:
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
    def _header_split_matches(sec: FileSection, old: str, new: str) -> bool:
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


def parse_patch(text: str) -> _Parser:
    """Read `text` as `git apply` would: `.sections` (file sections), `.problems` (patch-level)."""
    return _Parser(text).parse()
