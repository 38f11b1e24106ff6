"""The bodies of a patch's file sections: hunks counted against their `@@` headers, and
`GIT binary patch` data decoded and inflated to its declared size, as `git apply` checks them.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib

from metaeval.protocols.improve.diff_section import FileSection

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchLines:
    """A patch split into lines, with the readers of section bodies; `_touch` flags a section
    that runs into a last line without a newline."""

    def __init__(self, text: str):
        self.lines = text.split("\n")
        self.unterminated: int | None = None
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        elif self.lines:
            self.unterminated = len(self.lines) - 1
        self.n = len(self.lines)

    def _touch(self, sec: FileSection, i: int) -> None:
        if i == self.unterminated:
            sec.problems.append(
                f"line {i + 1}: the patch ends without a newline inside a file section "
                "(git apply reads it as corrupt)"
            )

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
