"""The viewer's review controls over HTTP: a verdict and note posted from a finding's page land
in the run's review sheet, the run page's reviewed precision and `audit score` then reflect
them; writes without the page's form token, or from another origin, change nothing."""

from __future__ import annotations

import csv
import http.client
import json
import re
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_view import BENCH, Viewer, cli, start_viewer, stop

NOTE = '<script>alert(1)</script> seen in "the log", twice'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Viewer, Path]]:
    root = tmp_path_factory.mktemp("viewreview")
    run = root / "audit-a"
    done = cli(
        "audit", "run", str(BENCH), "--static-only", "-o", str(run),
        "--task", "sales-revenue", "--task", "row-count",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    v = start_viewer(str(root))
    try:
        yield v, run
    finally:
        stop(v)


def post(v: Viewer, path: str, form: dict[str, str], headers: dict[str, str] | None = None):
    body = urllib.parse.urlencode(form)
    conn = http.client.HTTPConnection("127.0.0.1", v.port, timeout=60)
    try:
        conn.request(
            "POST",
            path,
            body=body,
            headers={"Content-Type": "application/x-www-form-urlencoded", **(headers or {})},
        )
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read().decode()
    finally:
        conn.close()


def finding_form(v: Viewer, rid: str, title: str) -> tuple[str, dict[str, str]]:
    html = v.page(f"/run/{rid}")
    index = re.search(rf'href="/run/{rid}/finding/(\d+)">{re.escape(title)}', html).group(1)
    page = v.page(f"/run/{rid}/finding/{index}")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    fid = re.search(r'name="finding" value="(F-[0-9a-f]{10})"', page).group(1)
    return f"/run/{rid}/finding/{index}", {"csrf": csrf, "finding": fid}


def sheet(run: Path) -> dict[str, dict[str, str]]:
    with open(run / "review.csv", newline="", encoding="utf-8") as handle:
        return {r["task"]: r for r in csv.DictReader(handle)}


@pytest.mark.bwrap
def test_review_controls_write_the_sheet_and_the_score_follows(served, tmp_path) -> None:
    v, run = served
    rid = v.run_id("audit-a")
    assert "No finding reviewed yet" in v.page(f"/run/{rid}")
    page, form = finding_form(v, rid, "Hard-coded path")
    origin = f"http://127.0.0.1:{v.port}"
    # refused: no form token, a wrong one, another origin, another site
    bad = [
        ({**form, "csrf": ""}, {}),
        ({**form, "csrf": "x" * 32}, {}),
        (form, {"Origin": "http://evil.example"}),
        (form, {"Sec-Fetch-Site": "cross-site"}),
        # a hidden origin passes only when the browser vouches the page is this site's own
        (form, {"Origin": "null"}),
        (form, {"Origin": "null", "Sec-Fetch-Site": "cross-site"}),
        (form, {"Origin": "null", "Sec-Fetch-Site": "same-site"}),
    ]
    for data, headers in bad:
        status, _, _ = post(v, f"/run/{rid}/review", {**data, "verdict": "confirmed"}, headers)
        assert status == 403, (data, headers)
    assert not (run / "review.csv").exists()
    # a bad verdict is refused and named
    status, _, body = post(v, f"/run/{rid}/review", {**form, "verdict": "yes"})
    assert status == 400 and "unknown verdict &#39;yes&#39;" in body
    assert not (run / "review.csv").exists()

    status, headers, _ = post(
        v, f"/run/{rid}/review", {**form, "verdict": "confirmed", "note": NOTE}, {"Origin": origin}
    )
    assert status == 303 and headers["Location"].startswith(page + "?saved=confirmed")
    rows = sheet(run)
    assert rows["row-count"]["verdict"] == "confirmed" and rows["row-count"]["note"] == NOTE
    assert rows["sales-revenue"]["verdict"] == ""
    shown = v.page(page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; seen in &#34;the log&#34;" in shown
    assert "<script>alert" not in shown
    assert re.search(r'value="confirmed" checked', shown)
    overview = v.page(f"/run/{rid}")
    # static: 2 findings, 1 confirmed, 0 rejected, 0 unsure, 1 unreviewed -> 100.0
    cells = "".join(f'<td class="num">{n}</td>' for n in (2, 1, 0, 0, 1, "100.0"))
    assert f"<td>static</td>{cells}" in overview

    page2, form2 = finding_form(v, rid, "Instruction names")
    status, _, _ = post(v, f"/run/{rid}/review", {**form2, "verdict": "rejected", "note": "no"})
    assert status == 303 and sheet(run)["sales-revenue"]["verdict"] == "rejected"
    overview = v.page(f"/run/{rid}")
    cells = "".join(f'<td class="num">{n}</td>' for n in (2, 1, 1, 0, 0, "50.0"))
    assert f"<td>static</td>{cells}" in overview
    rejected = v.page(f"/run/{rid}?review=rejected")
    assert "Instruction names" in rejected and "Hard-coded path" not in rejected
    # audit score reads the same sheet
    copy = tmp_path / "a"
    shutil.copytree(run, copy)
    done = cli(
        "audit", "score", str(copy), "--gold", str(BENCH / "gold.json"), "--judge", "category"
    )
    assert done.returncode == 0, done.stderr
    [row] = json.loads((copy / "score.json").read_text())["review"]["rows"]
    assert (row["confirmed"], row["rejected"], row["precision"]) == (1, 1, 0.5)
    status, _, _ = post(v, f"/run/{rid}/review", {**form2, "finding": "F-0000000000"})
    assert status == 404
    # clearing a verdict
    status, _, _ = post(v, f"/run/{rid}/review", {**form2, "verdict": "", "note": ""})
    assert status == 303 and sheet(run)["sales-revenue"]["verdict"] == ""
    # other paths still take no POST
    assert post(v, "/", {})[0] == 405


@pytest.mark.bwrap
def test_a_review_post_that_is_not_a_small_form_writes_nothing(served) -> None:
    """The viewer reads a write with the loopback kit's rules (tests/test_loopback.py): a form
    of another type is 415, one over 64 KiB is 413; the sheet stays as it was."""
    v, run = served
    rid = v.run_id("audit-a")
    _, form = finding_form(v, rid, "Hard-coded path")
    before = (run / "review.csv").read_bytes() if (run / "review.csv").exists() else None
    data = {**form, "verdict": "confirmed"}
    status, _, _ = post(v, f"/run/{rid}/review", data, {"Content-Type": "text/plain"})
    assert status == 415
    status, _, body = post(v, f"/run/{rid}/review", {**data, "note": "x" * (64 << 10)})
    assert status == 413 and "over 65536 bytes" in body
    after = (run / "review.csv").read_bytes() if (run / "review.csv").exists() else None
    assert after == before
