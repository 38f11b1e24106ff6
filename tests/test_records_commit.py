"""Group commit: records leave the caller's thread, one fsync covers many, order is kept."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from metaeval.records import RunDir
from metaeval.records.jsonl import JsonlWriter


@pytest.fixture
def disk_log(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, int]]:
    """Every line write and fsync of a JsonlWriter, with the file size at that moment.

    fsync is slowed down (as on a real disk) so that records pile up behind it."""
    events: list[tuple[str, str, int]] = []
    lock = threading.Lock()
    write_line, fsync = JsonlWriter._write_line, JsonlWriter._fsync

    def logged_write(self: JsonlWriter, data: bytes) -> None:
        write_line(self, data)
        with lock:
            events.append(("write", self.path.name, self.path.stat().st_size))

    def logged_fsync(self: JsonlWriter) -> None:
        time.sleep(0.02)
        fsync(self)
        with lock:
            events.append(("fsync", self.path.name, self.path.stat().st_size))

    monkeypatch.setattr(JsonlWriter, "_write_line", logged_write)
    monkeypatch.setattr(JsonlWriter, "_fsync", logged_fsync)
    return events


def open_run(tmp_path: Path) -> RunDir:
    return RunDir.open(tmp_path / "run", protocol="t", config={}, hashes={"x": "y"}, seeds={})


def test_one_fsync_covers_many_records_and_each_is_durable_before_it_counts(
    tmp_path: Path, disk_log: list[tuple[str, str, int]]
) -> None:
    run = open_run(tmp_path)
    path = run.path / "cells.jsonl"
    durable_when_done: dict[int, int] = {}

    def fsynced_size() -> int:
        sizes = [size for kind, name, size in disk_log if kind == "fsync" and name == path.name]
        return max(sizes, default=0)

    def remember(index: int):
        return lambda _future: durable_when_done.__setitem__(index, fsynced_size())

    futures = []
    for index in range(200):
        future = run.submit([("cells", {"cell": index, "status": "ok"})])
        future.add_done_callback(remember(index))
        futures.append(future)
    for future in futures:
        future.result(timeout=30)
    data = path.read_bytes()
    fsyncs = [e for e in disk_log if e[0] == "fsync" and e[1] == path.name]
    assert len(fsyncs) < 50, len(fsyncs)  # 200 records, far fewer fsyncs
    # A record's future completed only after an fsync that covered its whole line.
    for index in range(200):
        end = data.index(json.dumps(index).encode() + b',"created_at"')
        end = data.index(b"\n", end) + 1
        assert durable_when_done[index] >= end
    run.close()
    lines = [json.loads(line) for line in data.splitlines()]
    assert [r["cell"] for r in lines] == list(range(200))


def test_append_from_many_threads_shares_fsyncs(
    tmp_path: Path, disk_log: list[tuple[str, str, int]]
) -> None:
    run = open_run(tmp_path)
    writer = run.records("cells")
    threads = [threading.Thread(target=lambda i=i: writer.append({"cell": i})) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    fsyncs = [e for e in disk_log if e[0] == "fsync" and e[1] == "cells.jsonl"]
    assert len(fsyncs) < 40
    assert sorted(r["cell"] for r in run.read("cells")) == list(range(40))
    run.close()


def test_a_stage_is_durable_before_the_next_stage_is_written(
    tmp_path: Path, disk_log: list[tuple[str, str, int]]
) -> None:
    run = open_run(tmp_path)
    futures = [
        run.submit([("findings", {"cell": i, "n": n}) for n in range(3)], [("audits", {"cell": i})])
        for i in range(30)
    ]
    for future in futures:
        future.result(timeout=30)
    findings_end = (run.path / "findings.jsonl").stat().st_size
    # Every write to audits.jsonl came after an fsync of findings.jsonl covering the findings
    # written so far (which include the cell's own findings: they were queued first).
    for position, (kind, name, _size) in enumerate(disk_log):
        if kind != "write" or name != "audits.jsonl":
            continue
        writes = [s for k, n, s in disk_log[:position] if k == "write" and n == "findings.jsonl"]
        syncs = [s for k, n, s in disk_log[:position] if k == "fsync" and n == "findings.jsonl"]
        assert syncs and max(syncs) >= max(writes)
    assert findings_end == max(s for k, n, s in disk_log if n == "findings.jsonl")
    audits = run.read("audits")
    assert sorted(r["cell"] for r in audits) == list(range(30))
    assert len(run.read("findings")) == 90
    run.close()


def test_a_failed_write_fails_only_its_own_commit(tmp_path: Path) -> None:
    run = open_run(tmp_path)
    broken = run.records("broken")
    broken.close()  # a closed writer refuses lines
    good = run.submit([("cells", {"cell": 1})])
    bad = run.submit([("broken", {"cell": 2})])
    with pytest.raises(ValueError, match="closed"):
        bad.result(timeout=10)
    good.result(timeout=10)
    assert [r["cell"] for r in run.read("cells")] == [1]
    run.close()


def test_close_writes_what_is_pending_and_later_submits_fail(tmp_path: Path) -> None:
    run = open_run(tmp_path)
    for i in range(50):
        run.submit([("cells", {"cell": i})])
    run.close()
    lines = (tmp_path / "run" / "cells.jsonl").read_text().splitlines()
    assert [json.loads(line)["cell"] for line in lines] == list(range(50))
    with pytest.raises(ValueError):
        run.submit([("cells", {"cell": 99})])


def test_secrets_set_after_the_first_record_are_still_redacted(tmp_path: Path) -> None:
    run = open_run(tmp_path)
    writer = run.records("cells")
    writer.append({"note": "before"})
    os.environ["PERF_TEST_API_KEY"] = "s3cr3t-value-123"
    try:
        writer.append({"note": "leaked s3cr3t-value-123?"})
    finally:
        del os.environ["PERF_TEST_API_KEY"]
    writer.append({"note": "after s3cr3t-value-123"})
    notes = [r["note"] for r in run.read("cells")]
    assert notes == ["before", "leaked [REDACTED]?", "after s3cr3t-value-123"]
    run.close()


def test_a_commit_its_caller_cancelled_is_still_written_and_the_writer_lives_on(
    tmp_path: Path,
) -> None:
    """Ctrl-C cancels the asyncio tasks waiting on record futures, which cancels those
    futures. The writer thread must still write their lines, keep serving later commits,
    and let close() return (it used to die on InvalidStateError and hang the exit)."""
    from metaeval.records.commit import GroupCommitter

    gate = threading.Event()
    committer = GroupCommitter("test", before_commit=lambda: gate.wait(30))
    writer = JsonlWriter(tmp_path / "cells.jsonl", committer=committer)
    first = writer.submit({"cell": 1})  # the writer thread waits in before_commit
    assert first.cancel()  # the caller stops waiting, as an interrupted run does
    gate.set()
    writer.submit({"cell": 2}).result(timeout=10)  # the writer still serves
    closer = threading.Thread(target=committer.close)
    closer.start()
    closer.join(10)
    assert not closer.is_alive()
    lines = (tmp_path / "cells.jsonl").read_text().splitlines()
    assert [json.loads(line)["cell"] for line in lines] == [1, 2]
