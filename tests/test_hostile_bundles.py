"""`buildfind verify-release` and `improve report` on hostile trees (issue 31, item 11).

A release or bundle may come from anyone. Each test starts from a real one (a reference
build-and-find run released, a scripted improve run), plants a symlink leading to a marker file
outside it, a FIFO, a non-object or deeply nested JSON document, and runs the real command in a
subprocess: it must end (never block), exit non-zero with a line naming the file, print no
traceback, and the marker must appear in no output or report. Hashing a huge (sparse) file
keeps memory flat.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from metaeval.protocols.improve.init_target import init_target

ROOT = Path(__file__).resolve().parents[1]
MARKER = f"HOSTILE-BUNDLE-MARKER-{uuid.uuid4().hex}"
DEEP = "[" * 10_000 + "]" * 10_000
RUN_TIMEOUT_S = 120


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        cwd=cwd,
    )


def clean(result: subprocess.CompletedProcess) -> str:
    """The command's output, checked for what no hostile input may cause."""
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "error: unexpected" not in output, output
    assert MARKER not in output, output
    return output


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """A release of the reference build-and-find run (scripted agents), verified sound."""
    pytest.importorskip("mlcroissant")
    base = tmp_path_factory.mktemp("hostile-release")
    run_dir, out = base / "reference-run", base / "release"
    made = cli(
        "buildfind", "run", str(ROOT / "examples" / "buildfind-reference.yaml"), "-o", str(run_dir)
    )
    assert made.returncode == 0, made.stderr
    released = cli("buildfind", "release", str(run_dir), "-o", str(out))
    assert released.returncode == 0, released.stderr
    sound = cli("buildfind", "verify-release", str(out))
    assert sound.returncode == 0, sound.stdout + sound.stderr
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(f"{MARKER}\n{MARKER},b\n")
    return folder


def copy_of(release: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(release, copy, symlinks=True)
    return copy


def resum(root: Path) -> None:
    """Rewrite SHA256SUMS so only the planted change is left to find."""
    from metaeval.protocols.buildfind.release.write import checksums

    (root / "SHA256SUMS").write_text(checksums(root))


def verify(root: Path) -> list[str]:
    result = cli("buildfind", "verify-release", str(root))
    clean(result)
    assert result.returncode == 1, result.stdout + result.stderr
    return result.stdout.splitlines()


# ------------------------------------------------------------------------------ verify-release


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_a_release_with_symlinks_fails_naming_them_and_reads_nothing(release, tmp_path, outside):
    root = copy_of(release, tmp_path)
    # a link out to an exact copy of the file: every hash still matches, so a verifier that
    # follows links would pass a release that reads outside itself
    spec = root / "pack" / "http-router" / "spec.yaml"
    shutil.copy(spec, outside / "spec.yaml")
    spec.unlink()
    os.symlink(outside / "spec.yaml", spec)
    # a table linked to a host file: its first line would be shown as the table's header
    table = root / "tables" / "calibration.csv"
    table.unlink()
    os.symlink(outside / "secret.txt", table)
    # a link inside the release, to a file of the release, is refused too
    (root / "LICENSE").unlink()
    os.symlink("README.md", root / "LICENSE")
    lines = verify(root)
    assert f"pack/http-router/spec.yaml: symlink leading outside ({outside / 'spec.yaml'})" in (
        "\n".join(lines)
    )
    assert any(x.startswith("tables/calibration.csv: symlink leading outside") for x in lines)
    assert any(x.startswith("LICENSE: symlink (README.md)") for x in lines)
    assert "nothing else was checked: a release holding these is not read" in lines


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_a_release_with_a_fifo_fails_and_never_blocks(release, tmp_path):
    root = copy_of(release, tmp_path)
    (root / "claims.json").unlink()
    os.mkfifo(root / "claims.json")  # reading it would wait for a writer forever
    os.mkfifo(root / "records" / "extra.jsonl")
    lines = verify(root)
    assert (
        "claims.json: not a regular file (FIFO), not opened: a release holds only regular "
        "files and directories" in lines
    )
    assert any(x.startswith("records/extra.jsonl: not a regular file (FIFO)") for x in lines)


@pytest.mark.timeout(2 * RUN_TIMEOUT_S + 60)
def test_non_object_and_deeply_nested_json_are_named_not_raised(release, tmp_path):
    shapes = copy_of(release, tmp_path / "shapes")
    (shapes / "croissant.json").write_text("[1, 2]\n")
    (shapes / "claims.json").write_text('{"claims": []}\n')
    manifest = json.loads((shapes / "records" / "manifest.json").read_text())
    manifest["layers"] = "not a list"
    manifest["hashes"] = ["not", "a", "map"]
    (shapes / "records" / "manifest.json").write_text(json.dumps(manifest))
    resum(shapes)
    lines = verify(shapes)
    assert (
        "croissant.json: unreadable (expected an object at the top level, found an array)" in lines
    )
    assert "claims.json: unreadable (expected an array at the top level, found an object)" in lines
    assert "records/manifest.json: field 'hashes' is an array, not an object" in lines

    deep = copy_of(release, tmp_path / "deep")
    (deep / "claims.json").write_text(DEEP)
    (deep / "croissant.json").write_text(DEEP)
    resum(deep)
    lines = verify(deep)
    assert "claims.json: unreadable (JSON nested deeper than 100 levels)" in lines
    assert "croissant.json: unreadable (JSON nested deeper than 100 levels)" in lines

    manifest = copy_of(release, tmp_path / "manifest")
    (manifest / "records" / "manifest.json").write_text(DEEP)
    resum(manifest)
    lines = verify(manifest)
    assert any(
        x.startswith("records/manifest.json: ") and "nested deeper than 100 levels" in x
        for x in lines
    )

    record = copy_of(release, tmp_path / "record")
    finds = record / "records" / "finds.jsonl"
    count = len(finds.read_text().splitlines())
    with finds.open("a") as handle:
        handle.write('{"a": ' * 10_000 + "1" + "}" * 10_000 + "\n")
    resum(record)
    assert verify(record)[0] == (
        f"records/finds.jsonl: line {count + 1}: JSON nested deeper than 100 levels"
    )


HASH_PROBE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from metaeval.protocols.buildfind.release.integrity import check_checksums
    print(check_checksums(Path(sys.argv[1])))
    # VmHWM: this process's own peak (ru_maxrss would carry the forking parent's peak over
    # exec, so a test run that had grown large would fail this check by inheritance)
    status = Path("/proc/self/status").read_text().splitlines()
    print(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
    """
)


@pytest.mark.timeout(300)
def test_hashing_a_2_gib_sparse_file_keeps_memory_flat(tmp_path):
    root = tmp_path / "release"
    root.mkdir()
    with open(root / "big.bin", "wb") as handle:
        handle.truncate(2 * 1024**3)  # 2 GiB, one hole: no disk used
    # a wrong digest: the whole file must still be read to find that out
    (root / "SHA256SUMS").write_text("0" * 64 + "  big.bin\n")
    result = subprocess.run(
        [sys.executable, "-c", HASH_PROBE, str(root)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stderr
    problems, max_rss_kib = result.stdout.splitlines()
    assert problems == "['big.bin: SHA-256 differs from SHA256SUMS']"
    assert int(max_rss_kib) < 200 * 1024, f"peak RSS {int(max_rss_kib) // 1024} MiB"


# ------------------------------------------------------------------------------ improve report


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """A bundle of the scripted improve example (5 trials), rendered once."""
    base = tmp_path_factory.mktemp("hostile-bundle")
    configs = base / "examples" / "improve"
    shutil.copytree(ROOT / "examples" / "improve", configs)
    shutil.copytree(ROOT / "examples" / "improve-suites", base / "examples" / "improve-suites")
    init_target("toolloop", base / "runs" / "improve-target")
    made = cli("improve", "run", str(configs / "manifest-scripted.json"))
    assert made.returncode == 0, made.stderr
    return base / "runs" / "improve-demo"


def bundle_copy(bundle: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy, symlinks=True)
    return copy


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_report_reads_no_trial_file_through_a_link_or_fifo(bundle, tmp_path, outside):
    copy = bundle_copy(bundle, tmp_path)
    patch = copy / "trials" / "002" / "candidate.patch"
    patch.unlink()
    os.symlink(outside / "secret.txt", patch)  # would be shown as the trial's diff
    selection = copy / "trials" / "003" / "selection_decision.json"
    selection.unlink()
    os.mkfifo(selection)
    (outside / "004").mkdir()
    shutil.copytree(copy / "trials" / "004", outside / "004", dirs_exist_ok=True)
    (outside / "004" / "candidate.patch").write_text(f"+{MARKER}\n")
    shutil.rmtree(copy / "trials" / "004")
    os.symlink(outside / "004", copy / "trials" / "004")  # a whole trial folder linked out
    evaluation = copy / "trials" / "005" / "artifacts" / "candidates" / "evaluation.json"
    evaluation.write_text(DEEP)
    result = cli("improve", "report", str(copy))
    clean(result)
    assert result.returncode == 0, result.stdout + result.stderr
    report = (copy / "report.md").read_text() + (copy / "report.html").read_text()
    assert MARKER not in report
    markdown = (copy / "report.md").read_text()
    assert "trials/002/candidate.patch not read: candidate.patch is a symlink, not read" in markdown
    assert (
        "trials/003/selection_decision.json not read: selection_decision.json is not a regular "
        "file (FIFO)" in markdown
    )
    assert "trials/004/candidate.patch not read: candidate.patch is not inside" in markdown
    assert (
        "trials/005/artifacts/candidates/evaluation.json not read: JSON nested deeper than 100 "
        "levels" in markdown
    )


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_report_refuses_a_bundle_whose_own_files_are_links_or_fifos(bundle, tmp_path, outside):
    linked = bundle_copy(bundle, tmp_path / "linked")
    ledger = linked / "trial_ledger.jsonl"
    shutil.copy(ledger, outside / "ledger.jsonl")
    with (outside / "ledger.jsonl").open("a") as handle:
        handle.write(json.dumps({"trial": 6, "candidate_id": MARKER}) + "\n")
    ledger.unlink()
    os.symlink(outside / "ledger.jsonl", ledger)
    result = cli("improve", "report", str(linked))
    output = clean(result)
    assert result.returncode == 2, output
    assert f"{linked}: not an improve bundle as metaeval writes it, not read: " in output
    assert "trial_ledger.jsonl: symlink leading outside" in output

    piped = bundle_copy(bundle, tmp_path / "piped")
    (piped / "resolved_manifest.json").unlink()
    os.mkfifo(piped / "resolved_manifest.json")
    result = cli("improve", "report", str(piped))
    output = clean(result)
    assert result.returncode == 2 and "resolved_manifest.json: not a regular file (FIFO)" in output

    deep = bundle_copy(bundle, tmp_path / "deep")
    (deep / "baseline_evaluation.json").write_text(DEEP)
    result = cli("improve", "report", str(deep))
    output = clean(result)
    assert result.returncode == 2, output
    assert "baseline_evaluation.json: JSON nested deeper than 100 levels" in output
    # nothing was written through the links
    assert MARKER in (outside / "ledger.jsonl").read_text()
    assert len((outside / "ledger.jsonl").read_text().splitlines()) == 6
