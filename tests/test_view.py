"""`metaeval view` on real runs of each protocol: a real server process on 127.0.0.1, pages
fetched over HTTP, hostile run content rendered as text (checked in headless Chromium too),
access checks, and a run tree that no page changes."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.run import AuditRun
from metaeval.protocols.audit.settings import AuditSettings
from metaeval.records import BlobStore
from test_improve_run import experiment

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "examples" / "audit-bench"
REQUIRED = os.environ.get("METAEVAL_REQUIRE_EXTRAS") == "1"
SECRET = "VIEWER-SECRET-MARKER-5c1e"
# a payload that, if it ever ran, sets the title and adds an element with a marker id
RUNS_JS = (
    "document.title='PWNED';var d=document.createElement('b');d.id='pwned-marker';"
    "document.body.appendChild(d)"
)
SCRIPT = f"<script>{RUNS_JS}</script>"
IMG = f'<img src=x onerror="{RUNS_JS}">'
PAYLOAD = f"<script>alert(1)</script> {SCRIPT} {IMG}"


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def hostile_bench(root: Path) -> Path:
    """sales-revenue with a payload in its instruction, and a file linking to a secret
    outside the benchmark."""
    bench = root / "bench"
    shutil.copytree(BENCH / "sales-revenue", bench / "sales-revenue")
    instruction = bench / "sales-revenue" / "instruction.md"
    instruction.write_text(instruction.read_text() + f"\nNote: {PAYLOAD}\n")
    (root / "outside.txt").write_text(SECRET + "\n")
    (bench / "sales-revenue" / "notes.txt").symlink_to(root / "outside.txt")
    return bench


def hostile_finding(line: int) -> dict:
    return {
        "category": "EVAL",
        "subcategory": "EVAL-MISMATCH",
        "severity": "High",
        "finding_type": "Bug",
        "title": f"Checker mismatch {PAYLOAD}",
        "description": f"desc {IMG}",
        "evidence": [
            {"file": "instruction.md", "line_start": line, "line_end": line, "snippet": "Note:"},
            {"file": "notes.txt", "line_start": 1, "line_end": 1, "snippet": "x"},
        ],
        "recommendation": f"fix {SCRIPT}",
        "confidence": 0.9,
    }


def page_snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file under root (what a read-only viewer must not change)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real runs of every protocol under one folder (about 45 s)."""
    top = tmp_path_factory.mktemp("view")
    root = top / "runs"
    root.mkdir()
    # audit A: static and execution checks on two tasks, scored against the gold file
    a = root / "audit-a"
    done = cli(
        "audit", "run", str(BENCH), "--static-only", "-o", str(a),
        "--task", "sales-revenue", "--task", "row-count",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = cli("audit", "score", str(a), "--gold", str(BENCH / "gold.json"), "--judge", "category")
    assert done.returncode == 0, done.stderr
    # audit B: a hostile copy of sales-revenue, audited by a scripted model
    bench = hostile_bench(top)
    lines = (bench / "sales-revenue" / "instruction.md").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.startswith("Note:"))
    reply = json.dumps([hostile_finding(line)])
    models = {"scripted/auditor": ScriptedModel([reply], name="scripted/auditor")}
    settings = AuditSettings(
        bench_dir=bench,
        run_dir=root / "audit-b",
        models=list(models),
        task_filter=["sales-revenue"],
        execution_checks=False,
        progress=False,
    )
    AuditRun(settings, models=models).run()
    # build-and-find: the reference run; one more find record whose transcript is hostile
    bf = root / "bf"
    done = cli(
        "buildfind", "run", str(ROOT / "examples" / "buildfind-reference.yaml"), "-o", str(bf)
    )
    assert done.returncode == 0, done.stderr
    done = cli("buildfind", "release", str(bf), "-o", str(root / "releases" / "bf-release"))
    assert done.returncode == 0, done.stderr
    finds = [json.loads(x) for x in (bf / "finds.jsonl").read_text().splitlines() if x.strip()]
    base = next(f for f in finds if f.get("slice") == "formal" and f["builder"] == "terse")
    events = [
        {"type": "user", "text": f"question {PAYLOAD}"},
        {"type": "tool_call", "id": "c1", "tool": "read_file", "kind": "read",
         "arguments": {"path": f"{IMG}.py"}, "arguments_json": json.dumps({"path": f"{IMG}.py"})},
        {"type": "tool_result", "id": "r1", "call_id": "c1", "text": f"{SCRIPT}\n", "raw_bytes": 99},
    ]  # fmt: skip
    ref = BlobStore(bf / "blobs").put("\n".join(json.dumps(e) for e in events))
    with (bf / "finds.jsonl").open("a") as handle:
        handle.write(json.dumps({**base, "find_trial": 99, "transcript_blob": ref}) + "\n")
    # improve: the scripted budget-5 example (test_improve_run's experiment)
    manifest = experiment(top)
    done = cli("improve", "run", str(manifest))
    assert done.returncode == 0, done.stderr
    shutil.move(str(top / "runs" / "improve-demo"), str(root / "improve-demo"))
    # a second bundle: the same run with trial 5 scored differently in its ledger
    other = root / "improve-other"
    shutil.copytree(root / "improve-demo", other)
    ledger = [json.loads(x) for x in (other / "trial_ledger.jsonl").read_text().splitlines()]
    ledger[4]["optimize_score"] = 0.4
    (other / "trial_ledger.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ledger))
    # and one task of trial 5's candidate with another reward
    evaluation = other / "trials" / "005" / "artifacts" / "candidates" / "evaluation.json"
    data = json.loads(evaluation.read_text())
    data["optimize"]["tasks"][0]["reward"] = 0.25
    evaluation.write_text(json.dumps(data))
    return {"root": root, "a": a, "b": root / "audit-b", "bf": bf, "improve": root / "improve-demo"}


class Viewer:
    def __init__(self, proc: subprocess.Popen, url: str, first: str):
        self.proc, self.url, self.first = proc, url, first
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "", parts.port or 0

    def get(
        self, path: str, headers: dict[str, str] | None = None, method: str = "GET"
    ) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read().decode("utf-8", "replace")
        finally:
            conn.close()

    def page(self, path: str) -> str:
        status, _, body = self.get(path)
        assert status == 200, (path, status, body[-2000:])
        return body

    def run_id(self, name: str) -> str:
        found = re.search(rf'href="/run/({re.escape(name)}-[0-9a-f]{{6}})"', self.page("/"))
        assert found, name
        return found.group(1)


def start_viewer(*args: str) -> Viewer:
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaeval.cli", "view", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if "?token=" in first:
        first += proc.stdout.readline()  # the warning about a non-loopback address
    found = re.search(r"http://\S+?/", first)
    if not found:
        proc.kill()
        raise AssertionError(
            f"no URL printed: {first!r} {proc.stderr.read() if proc.stderr else ''}"
        )
    return Viewer(proc, found.group(0), first)


def stop(viewer: Viewer) -> None:
    viewer.proc.terminate()
    try:
        viewer.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        viewer.proc.kill()


@pytest.fixture(scope="module")
def viewer(runs: dict[str, Path]) -> Iterator[Viewer]:
    v = start_viewer(str(runs["root"]))
    try:
        yield v
    finally:
        stop(v)


@pytest.mark.bwrap
def test_runs_list_names_every_run_with_status_and_headline(viewer, runs):
    assert "loopback only" in viewer.first and viewer.host == "127.0.0.1"
    html = viewer.page("/")
    for name in ("audit-a", "audit-b", "bf", "improve-demo", "improve-other"):
        assert f">{name}</a>" in html
    assert "formal recovery 1.000" in html  # build-and-find headline
    assert "5 trials, 1 promoted; final trial-001: optimize 0.200 (+0.200)" in html
    assert "complete (2 cells)" in html  # audit-a: 2 tasks, static source only
    assert "complete (5 trials)" in html
    assert "scripted/auditor" in html  # audit-b's model
    # audit-a's headline: findings by severity, and recall/precision from its score
    assert (
        "2 findings on 2 tasks (1 Critical, 1 High); all sources (any): recall 20%, precision 100%"
        in html
    )


@pytest.mark.bwrap
def test_audit_page_lists_findings_and_a_finding_shows_its_cited_lines(viewer):
    rid = viewer.run_id("audit-a")
    html = viewer.page(f"/run/{rid}")
    assert "Hard-coded path /home/alice/data/input.csv is not provided by the environment" in html
    assert "recall (aligned)" in html and "20.0%" in html  # scored: 2 of 10 gold issues
    critical = viewer.page(f"/run/{rid}?severity=Critical")
    assert "/home/alice/data/input.csv" in critical and "INST-CONTRADICT</td>" not in critical
    index = re.search(rf'href="/run/{rid}/finding/(\d+)">Hard-coded path', html).group(1)
    detail = viewer.page(f"/run/{rid}/finding/{index}")
    # the cited line of solution/solve.sh, highlighted in the task's file
    hit = re.search(r'<tr class="hit"><td class="ln">6</td><td><pre>(.*?)</pre>', detail)
    assert hit and "/home/alice/data/input.csv" in hit.group(1)
    assert "oracle: failed" in detail and "FileNotFoundError" in detail  # the oracle's log


@pytest.mark.bwrap
def test_hostile_finding_task_file_and_transcript_render_as_text(viewer, runs):
    rid = viewer.run_id("audit-b")
    html = viewer.page(f"/run/{rid}")
    status, headers, _ = viewer.get(f"/run/{rid}")
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "Checker mismatch &lt;script&gt;alert(1)&lt;/script&gt;" in html
    index = re.search(rf'href="/run/{rid}/finding/(\d+)">Checker mismatch', html).group(1)
    detail = viewer.page(f"/run/{rid}/finding/{index}")
    bf = viewer.run_id("bf")
    query = "slice=formal&task={}&builder=terse&build_trial=0&finder={}&find_trial=99"
    base = json.loads((runs["bf"] / "finds.jsonl").read_text().splitlines()[-1])
    transcript = viewer.page(f"/run/{bf}/find?" + query.format(base["task"], base["finder"]))
    for page in (html, detail, transcript):
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "<script>document" not in page
    # the payload line of instruction.md is shown, highlighted, as text
    assert re.search(
        r'<tr class="hit"><td class="ln">\d+</td><td><pre>Note: &lt;script&gt;', detail
    )
    assert "&lt;img src=x onerror=" in detail and "desc &lt;img" in detail
    # the model's reply is shown (as text), and the linked file outside the task is not read
    assert "&#34;title&#34;: &#34;Checker mismatch &lt;script&gt;" in detail
    assert "symlink leading outside" in detail and SECRET not in detail
    # transcript: three steps, the hostile text escaped, the bytes counted per step
    assert transcript.count('<li class="step ') == 3
    read = len(f"{SCRIPT}\n".encode())
    asked = len(json.dumps({"path": f"{IMG}.py"}).encode())
    assert f"+{read} novel retrieval bytes" in transcript
    assert f"+{asked} novel tool-call bytes" in transcript
    assert "&lt;img src=x onerror=" in transcript


def chromium_dom(url: str, profile: Path) -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        if REQUIRED:
            pytest.fail("chromium not installed (scripts/install-system-deps.sh installs it)")
        pytest.skip("chromium not installed")
    done = subprocess.run(
        [
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--proxy-server=http://127.0.0.1:9",  # nothing but loopback is reachable
            f"--user-data-dir={profile}", "--virtual-time-budget=3000", "--dump-dom", url,
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.bwrap
def test_chromium_runs_the_viewers_script_but_no_payload(viewer, runs, tmp_path):
    # control: the same payload in a plain page does run in this browser
    control = tmp_path / "control.html"
    control.write_text(
        f"<!doctype html><html><head><title>t</title></head><body>{IMG}</body></html>"
    )
    dom = chromium_dom(control.as_uri(), tmp_path / "p0")
    assert 'id="pwned-marker"' in dom and "<title>PWNED</title>" in dom
    rid = viewer.run_id("audit-b")
    html = viewer.page(f"/run/{rid}")
    index = re.search(rf'href="/run/{rid}/finding/(\d+)">Checker mismatch', html).group(1)
    base = json.loads((runs["bf"] / "finds.jsonl").read_text().splitlines()[-1])
    bf = viewer.run_id("bf")
    find = (
        f"/run/{bf}/find?slice=formal&task={base['task']}&builder=terse&build_trial=0"
        f"&finder={base['finder']}&find_trial=99"
    )
    for n, path in enumerate((f"/run/{rid}", f"/run/{rid}/finding/{index}", find)):
        dom = chromium_dom(viewer.url.rstrip("/") + path, tmp_path / f"p{n + 1}")
        assert 'data-js="on"' in dom  # the viewer's own script ran under the page's CSP
        assert 'id="pwned-marker"' not in dom and "PWNED</title>" not in dom
        assert "&lt;script&gt;" in dom  # the payload is there, as text


@pytest.mark.bwrap
def test_buildfind_grid_cell_transcript_and_build_files(viewer, runs):
    rid = viewer.run_id("bf")
    html = viewer.page(f"/run/{rid}")
    for name in ("documented", "terse", "divergent", "ref-finder-a", "ref-finder-b"):
        assert f">{name}<" in html
    assert "reference finder" in html and "labels from itself" in html
    cell = re.search(r'href="(/run/[^"]+/cell\?builder=documented&amp;finder=ref-finder-a)"', html)
    assert cell
    cell_html = viewer.page(cell.group(1).replace("&amp;", "&"))
    steps = re.findall(r'href="(/run/[^"]+/find\?[^"]+)">steps', cell_html)
    assert len(steps) == 6  # 2 tasks x 3 find trials
    transcript = viewer.page(steps[0].replace("&amp;", "&"))
    assert "<b>tool_call</b> <code>read_file</code> (read)" in transcript
    assert re.search(r"\+\d+ novel retrieval bytes", transcript)
    assert re.search(r"\+\d+ novel tool-call bytes", transcript)
    # the answer: each letter as the finder saw it beside the pack's option it stands for
    assert "<th>letter the finder gave</th><th>= pack option</th>" in transcript
    key = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(steps[0].replace("&amp;", "&")).query))
    *_, record = (
        r
        for r in map(json.loads, (runs["bf"] / "finds.jsonl").read_text().splitlines())
        if all(str(r.get(k)) == v for k, v in key.items())
    )
    table = re.search(r'<table class="sortable" id="answers">.*?</table>', transcript, re.S)
    shown = re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td>"
                       r"<td>([^<]+)</td>", table.group(0))  # fmt: skip
    assert len(shown) == len(record["answers"])
    for question, letter, option, gold, gold_letter in shown:
        order = record["permutation"][question]  # shown letter i is option order[i]
        assert (
            option == record["answers"][question]["answer"]
            and gold == record["answers"][question]["gold"]
        )
        assert order["ABCD".index(letter)] == option and order["ABCD".index(gold_letter)] == gold
    build = re.search(r'href="(/run/[^"]+/build\?[^"]+)">transcript and files', html).group(1)
    build_html = viewer.page(build.replace("&amp;", "&"))
    assert "Built repository" in build_html and "/router.py</li>" in build_html
    # the release of the same run: same grid, read from records/ and data/
    release = viewer.page(f"/run/{viewer.run_id('bf-release')}")
    assert "(release)" in release and "labelled rows of question_rows.parquet" in release
    grid = re.search(r'<table class="grid" id="grid">.*?</table>', html, re.S).group(0)
    assert grid.replace(viewer.run_id("bf"), "X") == re.search(
        r'<table class="grid" id="grid">.*?</table>', release, re.S
    ).group(0).replace(viewer.run_id("bf-release"), "X")


@pytest.mark.bwrap
def test_buildfind_page_shows_the_paper_tables_and_figures_the_run_wrote(viewer, runs):
    import base64
    import csv

    bf = runs["root"] / "bf"
    html = viewer.page(f"/run/{viewer.run_id('bf')}")
    with (bf / "tables" / "paper_table1.csv").open(encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert 'id="paper_table1"' in html
    assert "".join(f"<th>{h}</th>" for h in header) in html
    shown = dict(
        re.findall(r'<figure id="fig-([^"]+)"><img src="data:image/png;base64,([^"]+)"', html)
    )
    pngs = sorted(p.stem for p in (bf / "figures").glob("*.png"))
    assert pngs and sorted(shown) == pngs
    first = pngs[0]
    assert base64.b64decode(shown[first]) == (bf / "figures" / f"{first}.png").read_bytes()
    # a planted link to a (real PNG) file outside the run is not read into the page
    outside = runs["root"] / "outside-figure.png"
    outside.write_bytes((bf / "figures" / f"{first}.png").read_bytes())
    planted = bf / "figures" / "zz-planted.png"
    planted.symlink_to(outside)
    try:
        again = viewer.page(f"/run/{viewer.run_id('bf')}")
        assert "zz-planted" not in again and 'id="fig-' + first + '"' in again
    finally:
        planted.unlink()
        outside.unlink()


@pytest.mark.bwrap
def test_improve_lineage_edges_come_from_parent_ids_and_trials_explain_themselves(viewer):
    rid = viewer.run_id("improve-demo")
    html = viewer.page(f"/run/{rid}")
    edges = set(re.findall(r'data-parent="([^"]+)" data-child="([^"]+)"', html))
    assert edges == {("baseline", "trial-001")} | {
        ("trial-001", f"trial-00{n}") for n in range(2, 6)
    }
    assert "promoted: optimize 0.200 is above the parent&#39;s 0.000" in html
    # the one lineage chart links each trial's node to its page; the policy is named
    assert f'<a href="/run/{rid}/trial/003"><circle' in html
    assert "Search policy: recursive: every trial patches the active parent" in html
    trial3 = viewer.page(f"/run/{rid}/trial/3")
    assert "meta_agent_failure" in trial3 and "outside_boundary" in trial3
    assert "README.md" in trial3 and "Boundary verdict" in trial3
    trial1 = viewer.page(f"/run/{rid}/trial/1")
    assert '<span class="add">+' in trial1  # the candidate's patch, added lines marked
    assert "count-error-lines" in trial1  # per-task results
    assert "scripted_edit" in trial1  # the meta-agent trace
    # the target's per-task transcript and test log, as the bundle keeps them
    links = re.findall(r'href="(/run/[^"]+/trial/1/task\?[^"]+)">(transcript|test log)<', trial1)
    assert {kind for _, kind in links} == {"transcript", "test log"}
    transcript = viewer.page(next(u for u, k in links if k == "transcript").replace("&amp;", "&"))
    assert "target transcript" in transcript and '<li class="step">' in transcript
    log = viewer.page(next(u for u, k in links if k == "test log").replace("&amp;", "&"))
    assert "$ bash /tests/test.sh" in log
    bad = f"/run/{rid}/trial/1/task?suite=optimize&task=nope&kind=trace"
    assert viewer.get(bad)[0] == 404
    assert viewer.get(f"/run/{rid}/trial/99")[0] == 404


@pytest.mark.bwrap
def test_diffs_of_two_runs(viewer):
    a, b = viewer.run_id("audit-a"), viewer.run_id("audit-b")
    audit = viewer.page(f"/diff?a={a}&b={b}")
    added = re.search(r'id="diff-add">(.*?)</table>', audit, re.S).group(1)
    removed = re.search(r'id="diff-del">(.*?)</table>', audit, re.S).group(1)
    assert "EVAL-MISMATCH" in added and "Checker mismatch &lt;script&gt;" in added
    assert "row-count" in removed and "ENV-PATH" in removed
    i, j = viewer.run_id("improve-demo"), viewer.run_id("improve-other")
    improve = viewer.page(f"/diff?a={i}&b={j}")
    assert re.search(
        r"<td>trial-005</td><td class=\"num\">0.200</td><td class=\"num\">0.400</td><td class=\"num\">\+0.200</td>",
        improve,
    )
    tasks = re.search(r'id="diff-tasks">(.*?)</table>', improve, re.S).group(1)
    assert tasks.count("<tr>") == 2  # the header and the one task whose reward changed
    assert re.search(r"<td>trial-005</td><td>optimize</td><td>[^<]+</td>"
                     r'<td class="num">[0-9.]+</td><td class="num">0.250</td>', tasks)  # fmt: skip
    bf = viewer.run_id("bf")
    same = viewer.page(f"/diff?a={bf}&b={bf}")
    assert "builder terse" in same and "+0.000" in same
    status, _, body = viewer.get(f"/diff?a={a}&b={bf}")
    assert status == 400 and "is a audit run" in body


@pytest.mark.bwrap
def test_access_checks_and_read_only(viewer, runs):
    before = page_snapshot(runs["root"])
    port = viewer.port
    for host in (
        "evil.example",
        f"evil.example:{port}",
        f"127.0.0.1:{port + 1}",
        "attacker.127.0.0.1.nip.io",
    ):
        status, _, body = viewer.get("/", {"Host": host})
        assert status == 421, host
        assert "<table" not in body
    assert viewer.get("/", {"Host": f"localhost:{port}"})[0] == 200
    assert viewer.get("/", method="POST")[0] == 405
    assert viewer.get("/static/../runs.py")[0] == 404
    assert viewer.get("/static/view.css")[1]["Content-Type"].startswith("text/css")
    # every page kind once more, then nothing in any run changed (no lock, session or summary)
    for name in ("audit-a", "audit-b", "bf", "improve-demo"):
        viewer.page(f"/run/{viewer.run_id(name)}")
    assert page_snapshot(runs["root"]) == before


@pytest.mark.bwrap
def test_a_non_loopback_address_needs_the_printed_token(runs):
    v = start_viewer(str(runs["a"]), "--host", "0.0.0.0")
    try:
        token = re.search(r"\?token=(\S+)", v.first).group(1)
        assert "not loopback" in v.first
        status, _, body = v.get("/")
        assert status == 401 and "token" in body and "audit-a" not in body
        assert v.get("/?token=wrong")[0] == 401
        assert v.get("/", {"Host": "evil.example"})[0] == 401
        status, headers, _ = v.get(f"/?token={token}")
        assert status == 303 and headers["Location"] == "/" and "HttpOnly" in headers["Set-Cookie"]
        cookie = headers["Set-Cookie"].split(";", 1)[0]
        status, _, body = v.get("/", {"Cookie": cookie})
        assert status == 200 and "audit-a" in body
    finally:
        stop(v)


def test_bad_arguments_exit_2_naming_the_path_or_port(tmp_path):
    missing = tmp_path / "no-such-dir"
    done = cli("view", str(missing), timeout=60)
    assert done.returncode == 2 and str(missing) in done.stderr
    v = start_viewer(str(tmp_path))
    try:
        assert "0 run(s)" in v.first
        done = cli("view", str(tmp_path), "--port", str(v.port), timeout=60)
        assert done.returncode == 2 and "port" in done.stderr and str(v.port) in done.stderr
    finally:
        stop(v)


@pytest.mark.bwrap
def test_a_run_whose_manifest_names_another_folder_shows_no_file_of_it(viewer, runs, tmp_path):
    """A run directory is input too: a manifest pointing the benchmark at a folder that holds
    no task (here a secret in a folder named like the task) gets no file of it shown."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sales-revenue").mkdir(parents=True)
    (elsewhere / "sales-revenue" / "notes.txt").write_text(SECRET + "\n")
    copy = runs["root"] / "audit-moved"
    shutil.copytree(runs["b"], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["config"]["benchmark"] = str(elsewhere)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    rid = viewer.run_id("audit-moved")
    html = viewer.page(f"/run/{rid}")
    index = re.search(rf'href="/run/{rid}/finding/(\d+)">Checker mismatch', html).group(1)
    detail = viewer.page(f"/run/{rid}/finding/{index}")
    assert "is not a task folder (no task.toml or instruction.md)" in detail
    assert SECRET not in detail
