"""Delivering one task file to the auditors within the size caps.

`deliver_file` reads a file the task walk found regular (refused if it changed since) and says
what became of it (`Delivery`): its text, whole or shortened, or why it was skipped, and the
cut to list in `LoadedTask.cuts`. Binary files (a NUL byte in the first 8 KiB, or not UTF-8)
are skipped. A file longer than the file cap keeps its head and tail around one marker line
(`shorten_text`); once the task's budget is nearly used up, a file is left out instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from metaeval.tasks.safe_files import open_checked

BINARY_SNIFF_BYTES = 8192
MIN_BUDGET_SHARE = 512
"""Below this many bytes of task budget left, a file is omitted instead of shortened."""


@dataclass
class Delivery:
    """What became of one file: its delivered text (None when not delivered), the line for
    the task's skipped files, and the line for its cuts."""

    text: str | None = None
    raw_bytes: int = 0
    delivered_bytes: int = 0
    truncated: bool = False
    skipped: str | None = None
    cut: str | None = None


def deliver_file(
    path: Path, rel: str, *, max_file_bytes: int, max_task_bytes: int, used: int
) -> Delivery:
    """Read the file at `path` (shown as `rel`) within the file cap and what is left of the
    task budget after `used` bytes."""
    try:
        fd = open_checked(path)  # a file the walk found regular; refused if it changed since
    except OSError as exc:
        return _unreadable(rel, exc)
    try:
        return _deliver_open(fd, rel, max_file_bytes, max_task_bytes, used)
    except OSError as exc:
        return _unreadable(rel, exc)
    finally:
        os.close(fd)


def _deliver_open(
    fd: int, rel: str, max_file_bytes: int, max_task_bytes: int, used: int
) -> Delivery:
    size = os.fstat(fd).st_size
    remaining = max_task_bytes - used
    cap = max(0, min(max_file_bytes, remaining))
    if size > cap and remaining < MIN_BUDGET_SHARE:
        return _omitted(fd, rel, size, max_task_bytes)
    if size <= cap:
        return _whole(fd, rel, size)
    if cap == max_file_bytes:
        why = f"file cap {max_file_bytes} bytes"
    else:
        why = f"task budget: {remaining} of {max_task_bytes} bytes left"
    return _shortened(fd, rel, size, cap, why)


def _unreadable(rel: str, exc: OSError) -> Delivery:
    return Delivery(skipped=f"{rel}: unreadable ({exc.strerror or exc})")


def _nul_byte(rel: str) -> Delivery:
    return Delivery(skipped=f"{rel}: binary (NUL byte in the first 8 KiB)")


def _not_utf8(rel: str, exc: UnicodeDecodeError) -> Delivery:
    return Delivery(skipped=f"{rel}: binary (not UTF-8 at byte {exc.start})")


def _omitted(fd: int, rel: str, size: int, max_task_bytes: int) -> Delivery:
    """A text file left out: the task budget is used up."""
    head = _read_range(fd, 0, min(size, BINARY_SNIFF_BYTES))
    if b"\0" in head:
        return _nul_byte(rel)
    return Delivery(
        cut=f"{rel}: omitted ({size} bytes): the task budget of {max_task_bytes} bytes is used up"
    )


def _whole(fd: int, rel: str, size: int) -> Delivery:
    """A file within the caps, delivered whole."""
    data = _read_range(fd, 0, size)
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return _nul_byte(rel)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _not_utf8(rel, exc)
    return Delivery(text=text, raw_bytes=size, delivered_bytes=len(data))


def _shortened(fd: int, rel: str, size: int, cap: int, why: str) -> Delivery:
    """A file over the cap: its head and tail around a marker line (`shorten_text`)."""
    head_window = _read_range(fd, 0, min(size, cap))
    tail_window = _read_range(fd, max(0, size - cap), min(size, cap))
    total_newlines = _count_newlines(fd)
    if b"\0" in head_window[:BINARY_SNIFF_BYTES]:
        return _nul_byte(rel)
    try:
        text, kept = shorten_text(head_window, tail_window, size, total_newlines, cap)
    except UnicodeDecodeError as exc:
        return _not_utf8(rel, exc)
    return Delivery(
        text=text,
        raw_bytes=size,
        delivered_bytes=len(text.encode("utf-8")),
        truncated=True,
        cut=f"{rel}: shortened from {size} to {kept} bytes of content, {size - kept} omitted ({why})",
    )


def shorten_text(
    head_window: bytes, tail_window: bytes, size: int, total_newlines: int, cap: int
) -> tuple[str, int]:
    """Head and tail of a file around one marker line; returns (text, content bytes kept).

    `head_window` starts at the file's first byte and `tail_window` ends at its last (each
    at least `cap` bytes long, or the whole file). The head gets ceil(cap/2) bytes and the
    tail floor(cap/2), each cut back to a line boundary when the piece holds one (else to a
    UTF-8 character boundary). The marker line reads
    `[... metaeval: N bytes omitted (lines A-B of L) ...]`; the line numbers appear only
    when both cuts fell on line boundaries. Raises UnicodeDecodeError for non-UTF-8 pieces.
    """
    head_budget = cap - cap // 2
    tail_budget = cap // 2
    head = head_window[:head_budget]
    head_on_line = head.endswith(b"\n")
    if not head_on_line and b"\n" in head:
        head = head[: head.rindex(b"\n") + 1]
        head_on_line = True
    elif not head_on_line:
        head = _trim_utf8_end(head)

    tail = tail_window[len(tail_window) - tail_budget :] if tail_budget else b""
    start = len(tail_window) - len(tail)
    tail_on_line = start > 0 and tail_window[start - 1 : start] == b"\n"
    if tail and not tail_on_line and b"\n" in tail[:-1]:
        tail = tail[tail.index(b"\n") + 1 :]
        tail_on_line = True
    elif not tail_on_line:
        tail = _trim_utf8_start(tail)
    if not tail:
        tail_on_line = True

    kept = len(head) + len(tail)
    omitted = size - kept
    total_lines = total_newlines + (0 if tail_window.endswith(b"\n") or size == 0 else 1)
    if head_on_line and tail_on_line:
        first = head.count(b"\n") + 1
        tail_lines = tail.count(b"\n") + (0 if not tail or tail.endswith(b"\n") else 1)
        last = total_lines - tail_lines
        detail = f" (lines {first}-{last} of {total_lines})"
    else:
        detail = ""
    marker = f"[... metaeval: {omitted} bytes omitted{detail} ...]\n"
    if not head_on_line and head:
        marker = "\n" + marker
    return head.decode("utf-8") + marker + tail.decode("utf-8"), kept


def _trim_utf8_end(data: bytes) -> bytes:
    """Drop an incomplete multi-byte character at the end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # ASCII or the lead byte of a sequence
            length = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if length <= back else data[:-back]
    return data


def _trim_utf8_start(data: bytes) -> bytes:
    """Drop continuation bytes of a character cut at the start."""
    skip = 0
    while skip < len(data) and skip < 3 and data[skip] & 0xC0 == 0x80:
        skip += 1
    return data[skip:]


def _read_range(fd: int, offset: int, length: int) -> bytes:
    """`length` bytes of an open file from `offset` (fewer at its end)."""
    parts = []
    while length > 0:
        chunk = os.pread(fd, min(length, 1 << 20), offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(parts)


def _count_newlines(fd: int) -> int:
    count = 0
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        count += chunk.count(b"\n")
        offset += len(chunk)
    return count
