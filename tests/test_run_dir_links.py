"""A run directory from someone else whose entries are links: metaeval never writes through them.

Each test plants a symbolic link (or a FIFO) in a run directory, pointing at a file or folder
outside it that stands for the user's own (``~/.bashrc``, ``~/.ssh``), then runs the command
or the records API that writes there. It asserts that the outside file keeps its bytes, that
nothing new appears outside, and that the error names the link (exit code 2 on the CLI).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from metaeval.errors import ConfigError
from metaeval.records import RunDir
from metaeval.records.durable import atomic_write

REPO = Path(__file__).resolve().parents[1]
AUDIT_BENCH = REPO / "examples" / "audit-bench"
BASHRC = b"# the user's own shell start-up file\nexport KEEP=1\n"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "METAEVAL_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
    )


class Outside:
    """A folder outside the run with a file and a folder standing for the user's own."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / "home"
        self.dir.mkdir(parents=True)
        self.file = self.dir / ".bashrc"
        self.file.write_bytes(BASHRC)
        self.before = self.state()

    def state(self) -> dict[str, str]:
        return {
            str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.root.rglob("*"))
            if p.is_file()
        } | {str(p.relative_to(self.root)) + "/": "" for p in self.root.rglob("*") if p.is_dir()}

    def assert_untouched(self) -> None:
        assert self.file.read_bytes() == BASHRC
        assert self.state() == self.before


@pytest.fixture
def outside(tmp_path: Path) -> Outside:
    return Outside(tmp_path / "outside")


@pytest.fixture(scope="module")
def audit_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("audit") / "run"
    argv = ["audit", "run", str(AUDIT_BENCH), "--static-only", "--no-execution", "-o", str(run_dir)]
    result = cli(*argv)
    assert result.returncode == 0, result.stdout + result.stderr
    return run_dir


@pytest.fixture(scope="module")
def improve_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from metaeval.protocols.improve.init_target import init_target

    base = tmp_path_factory.mktemp("improve")
    shutil.copytree(REPO / "examples" / "improve", base / "examples" / "improve")
    shutil.copytree(REPO / "examples" / "improve-suites", base / "examples" / "improve-suites")
    init_target("toolloop", base / "runs" / "improve-target")
    manifest = base / "examples" / "improve" / "manifest-scripted.json"
    result = cli("improve", "run", str(manifest), "--budget", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    return base / "runs" / "improve-demo"


def plant(run: Path, name: str, target: Path) -> Path:
    link = run / name
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    else:
        link.unlink(missing_ok=True)
    link.symlink_to(target)
    return link


def assert_refused(result: subprocess.CompletedProcess[str], link: Path) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output and "unexpected" not in output, output
    # named by the writer ("<path>: is a symbolic link"), or already by a reader that checks
    # the whole bundle first ("<bundle>: ... <name>: symlink leading outside")
    named = str(link) in result.stderr or f": {link.name}: symlink" in result.stderr
    assert named and ("symbolic link" in result.stderr or "symlink" in result.stderr), output
    assert link.is_symlink()  # refused, not replaced


# ------------------------------------------------------------------------------ the CLI


@pytest.mark.parametrize("name", [".lock", "sessions.jsonl", "report.md", "report.html"])
def test_audit_report_never_writes_through_a_planted_link(
    audit_run: Path, tmp_path: Path, outside: Outside, name: str
) -> None:
    run = tmp_path / "shared-run"
    shutil.copytree(audit_run, run)
    link = plant(run, name, outside.file)
    result = cli("audit", "report", str(run))
    assert_refused(result, link)
    outside.assert_untouched()


def test_audit_score_never_writes_through_a_planted_score_file(
    audit_run: Path, tmp_path: Path, outside: Outside
) -> None:
    run = tmp_path / "shared-run"
    shutil.copytree(audit_run, run)
    link = plant(run, "score.json", outside.file)
    gold = AUDIT_BENCH / "gold.json"
    result = cli("audit", "score", str(run), "--gold", str(gold), "--judge", "category")
    assert_refused(result, link)
    outside.assert_untouched()


@pytest.mark.bwrap
@pytest.mark.parametrize("name", [".lock", "sessions.jsonl", "report.md", "lineage_summary.json"])
def test_improve_report_never_writes_through_a_planted_link(
    improve_bundle: Path, tmp_path: Path, outside: Outside, name: str
) -> None:
    bundle = tmp_path / "shared-bundle"
    shutil.copytree(improve_bundle, bundle, symlinks=True)
    link = plant(bundle, name, outside.file)
    result = cli("improve", "report", str(bundle))
    assert_refused(result, link)
    outside.assert_untouched()


@pytest.mark.bwrap
@pytest.mark.parametrize("command", ["audit", "improve"])
def test_a_lock_linked_to_the_runs_own_records_does_not_truncate_them(
    audit_run: Path, improve_bundle: Path, tmp_path: Path, command: str
) -> None:
    """A link inside the run passes any check for links leading outside; the lock's
    truncation would still empty the record file it names."""
    source, records = (
        (audit_run, "findings.jsonl")
        if command == "audit"
        else (
            improve_bundle,
            "trial_ledger.jsonl",
        )
    )
    run = tmp_path / "shared"
    shutil.copytree(source, run, symlinks=True)
    before = (run / records).read_bytes()
    assert before
    link = plant(run, ".lock", Path(records))  # relative: stays inside the run
    result = cli(command, "report", str(run))
    assert_refused(result, link)
    assert (run / records).read_bytes() == before


# ------------------------------------------------------------------------------ the records API


def _open(path: Path, **extra: object) -> RunDir:
    return RunDir.open(
        path, protocol="links", config={}, hashes={"x": "y"}, seeds=[], command=["t"], **extra
    )


@pytest.fixture
def run_path(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    _open(path).close()
    return path


def test_a_linked_lock_file_is_refused_before_it_is_truncated(
    run_path: Path, outside: Outside
) -> None:
    link = plant(run_path, ".lock", outside.file)
    with pytest.raises(ConfigError, match="symbolic link") as caught:
        _open(run_path)
    assert str(link) in str(caught.value)
    outside.assert_untouched()


@pytest.mark.parametrize("name", ["sessions.jsonl", "layers.jsonl"])
def test_linked_bookkeeping_files_are_refused(run_path: Path, outside: Outside, name: str) -> None:
    link = plant(run_path, name, outside.file)
    with pytest.raises(ConfigError) as caught:
        _open(run_path, new_layer="second")
    assert str(link) in str(caught.value)
    outside.assert_untouched()


def test_a_linked_record_file_fails_its_append_naming_the_file(
    run_path: Path, outside: Outside
) -> None:
    link = plant(run_path, "cells.jsonl", outside.file)
    with _open(run_path) as run, pytest.raises(ConfigError) as caught:
        run.records("cells").append({"task": "t", "status": "ok"})
    assert str(link) in str(caught.value)
    outside.assert_untouched()


def test_a_dangling_link_is_not_created_through(run_path: Path, outside: Outside) -> None:
    target = outside.dir / "created-by-metaeval"
    link = plant(run_path, "cells.jsonl", target)
    with _open(run_path) as run, pytest.raises(ConfigError):
        run.records("cells").append({"task": "t", "status": "ok"})
    assert not target.exists() and str(link)
    outside.assert_untouched()


@pytest.mark.timeout(20)
def test_a_fifo_record_file_is_refused_without_blocking(run_path: Path) -> None:
    os.mkfifo(run_path / "cells.jsonl")
    with _open(run_path) as run, pytest.raises(ConfigError, match="not a regular file"):
        run.records("cells").append({"task": "t", "status": "ok"})


@pytest.mark.parametrize("where", ["blobs", "shard"])
def test_blobs_are_never_written_through_a_linked_folder(
    run_path: Path, outside: Outside, where: str
) -> None:
    data = b"blob content"
    digest = hashlib.sha256(data).hexdigest()
    if where == "blobs":
        link = plant(run_path, "blobs", outside.dir)
    else:
        (run_path / "blobs").mkdir(exist_ok=True)
        link = plant(run_path / "blobs", digest[:2], outside.dir)
    with _open(run_path) as run, pytest.raises(ConfigError) as caught:
        run.blobs.put(data)
    assert str(link) in str(caught.value)
    outside.assert_untouched()


def test_a_linked_blob_file_is_refused(run_path: Path, outside: Outside) -> None:
    data = BASHRC  # same size as the outside file: a stat through the link would match it
    digest = hashlib.sha256(data).hexdigest()
    (run_path / "blobs" / digest[:2]).mkdir(parents=True)
    link = plant(run_path / "blobs" / digest[:2], digest, outside.file)
    outside.file.write_bytes(b"x" * len(BASHRC))
    outside.before = outside.state()
    with _open(run_path) as run, pytest.raises(ConfigError) as caught:
        run.blobs.put(data)
    assert str(link) in str(caught.value)
    assert outside.file.read_bytes() == b"x" * len(BASHRC)


@pytest.mark.parametrize("linked", ["report.md", "trials", "trials/001"])
def test_documents_are_never_written_through_links(
    run_path: Path, outside: Outside, linked: str
) -> None:
    (run_path / "trials").mkdir()
    link = plant(run_path, linked, outside.file if linked == "report.md" else outside.dir)
    relpath = "report.md" if linked == "report.md" else "trials/001/result.json"
    with _open(run_path) as run, pytest.raises(ConfigError) as caught:
        run.write_document(relpath, "{}")
    assert str(link) in str(caught.value)
    outside.assert_untouched()


def test_summary_is_not_written_through_a_link(run_path: Path, outside: Outside) -> None:
    link = plant(run_path, "summary.json", outside.file)
    with _open(run_path) as run, pytest.raises(ConfigError):
        run.write_summary({"a": 1})
    assert link.is_symlink()
    outside.assert_untouched()


def test_atomic_write_still_replaces_and_creates_folders(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    target = root / "a" / "b" / "file.txt"
    atomic_write(target, b"one", root=root, mkdir=True)
    atomic_write(target, b"two", root=root, mkdir=True)
    assert target.read_bytes() == b"two"
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]  # no temporary left


# ------------------------------------------------------------------------------ build-and-find


def test_review_csv_and_tables_are_not_written_through_linked_folders(
    tmp_path: Path, outside: Outside
) -> None:
    from metaeval.protocols.buildfind.labels import REVIEW_COLUMNS
    from metaeval.protocols.buildfind.review_csv import write_review_csv
    from metaeval.protocols.buildfind.tables.write import write_tables

    run = tmp_path / "run"
    run.mkdir()
    labels = plant(run, "labels", outside.dir)
    queue = pl.DataFrame({c: ["1" if c == "build_trial" else "x"] for c in REVIEW_COLUMNS})
    with pytest.raises(ConfigError) as caught:
        write_review_csv(queue, labels / "review.csv", run)
    assert str(labels) in str(caught.value)
    tables = plant(run, "tables", outside.dir)
    with pytest.raises(ConfigError) as caught:
        write_tables({"calibration": pl.DataFrame({"a": [1]})}, run)
    assert str(tables) in str(caught.value)
    outside.assert_untouched()
