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
Its parts: `diff_names` reads quoted names, `diff_bodies` reads hunks and binary data,
`diff_section` checks that a section's header lines agree with one another.
"""

from __future__ import annotations

import re

from metaeval.protocols.improve.diff_bodies import PatchLines
from metaeval.protocols.improve.diff_names import (
    MAX_NAME_CHARS,
    is_dev_null,
    read_name,
    strip_components,
    unquote,
)
from metaeval.protocols.improve.diff_section import FileSection, finish_section

_INDEX_RE = re.compile(r"^([0-9a-fA-F]+)\.\.([0-9a-fA-F]+)(?: (\S+))?\s*$")
_MODE_RE = re.compile(r"^[0-7]{6}$")


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


class _Parser(PatchLines):
    def __init__(self, text: str):
        super().__init__(text)
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
        finish_section(sec)
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
            a_raw, tail = unquote(rest)
            if a_raw is None:
                sec.problems.append(f"line {sec.line_no}: bad quoting in the diff --git line")
                return
            tail = tail.lstrip(" ")
            b_raw = unquote(tail)[0] if tail.startswith('"') else tail
        elif '"' in rest:
            q = rest.index('"')
            a_raw, b_raw = rest[:q].rstrip(" \t"), unquote(rest[q:])[0]
        else:
            for k, ch in enumerate(rest):
                if ch in " \t":
                    a = strip_components(rest[:k], 1)
                    if a is not None and a == strip_components(rest[k + 1 :], 1):
                        sec.def_name = a
                        sec.header_names = [a]
                        return
            return  # two different unquoted names: only usable for a consistency check
        if b_raw is None:
            sec.problems.append(f"line {sec.line_no}: bad quoting in the diff --git line")
            return
        a, b = strip_components(a_raw, 1), strip_components(b_raw, 1)
        sec.header_names = [x for x in (a, b) if x is not None]
        if a is not None and a == b:
            sec.def_name = a

    def _name(self, sec: FileSection, text: str, i: int, *, strip: int, stop_at_tab: bool) -> str:
        name = read_name(text, strip=strip, stop_at_tab=stop_at_tab)
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
            if is_dev_null(text):
                sec.minus_null = True
            else:
                sec.minus.append(self._name(sec, text, i, strip=1, stop_at_tab=True))
        elif line.startswith("+++ "):
            text = after("+++ ")
            if is_dev_null(text):
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
            if is_dev_null(text):
                setattr(sec, null_attr, True)
                continue
            raw = read_name(text, strip=0, stop_at_tab=True)
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
        finish_section(sec)
        self.sections.append(sec)
        return i


def parse_patch(text: str) -> _Parser:
    """Read `text` as `git apply` would: `.sections` (file sections), `.problems` (patch-level)."""
    return _Parser(text).parse()
