"""`metaeval view` as the progress screen of a run: while a run appends records, the state
endpoint's version changes, the JSON API and the run's page show the new cells and findings,
and a page open in headless Chromium swaps in the new findings without a reload."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from metaeval.records import RunDir
from test_view import BENCH, start_viewer, stop
from test_view_browser import Chromium

MODEL = "scripted/live"


def finding(task: str, attempt: str, n: int) -> dict:
    return {
        "task_id": task,
        "attempt": attempt,
        "category": "ENV",
        "subcategory": "ENV-PATH",
        "severity": "High",
        "finding_type": "Bug",
        "title": f"Live finding number {n} <b>bold?</b>",
        "description": "solution/solve.sh reads a path the task never creates.",
        "evidence": [{"file": "solution/solve.sh", "line_start": 6, "line_end": 6}],
        "confidence": 0.9,
        "source": MODEL,
        "protocol": "definition",
    }


def open_run(path: Path, tasks: list[str]) -> RunDir:
    config = {
        "benchmark": str(BENCH),
        "models": [MODEL],
        "static_only": False,
        "tier": "definition",
        "tasks": tasks,
        "model_tasks": tasks,
    }
    return RunDir.open(path, protocol="audit", config=config, hashes={"b": "x"}, seeds={})


def add_cell(run: RunDir, task: str, n: int) -> None:
    attempt = f"{n:012x}"
    cell = {"task_id": task, "source": MODEL, "attempt": attempt, "status": "ok",
            "infra_error": False, "audit_failure": False, "n_findings": 1, "cost_usd": 0.0,
            "usage": {"input_tokens": 10, "output_tokens": 5}}  # fmt: skip
    run.submit([("findings", finding(task, attempt, n))], [("audits", cell)])
    run.flush()


def get_json(viewer, path: str) -> dict:
    status, headers, body = viewer.get(path)
    assert status == 200 and headers["Content-Type"] == "application/json", (path, body[:500])
    return json.loads(body)


def wait_for(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_state_api_and_page_follow_a_run_that_appends(tmp_path: Path) -> None:
    tasks = [f"t{n}" for n in range(6)]  # 12 cells planned: the static source and the model
    run = open_run(tmp_path / "runs" / "live", tasks)
    viewer = start_viewer(str(tmp_path / "runs"))
    try:
        add_cell(run, "t0", 0)
        rid = viewer.run_id("live")
        listed = get_json(viewer, "/api/state")
        first = get_json(viewer, f"/api/run/{rid}/state")
        assert listed["runs"] == {rid: first["version"]}
        assert first["running"] is True and "audits.jsonl" in first["files"]
        assert get_json(viewer, f"/api/run/{rid}/findings")["total"] == 1
        assert "running (1 of 12 cells)" in viewer.page(f"/run/{rid}")
        # the run appends in another thread while the test polls over HTTP
        writer = threading.Thread(
            target=lambda: [add_cell(run, f"t{n}", n) or time.sleep(0.2) for n in range(1, 4)]
        )
        writer.start()
        seen = {first["version"]}
        totals = []
        while writer.is_alive() or len(totals) < 1:
            state = get_json(viewer, f"/api/run/{rid}/state")
            if state["version"] not in seen:
                seen.add(state["version"])
                totals.append(get_json(viewer, f"/api/run/{rid}/findings")["total"])
            time.sleep(0.05)
        writer.join()
        final = wait_for(lambda: get_json(viewer, f"/api/run/{rid}/findings")["total"] == 4)
        assert final and len(seen) >= 2 and totals == sorted(totals)
        size = get_json(viewer, f"/api/run/{rid}/state")["files"]["audits.jsonl"][0]
        assert size == (tmp_path / "runs" / "live" / "audits.jsonl").stat().st_size
        assert get_json(viewer, "/api/state")["version"] != listed["version"]
        assert "running (4 of 12 cells)" in viewer.page("/")  # the runs list
        page = viewer.page(f"/run/{rid}")
        assert "running (4 of 12 cells)" in page
        assert "Live finding number 3 &lt;b&gt;bold?&lt;/b&gt;" in page
        # the JSON API: runs, one run, findings (filtered), cells (paginated)
        runs = get_json(viewer, "/api/runs")
        assert [(r["id"], r["protocol"]) for r in runs] == [(rid, "audit")]
        one = get_json(viewer, f"/api/run/{rid}")
        assert one["status"] == "running (4 of 12 cells)" and one["headline"]["findings"] == 4
        items = get_json(viewer, f"/api/run/{rid}/findings?task=t2")["items"]
        assert [i["title"] for i in items] == ["Live finding number 2 <b>bold?</b>"]
        assert items[0]["url"] == f"/run/{rid}/finding/{items[0]['index']}"
        cells = get_json(viewer, f"/api/run/{rid}/cells?per_page=3&page=2")
        assert (cells["total"], cells["pages"], cells["page"]) == (4, 2, 2)
        assert [c["task"] for c in cells["items"]] == ["t3"]
        assert viewer.get(f"/api/run/{rid}/nothing")[0] == 404
    finally:
        run.close()
        stop(viewer)
    viewer = start_viewer(str(tmp_path / "runs"))
    try:
        rid = viewer.run_id("live")
        assert get_json(viewer, f"/api/run/{rid}/state")["running"] is False
        assert "resumable (4 of 12 cells done)" in viewer.page(f"/run/{rid}")
    finally:
        stop(viewer)


def test_an_open_page_in_chromium_updates_without_reload(tmp_path: Path) -> None:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium not installed")
    run = open_run(tmp_path / "runs" / "live", ["t0", "t1"])
    viewer = start_viewer(str(tmp_path / "runs"))
    browser = Chromium(binary, tmp_path / "profile")
    try:
        add_cell(run, "t0", 0)
        rid = viewer.run_id("live")
        browser.open(viewer.url.rstrip("/") + f"/run/{rid}")
        count = "(document.getElementById('live-count') || {}).textContent"
        wait_for(lambda: browser.js(count) == "1")
        browser.js("window.sameDocument = 'yes'")  # gone if the page were reloaded
        add_cell(run, "t1", 1)
        wait_for(lambda: browser.js(count) == "2")
        assert browser.js("window.sameDocument") == "yes"
        titles = browser.js(
            "Array.from(document.querySelectorAll('#findings-table a.finding-title'))"
            ".map(a => a.textContent)"
        )
        assert "Live finding number 1 <b>bold?</b>" in titles  # swapped in, as text
        assert browser.js("document.querySelectorAll('#findings-table b').length") == 0
        assert str(browser.js("document.getElementById('live-stamp').textContent")).startswith(
            "running · updated"
        )
        # the swapped-in table still sorts (its header handlers were bound again)
        browser.js("document.querySelector('#findings-table th:nth-child(4)').click()")
        assert browser.js("document.querySelector('#findings-table th.asc') !== null") is True
    finally:
        browser.close()
        run.close()
        stop(viewer)
