"""The engine's cell loop: one rule sorts every way a cell ends, and a rerun retries only the
cells that ended on a transient infrastructure failure.

Cells run on the real local executor and write into a real run directory (fsynced JSONL).
The expected kinds come from the rule as written in `metaeval.transient`'s docstring: a parse
or validation error is final, a lost connection, a timeout, a killed worker process or a job
over its time limit is transient.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from metaeval.engine.cells import Cell, CellResult, Stages, plan_cells, run_cells
from metaeval.engine.process_lane import ProcessLane
from metaeval.records import RunDir

KEYS = ("name",)


def open_run(path: Path) -> RunDir:
    return RunDir.open(path, protocol="engine-test", config={}, hashes={}, seeds={})


def write(result: CellResult) -> Stages:
    (name,) = result.cell.key
    if result.kind == "ok":
        return [[("cells", {"name": name, "status": "ok", "value": result.value})]]
    return [
        [
            (
                "cells",
                {
                    "name": name,
                    "status": "error",
                    "infra_error": result.kind == "transient",
                    "error": result.error,
                },
            )
        ]
    ]


def _kill_myself() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def bodies(lane: ProcessLane, attempt: int) -> dict[str, object]:
    """Cell bodies by name; on the second attempt every transient cause has passed."""

    def raises(exc: BaseException):
        def body():
            if attempt == 1:
                raise exc
            return "recovered"

        return body

    def killed_worker():
        if attempt == 1:
            lane.call(_kill_myself)
        return lane.call(int, "7")  # a fresh pool computes it

    def slow():
        time.sleep(2.0 if attempt == 1 else 0.0)
        return "in time"

    return {
        "ok": lambda: 42,
        "parse": raises(json.JSONDecodeError("Expecting value", "x", 0)),
        "validation": raises(ValueError("bad field 'price'")),
        "connection": raises(ConnectionResetError("peer reset")),
        "timeout-error": raises(TimeoutError("read timed out")),
        "killed-worker": killed_worker,
        "over-time-limit": slow,
    }


def run_once(path: Path, lane: ProcessLane, attempt: int) -> tuple[dict[str, CellResult], int]:
    run = open_run(path)
    try:
        fns = bodies(lane, attempt)
        plan = plan_cells(run, "cells", KEYS, [(name,) for name in fns])
        cells = [
            Cell(key=key, fn=fns[key[0]], timeout_s=1.0 if key[0] == "over-time-limit" else None)
            for key, _ in plan.todo
        ]
        results = run_cells(run, cells, write, concurrency=4, progress=False, description="t")
        return {r.cell.key[0]: r for r in results}, plan.reused
    finally:
        run.close()


def test_one_rule_sorts_every_ending_and_a_rerun_retries_only_the_transient_ones(
    tmp_path: Path,
) -> None:
    lane = ProcessLane(1)
    try:
        first, reused = run_once(tmp_path / "run", lane, attempt=1)
        assert reused == 0
        kinds = {name: r.kind for name, r in first.items()}
        assert kinds == {
            "ok": "ok",
            "parse": "final",
            "validation": "final",
            "connection": "transient",
            "timeout-error": "transient",
            "killed-worker": "transient",
            "over-time-limit": "transient",
        }
        assert first["ok"].value == 42
        assert first["validation"].error == "ValueError: bad field 'price'"
        assert "ConnectionResetError: peer reset" in (first["connection"].error or "")
        assert "BrokenProcessPool" in (first["killed-worker"].error or "")
        assert "exceeded 1.0s" in (first["over-time-limit"].error or "")

        second, reused = run_once(tmp_path / "run", lane, attempt=2)
        assert reused == 3  # ok, parse and validation are final: not run again
        assert sorted(second) == ["connection", "killed-worker", "over-time-limit", "timeout-error"]
        assert {r.kind for r in second.values()} == {"ok"}
        assert second["killed-worker"].value == 7
    finally:
        lane.close()
    lines = (tmp_path / "run" / "cells.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 7 + 4  # one record per cell per run, nothing lost or doubled
    infra = sorted(r["name"] for r in records if r.get("infra_error"))
    assert infra == ["connection", "killed-worker", "over-time-limit", "timeout-error"]


def test_a_recovery_limit_leaves_a_cell_that_keeps_failing(tmp_path: Path) -> None:
    run = open_run(tmp_path / "run")
    try:
        for _ in range(3):
            run.records("cells").append({"name": "flaky", "status": "error", "infra_error": True})
        run.records("cells").append({"name": "done", "status": "ok"})
        keys = [("flaky",), ("done",), ("new",)]
        plan = plan_cells(run, "cells", KEYS, keys, recovery_limit=2)
        assert (plan.todo, plan.reused, plan.exhausted) == ([(("new",), 0)], 1, 1)
        plan = plan_cells(run, "cells", KEYS, keys, recovery_limit=3)
        assert plan.todo == [(("flaky",), 3), (("new",), 0)]
    finally:
        run.close()
