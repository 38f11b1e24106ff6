"""Append-only JSON Lines: one fsync'd ``os.write`` per record, tolerant reading.

Durability model: each record is serialised to a single line and written with one
``os.write`` on an ``O_APPEND`` descriptor, then fsync'd (one fsync may cover several
records appended together, see `metaeval.records.commit`). A process killed mid-write
can leave at most one torn (partial) last line. Writers never rewrite or truncate:
before their first append to a file that does not end with a newline they add one,
so the torn fragment stays on disk as its own (unparseable) line and the new record
starts on a fresh line. Readers skip unparseable lines and report them.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaeval.errors import with_filename
from metaeval.records.commit import GroupCommitter
from metaeval.records.durable import fsync_dir
from metaeval.records.nofollow import open_file, open_for_reading
from metaeval.records.redact import redact


def dumps_line(obj: Mapping[str, Any]) -> bytes:
    """Canonical one-line encoding of a record (sorted keys, UTF-8, compact) plus newline."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class JsonlWriter:
    """Thread-safe, append-only writer of one JSONL file.

    Every record passes through `redact` (pass ``scrub=False`` to disable) and is
    written with one ``os.write`` and made durable with ``os.fsync``. Nothing is added to
    the record beyond what the caller passes. With a `GroupCommitter` (a run directory's
    writer thread) the writes and fsyncs happen on that thread, grouped with other records;
    without one they happen in the caller's thread.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        scrub: bool = True,
        committer: GroupCommitter | None = None,
    ):
        self.path = Path(path)
        self._scrub = scrub
        self._committer = committer
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._closed = False

    def _open(self) -> int:
        # never through a link: a shared run directory may point a record file anywhere
        fd = open_file(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                fsync_dir(self.path.parent)  # (possibly) a new file: make its entry durable
            elif os.pread(fd, 1, size - 1) != b"\n":
                # A previous writer was killed mid-line: terminate the torn fragment.
                _write_all(fd, b"\n")
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _prepare(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        """The record as it will be written (subclasses stamp fields here)."""
        return obj

    def encode(self, obj: Mapping[str, Any]) -> bytes:
        """The line `append` would write for `obj` (checked, stamped, redacted)."""
        if not isinstance(obj, Mapping):
            raise TypeError(f"records must be dicts, got {type(obj).__name__}")
        record = self._prepare(obj)
        return dumps_line(redact(record) if self._scrub else record)

    def append(self, obj: Mapping[str, Any]) -> None:
        """Append one record (a dict) as one line; returns once it is on disk."""
        self.submit(obj).result()

    def submit(self, obj: Mapping[str, Any]) -> concurrent.futures.Future[None]:
        """Append one record without waiting; the future completes once it is on disk."""
        data = self.encode(obj)
        if self._committer is not None:
            return self._committer.submit([[(self, data)]])
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._write_line(data)
        self._fsync()
        future.set_result(None)
        return future

    def _write_line(self, data: bytes) -> None:
        with self._lock:
            if self._closed:
                raise ValueError(f"{self.path}: writer is closed")
            try:
                if self._fd is None:
                    self._fd = self._open()
                _write_all(self._fd, data)
            except OSError as exc:  # a full disk: the error names the record file
                raise with_filename(exc, self.path) from exc

    def _fsync(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.fsync(self._fd)
                except OSError as exc:
                    raise with_filename(exc, self.path) from exc

    def close(self) -> None:
        """Close the file descriptor; further appends raise ValueError."""
        with self._lock:
            self._closed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class JsonlProblem:
    """One line of a JSONL file that was skipped while reading.

    kind is "torn" (an incomplete record, typically from a killed writer) or
    "corrupt" (not a JSON object at all).
    """

    path: str
    line: int
    kind: str
    detail: str
    last: bool

    def __str__(self) -> str:
        what = "torn last line" if self.kind == "torn" and self.last else f"{self.kind} line"
        return f"{self.path}: line {self.line}: {what} ignored ({self.detail})"


def _classify(raw: bytes, unterminated: bool) -> tuple[dict[str, Any] | None, str, str]:
    """Parse one line: (record, "", "") or (None, kind, detail).

    An unparseable line without a trailing newline is torn. Elsewhere a line is
    called torn when it looks cut short (the JSON or UTF-8 ends prematurely, as
    after a repaired kill) and corrupt otherwise.
    """
    torn = (None, "torn", f"incomplete record of {len(raw)} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if unterminated or (exc.reason == "unexpected end of data" and exc.end == len(raw)):
            return torn
        return None, "corrupt", f"invalid UTF-8 at byte {exc.start}"
    try:
        obj = json.loads(text)
    except RecursionError:
        return None, "corrupt", "JSON nested too deeply"
    except json.JSONDecodeError as exc:
        if (
            unterminated
            or exc.msg.startswith("Unterminated string")
            or exc.pos >= len(text.rstrip())
        ):
            return torn
        return None, "corrupt", f"invalid JSON: {exc.msg} at column {exc.colno}"
    if not isinstance(obj, dict):
        return None, "corrupt", f"a JSON {type(obj).__name__}, not an object"
    return obj, "", ""


def iter_jsonl(
    path: str | os.PathLike[str], on_problem: Callable[[JsonlProblem], None] | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL file, passing each skipped line to `on_problem`.

    A missing file yields nothing. Blank lines are ignored silently. The file is read line by
    line (memory bounded by the longest line) and only if it is a regular file: a symlink,
    FIFO or device under a record file's name is refused with a ConfigError naming it (a
    shared run directory may point it anywhere, or hold a FIFO that would block).
    """
    p = Path(path)
    fd = open_for_reading(p)
    if fd is None:
        return
    with os.fdopen(fd, "rb") as handle:
        number, previous = 0, None
        for raw in handle:
            if previous is not None:
                yield from _record(p, number, previous, False, on_problem)
            number, previous = number + 1, raw
        if previous is not None:
            yield from _record(p, number, previous, True, on_problem)


def _record(
    path: Path,
    number: int,
    raw: bytes,
    last: bool,
    on_problem: Callable[[JsonlProblem], None] | None,
) -> Iterator[dict[str, Any]]:
    unterminated = last and not raw.endswith(b"\n")
    raw = raw.removesuffix(b"\n")
    if not raw.strip():
        return
    obj, kind, detail = _classify(raw, unterminated)
    if obj is not None:
        yield obj
    elif on_problem is not None:
        on_problem(JsonlProblem(str(path), number, kind, detail, last=last))


def read_jsonl(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[JsonlProblem]]:
    """Read a JSONL file into (records, problems); bad lines are skipped, never fatal."""
    problems: list[JsonlProblem] = []
    records = list(iter_jsonl(path, problems.append))
    return records, problems
