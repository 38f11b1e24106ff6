"""The viewer's controls in a real browser: headless Chromium, driven over its DevTools pipe,
presses the pages' own buttons and links with the mouse (no request is written by hand).

On an audit run: a finding is confirmed with the review form, `review.csv` changes and the run
page's reviewed precision follows. On the build-and-find and improve pages: a grid cell, the
question filter and a trial link lead where they say. On the runs list: Compare opens a diff of
two different runs."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_view import BENCH, Viewer, cli, runs, start_viewer, stop  # noqa: F401 - fixture
from test_view_browser import Chromium, chromium

DEADLINE = 90.0  # generous: the machine may be busy; every wait polls a condition


class Browser(Chromium):
    """Chromium with a mouse: clicks land on an element's centre, as a person's would."""

    def value(self, expression: str) -> object:
        """`expression` in the page, or None while the page is between documents."""
        reply = self.request("Runtime.evaluate", expression=expression, returnByValue=True)
        if "error" in reply or "exceptionDetails" in reply["result"]:
            return None
        return reply["result"]["result"].get("value")

    def until(self, expression: str, what: str) -> object:
        """Poll `expression` until it is truthy (the page's state, never a fixed sleep)."""
        deadline = time.monotonic() + DEADLINE
        while True:
            got = self.value(expression)
            if got:
                return got
            assert time.monotonic() < deadline, f"never: {what} ({expression})"
            time.sleep(0.1)

    def click(self, selector: str) -> None:
        """A mouse press and release on the centre of the first element `selector` names."""
        found = json.dumps(selector)
        self.until(f"document.readyState === 'complete' && !!document.querySelector({found})",
                   f"{selector} on the page")  # fmt: skip
        # the first box of the element: a link wrapped over lines has gaps in its bounding box
        box = self.value(
            f"(() => {{ const e = document.querySelector({found}); e.scrollIntoView({{block: "
            f"'center'}}); const r = e.getClientRects()[0]; const x = r.x + r.width / 2, "
            f"y = r.y + r.height / 2; return [x, y, e.contains(document.elementFromPoint(x, y))];"
            f" }})()"
        )
        assert isinstance(box, list) and box[2], f"{selector} is covered or off the page"
        x, y, _ = box
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)  # fmt: skip

    def text(self) -> str:
        got = self.until("document.readyState === 'complete' && document.body.innerText", "text")
        assert isinstance(got, str)
        return got


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(chromium(), tmp_path_factory.mktemp("profile"))
    try:
        yield b
    finally:
        b.close()


def review_sheet(run: Path) -> dict[str, dict[str, str]]:
    if not (run / "review.csv").exists():
        return {}
    with open(run / "review.csv", newline="", encoding="utf-8") as handle:
        return {r["task"]: r for r in csv.DictReader(handle)}


@pytest.mark.bwrap
def test_confirming_a_finding_in_chromium_writes_the_sheet_and_the_precision(
    browser: Browser, tmp_path: Path
) -> None:
    run = tmp_path / "runs" / "audit-click"
    done = cli(
        "audit", "run", str(BENCH), "--static-only", "-o", str(run), "--task", "row-count",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    v = start_viewer(str(tmp_path / "runs"))
    try:
        rid = v.run_id("audit-click")
        browser.open(v.url.rstrip("/") + f"/run/{rid}")
        assert "No finding reviewed yet" in browser.text()
        browser.click("#findings-table tbody tr a[href*='/finding/']")
        browser.until("location.pathname.includes('/finding/')", "the finding's page")
        assert review_sheet(run).get("row-count", {}).get("verdict", "") == ""
        browser.click("input[name=verdict][value=confirmed]")
        browser.until("document.querySelector('input[value=confirmed]').checked", "radio set")
        browser.click(".review-form button[type=submit]")
        browser.until("location.search.includes('saved=confirmed')", "the saved finding page")
        assert "a write from another" not in browser.text()
        assert browser.value("document.querySelector('b.verdict').textContent") == "confirmed"
        assert review_sheet(run)["row-count"]["verdict"] == "confirmed"
        # back to the run page through its crumb: 1 of 1 reviewed finding confirmed
        browser.click("header.top a[href='/run/" + rid + "']")
        browser.until("location.pathname.endsWith('/run/" + rid + "')", "the run page")
        row = browser.until(
            "Array.from(document.querySelectorAll('#review-table tbody tr')).map(r => r.innerText)"
            ".find(t => t.startsWith('static'))",
            "the static row of the reviewed-precision table",
        )
        cells = str(row).split("\t")
        assert cells[:3] == ["static", "1", "1"] and cells[-1] == "100.0", cells
    finally:
        stop(v)


@pytest.mark.bwrap
def test_buildfind_improve_and_runs_list_controls_in_chromium(browser: Browser, runs) -> None:  # noqa: F811
    v = start_viewer(str(runs["root"]))
    try:
        base = v.url.rstrip("/")
        bf, imp = v.run_id("bf"), v.run_id("improve-demo")
        # build-and-find: a grid cell opens its find runs, a find run its transcript
        browser.open(base + f"/run/{bf}")
        browser.click("#grid td.cell a")
        browser.until("location.pathname.endsWith('/cell')", "the cell page")
        params = browser.value("Object.fromEntries(new URLSearchParams(location.search))")
        assert isinstance(params, dict) and params["builder"] and params["finder"]
        assert f"finder {params['finder']}" in browser.text()
        browser.click("table tbody tr a[href*='/find?']")
        browser.until("location.pathname.endsWith('/find')", "a find transcript")
        # the question rows' filter: choose a finder, press Filter, every row shows it
        browser.open(base + f"/run/{bf}/questions")
        finder = browser.until(
            "document.querySelector('select[name=finder] option:nth-child(2)').value", "finders"
        )
        browser.value(f"document.querySelector('select[name=finder]').value = {json.dumps(finder)}")
        browser.click("form.filters button[type=submit]")
        browser.until(f"location.search.includes('finder={finder}')", "the filtered rows")
        shown = browser.value(
            "(() => { const t = document.getElementById('question-rows');"
            " const i = Array.from(t.tHead.rows[0].cells).findIndex(c => c.innerText === 'finder');"
            " return Array.from(t.tBodies[0].rows).map(r => r.cells[i].innerText); })()"
        )
        assert isinstance(shown, list) and shown and set(shown) == {finder}
        # improve: a trial's link opens that trial
        browser.open(base + f"/run/{imp}")
        trial = browser.until("document.querySelector('#trials tbody a').innerText", "trials")
        browser.click("#trials tbody a")
        browser.until("location.pathname.includes('/trial/')", "the trial page")
        assert str(trial) in browser.text()
        # improve: a node of the lineage chart opens its trial
        browser.open(base + f"/run/{imp}")
        browser.click("svg.lineage a[href$='/trial/002'] text")  # the score in the circle
        browser.until("location.pathname.endsWith('/trial/002')", "trial 2 from the lineage")
        assert "trial-002" in browser.text()
        # runs list: Compare, as offered, compares two different runs
        browser.open(base + "/")
        a = browser.until("document.querySelector('select[name=a]').value", "compare choices")
        b = browser.value("document.querySelector('select[name=b]').value")
        assert a != b
        browser.click(".diff-form button[type=submit]")
        browser.until("location.pathname === '/diff'", "the diff page")
        assert "Cannot compare" not in browser.text() or "same run" not in browser.text()
    finally:
        stop(v)
