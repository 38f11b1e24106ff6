"""Append-only JSONL: durability, concurrency, torn lines, a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import metaeval
from metaeval.errors import ConfigError
from metaeval.records import JsonlWriter, read_jsonl

SRC = str(Path(metaeval.__file__).resolve().parent.parent)


def test_append_reads_back_equal_and_canonical(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    recs = [{"b": 2, "a": "é ü", "n": None, "l": [1, 2.5, True]}, {"x": {"y": "z"}}]
    with JsonlWriter(path) as w:
        for r in recs:
            w.append(r)
    records, problems = read_jsonl(path)
    assert records == recs
    assert problems == []
    lines = path.read_bytes().decode("utf-8").splitlines()
    assert lines[0] == '{"a":"é ü","b":2,"l":[1,2.5,true],"n":null}'
    assert path.read_bytes().endswith(b"\n")


def test_writer_adds_nothing_and_rejects_non_dicts(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    w = JsonlWriter(path)
    w.append({"k": 1})
    try:
        w.append([1, 2])  # type: ignore[arg-type]
    except TypeError:
        pass
    else:
        raise AssertionError("a list was accepted as a record")
    w.close()
    assert path.read_bytes() == b'{"k":1}\n'


def test_concurrent_appends_8_threads_x_200(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    w = JsonlWriter(path)

    def work(t: int) -> None:
        for i in range(200):
            w.append({"t": t, "i": i, "pad": "x" * (i % 37)})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    w.close()
    raw_lines = path.read_bytes().split(b"\n")
    assert raw_lines[-1] == b""
    assert len(raw_lines) - 1 == 1600
    records, problems = read_jsonl(path)
    assert problems == []
    assert len(records) == 1600
    assert {(r["t"], r["i"]) for r in records} == {(t, i) for t in range(8) for i in range(200)}
    # Per-thread order is preserved.
    for t in range(8):
        assert [r["i"] for r in records if r["t"] == t] == list(range(200))


def test_torn_last_line_is_reported_then_kept_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with JsonlWriter(path) as w:
        for i in range(3):
            w.append({"i": i})
    torn = b'{"i":3,"payload":"half writ'
    with open(path, "ab") as f:  # what a killed writer leaves behind
        f.write(torn)

    records, problems = read_jsonl(path)
    assert records == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert len(problems) == 1
    msg = str(problems[0])
    assert str(path) in msg
    assert "line 4" in msg
    assert "torn last line" in msg and "ignored" in msg

    before = path.read_bytes()
    with JsonlWriter(path) as w:
        w.append({"i": 4})
    after = path.read_bytes()
    assert after.startswith(before)  # nothing rewritten or truncated
    assert after == before + b'\n{"i":4}\n'
    records, problems = read_jsonl(path)
    assert records == [{"i": 0}, {"i": 1}, {"i": 2}, {"i": 4}]
    assert [p.line for p in problems] == [4]
    assert problems[0].kind == "torn"


def test_corrupt_middle_line_is_named_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"i":0}\nnot json at all}\n[1,2]\n{"i":1}\n\xff\xfe\n')
    records, problems = read_jsonl(path)
    assert records == [{"i": 0}, {"i": 1}]
    assert [(p.line, p.kind) for p in problems] == [(2, "corrupt"), (3, "corrupt"), (5, "corrupt")]
    assert all(str(path) in str(p) and "corrupt line ignored" in str(p) for p in problems)


def test_missing_file_reads_empty(tmp_path: Path) -> None:
    assert read_jsonl(tmp_path / "nope.jsonl") == ([], [])


def test_reading_and_writing_refuse_a_linked_record_file_by_one_rule(tmp_path: Path) -> None:
    """A record file linked elsewhere is refused on read as on write, with the same words."""
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b'{"planted": true}\n')
    link = tmp_path / "cells.jsonl"
    link.symlink_to(outside)
    with pytest.raises(ConfigError) as read_error:
        read_jsonl(link)
    with pytest.raises(ConfigError) as write_error, JsonlWriter(link) as writer:
        writer.append({"i": 0})
    assert str(read_error.value) == str(write_error.value)
    assert str(link) in str(read_error.value) and "is a symbolic link" in str(read_error.value)
    assert outside.read_bytes() == b'{"planted": true}\n'


def test_complete_last_record_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    path.write_bytes(b'{"i":0}\n{"i":1}')
    assert read_jsonl(path) == ([{"i": 0}, {"i": 1}], [])
    with JsonlWriter(path) as w:
        w.append({"i": 2})
    assert path.read_bytes() == b'{"i":0}\n{"i":1}\n{"i":2}\n'


_WRITER = """
import sys
from metaeval.records import JsonlWriter
w = JsonlWriter(sys.argv[1])
i = 0
while True:
    # Sizes up to ~300 KB make a kill in the middle of a write plausible.
    w.append({"i": i, "pad": "y" * ((i * 7919) % 300_000)})
    i += 1
"""


def test_sigkill_mid_run_loses_nothing_written(tmp_path: Path) -> None:
    path = tmp_path / "k.jsonl"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists() and path.read_bytes().count(b"\n") >= 40:
                break
            assert proc.poll() is None, "writer died on its own"
            time.sleep(0.02)
        else:
            raise AssertionError("writer produced too few records")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    records, problems = read_jsonl(path)
    assert len(records) >= 40
    # Every parsed line is a complete record; none duplicated; no gaps.
    assert [r["i"] for r in records] == list(range(len(records)))
    assert all(r["pad"] == "y" * ((r["i"] * 7919) % 300_000) for r in records)
    # At most the last line can be torn.
    assert all(p.kind == "torn" and p.last for p in problems)
    assert len(problems) <= 1

    before = path.read_bytes()
    with JsonlWriter(path) as w:
        w.append({"i": "after-kill"})
    assert path.read_bytes().startswith(before)
    records2, problems2 = read_jsonl(path)
    assert records2 == [*records, {"i": "after-kill"}]
    assert len(problems2) == len(problems)


def test_records_are_valid_single_lines_even_with_newlines_in_values(tmp_path: Path) -> None:
    path = tmp_path / "nl.jsonl"
    with JsonlWriter(path) as w:
        w.append({"text": "line1\nline2\r\n\u2028end"})
    data = path.read_bytes()
    assert data.count(b"\n") == 1
    assert json.loads(data) == {"text": "line1\nline2\r\n\u2028end"}
    assert read_jsonl(path)[0] == [{"text": "line1\nline2\r\n\u2028end"}]


def test_reading_refuses_links_and_fifos_and_survives_deep_lines(tmp_path):
    """A shared run directory may hold a record file linked to a host file, a FIFO (which
    would block a plain read) or a line nested past Python's recursion limit."""
    import os

    import pytest

    from metaeval.errors import ConfigError
    from metaeval.records.jsonl import iter_jsonl, read_jsonl

    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"planted": "SECRET-MARKER"}\n')
    link = tmp_path / "findings.jsonl"
    link.symlink_to(secret)
    with pytest.raises(ConfigError, match="findings.jsonl") as info:
        list(iter_jsonl(link))
    assert "SECRET-MARKER" not in str(info.value)
    fifo = tmp_path / "cells.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="cells.jsonl"):
        list(iter_jsonl(fifo))  # refused at once, never blocks
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"a": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n" + '{"b": 2}\n')
    records, problems = read_jsonl(deep)
    assert records == [{"a": 1}, {"b": 2}]
    assert [(p.line, p.kind) for p in problems] == [(2, "corrupt")]
