"""Build-and-find releases and restricted-view runs, end to end on the example pack.

One run of the reference builders and the scripted reference finder (no model) is made once:
first without views (its full-view tables are kept aside), then resumed with three restricted
views. The release of that run is checked file by file, for planted secrets and host paths,
against tampering, and offline.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import polars as pl
import pytest

from kill_run import kill_after_lines
from metaeval.protocols.buildfind.rows.table import COLUMNS, read_rows
from metaeval.sandbox.bwrap import bwrap_available

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "buildfind-reference.yaml"
SECRET_NAME = "METAEVAL_RELEASE_TEST_API_KEY"
SECRET = "sk-planted-release-secret-0123456789"
VIEWS = """
views:
  - readme_only
  - source_only
  - {name: no_readme, include: ["**"], exclude: ["README*", "readme*"]}
"""


def cli(*args: str, env: dict | None = None, cwd: Path | None = None):
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=cwd,
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "README.md"}


@pytest.fixture(scope="module")
def view_run(tmp_path_factory):
    """(run dir, full-view tables before the views ran, home, config with views)."""
    base = tmp_path_factory.mktemp("bf")
    home = base / "home"
    home.mkdir()
    text = CONFIG.read_text().replace(
        "pack: buildfind-pack", f"pack: {CONFIG.parent / 'buildfind-pack'}"
    )
    plain, with_views = base / "plain.yaml", base / "views.yaml"
    plain.write_text(text)
    with_views.write_text(text + VIEWS)
    run_dir = base / "run"
    env = {**os.environ, "HOME": str(home), SECRET_NAME: SECRET}
    first = cli("buildfind", "run", str(plain), "-o", str(run_dir), env=env)
    assert first.returncode == 0, first.stderr
    before = {
        "tables": snapshot(run_dir / "tables"),
        "rows": (run_dir / "question_rows.parquet").read_bytes(),
    }
    second = cli("buildfind", "run", str(with_views), "-o", str(run_dir), env=env)
    assert second.returncode == 0, second.stderr
    assert "0 build(s) and 0 find(s) run" in second.stdout
    assert "restricted-view finds run: 108" in second.stdout  # 3 views x 6 artifacts x 2 x 3
    return run_dir, before, home, env


# ------------------------------------------------------------------------------ views


def test_view_runs_never_change_the_full_view_tables(view_run):
    run_dir, before, _, _ = view_run
    after = snapshot(run_dir / "tables")
    for name, data in before["tables"].items():
        assert after[name] == data, name
    assert (run_dir / "question_rows.parquet").read_bytes() == before["rows"]
    # a second pass over a run also summarizes the evidence-audit sample (issue 9 tracks this)
    added = sorted(n for n in set(after) - set(before["tables"]) if "evidence_audit" not in n)
    assert added == sorted(
        f"view_{t}.{ext}"
        for t in ("accuracy", "finder", "rb_effort", "recovery_gate", "files")
        for ext in ("csv", "parquet")
    )
    rows = read_rows(run_dir / "question_rows.parquet")
    assert rows.height == 900  # the view runs (108 x 15 rows) are not among them


def test_view_records_say_what_each_finder_saw(view_run):
    run_dir = view_run[0]
    records = [json.loads(x) for x in (run_dir / "view_finds.jsonl").read_text().splitlines()]
    assert len(records) == 108 and all(r["status"] == "ok" for r in records)
    kept = {
        (r["view"], r["task"], r["builder"]): r["view_info"]["kept_files"]
        for r in records
        if r["slice"] == "formal"
    }
    # documented and divergent repos have a README; terse has none
    assert kept[("readme_only", "kvstore-wal", "documented")] == ["README.md"]
    assert kept[("readme_only", "kvstore-wal", "terse")] == []
    source = kept[("source_only", "http-router", "documented")]
    assert source and all(f.endswith(".py") for f in source)
    assert kept[("no_readme", "http-router", "documented")] == source
    # a view run keeps the seed and option order of its full-view cell: only the view differs
    finds = {
        (r["task"], r["builder"], r["finder"], r["find_trial"]): r
        for r in map(json.loads, (run_dir / "finds.jsonl").read_text().splitlines())
        if r["slice"] == "formal"
    }
    for r in records:
        full = finds[(r["task"], r["builder"], r["finder"], r["find_trial"])]
        assert (r["seed"], r["permutation"]) == (full["seed"], full["permutation"])


def _accuracy(rows: pl.DataFrame) -> float:
    """Mean per-run accuracy on implemented_gold questions (independent of the package)."""
    runs: dict[tuple, list[bool]] = {}
    for r in rows.iter_rows(named=True):
        if r["compile_pass"] and r["label"] == "implemented_gold":
            key = (r["task"], r["builder"], r["build_trial"], r["finder"], r["find_trial"])
            runs.setdefault(key, []).append(r["correct"])
    return sum(sum(v) / len(v) for v in runs.values()) / len(runs)


def test_view_tables_match_an_independent_computation(view_run):
    run_dir = view_run[0]
    view_rows = pl.read_parquet(run_dir / "view_rows.parquet")
    rows = read_rows(run_dir / "question_rows.parquet")
    table = pl.read_csv(run_dir / "tables" / "view_accuracy.csv")
    full = _accuracy(rows.filter(pl.col("slice") == "formal"))
    qonly_rows = rows.filter(pl.col("slice") == "question_only")
    qonly = qonly_rows.get_column("correct").mean()  # 15 questions in every run
    for view in ("readme_only", "source_only", "no_readme"):
        mine = view_rows.filter(pl.col("view") == view)
        # labels come from the full-view audit of the same artifact and question
        assert (
            mine.get_column("label").value_counts().sort("label").rows()
            == rows.filter(pl.col("slice") == "formal")
            .get_column("label")
            .value_counts()
            .sort("label")
            .rows()
        )
        expected = _accuracy(mine)
        got = table.filter(
            (pl.col("view") == view)
            & (pl.col("slice") == "compile_pass")
            & (pl.col("task") == "all")
        ).row(0, named=True)
        assert got["accuracy"] == pytest.approx(expected, abs=1e-12)
        assert got["full_view_accuracy"] == pytest.approx(full, abs=1e-12)
        assert got["lift_vs_full_pp"] == pytest.approx(100 * (expected - full), abs=1e-9)
        assert got["lift_vs_question_only_pp"] == pytest.approx(100 * (expected - qonly), abs=1e-9)
    readme = table.filter((pl.col("view") == "readme_only") & (pl.col("task") == "all"))
    assert readme.get_column("accuracy")[0] < 1.0  # terse artifacts show nothing to read
    rb = pl.read_csv(run_dir / "tables" / "view_rb_effort.csv").filter(
        pl.col("view") == "no_readme"
    )
    documented = rb.filter(pl.col("builder") == "documented").row(0, named=True)
    assert documented["R_b"] < documented["full_view_R_b"]  # no README bytes to read


def test_report_has_a_section_per_view_and_the_claim_map(view_run):
    run_dir = view_run[0]
    report = (run_dir / "report.md").read_text()
    for view in ("readme_only", "source_only", "no_readme"):
        assert f"## Restricted view: {view}" in report
    assert "## Claim-evidence map" in report
    assert (
        "| accuracy.compile_pass |" in report and "| view.readme_only.lift_vs_full_pp |" in report
    )
    html = (run_dir / "report.html").read_text()
    assert 'id="view-readme_only"' in html and 'id="claims"' in html
    assert '<a href="#table-calibration">calibration.accuracy [slice=compile_pass' in html


# ------------------------------------------------------------------------------ release


@pytest.fixture(scope="module")
def release(view_run, tmp_path_factory):
    if importlib.util.find_spec("mlcroissant") is None:
        if os.environ.get("METAEVAL_REQUIRE_EXTRAS") == "1":
            pytest.fail(
                "the `release` extra (mlcroissant) is required: pip install -e '.[release]'"
            )
        pytest.skip("mlcroissant is not installed (extra `release`)")
    run_dir, _, home, env = view_run
    # Plant what a release must never carry: a secret value and host paths, in an artifact
    # (as if a builder had written them), in the review CSV and in a Parquet file.
    planted = f"key={SECRET} run={run_dir.resolve()} home={home}\n"
    artifact = next((run_dir / "artifacts" / "kvstore-wal" / "documented").iterdir())
    (artifact / "NOTES.txt").write_text(planted)
    review = run_dir / "labels" / "review.csv"
    header, first, *rest = review.read_text().splitlines(keepends=True)
    assert first.endswith(",,,\n")  # label, reviewer, notes still empty
    review.write_text(header + first[:-2] + f'"{planted.strip()}"\n' + "".join(rest))
    prelabels = run_dir / "labels" / "prelabels.parquet"
    df = pl.read_parquet(prelabels)
    strings = [c for c, t in df.schema.items() if t == pl.String]
    df.with_columns(pl.lit(planted.strip()).alias(strings[-1])).write_parquet(prelabels)

    # A transcript blob that names another blob holding a host path (as a shortened tool
    # output does): both must be renamed in the release and the references follow.
    inner = f"tool output under {run_dir.resolve()}/work\n".encode()
    inner_ref = "sha256:" + hashlib.sha256(inner).hexdigest()
    _put_blob(run_dir, inner)
    finds = run_dir / "finds.jsonl"
    lines = finds.read_text().splitlines()
    first = json.loads(lines[0])
    outer = _blob(run_dir, first["transcript_blob"]) + f"[full text in blob {inner_ref}]\n".encode()
    first["transcript_blob"] = _put_blob(run_dir, outer)
    finds.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")

    out = tmp_path_factory.mktemp("rel") / "release"
    made = cli("buildfind", "release", str(run_dir), "-o", str(out), env=env)
    assert made.returncode == 0, made.stderr
    return out, run_dir, home


def _blob(root: Path, ref: str) -> bytes:
    digest = ref.removeprefix("sha256:")
    return (root / "blobs" / digest[:2] / digest).read_bytes()


def _put_blob(root: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    path = root / "blobs" / digest[:2] / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"sha256:{digest}"


def test_blob_references_follow_renamed_blobs(release):
    out = release[0]
    records = out / "records"
    for path in (records / "blobs").rglob("*"):
        if path.is_file():
            assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name
    first = json.loads((records / "finds.jsonl").read_text().splitlines()[0])
    outer = _blob(records, first["transcript_blob"])  # exists under its (new) hash
    inner_ref = re.search(rb"full text in blob (sha256:[0-9a-f]{64})", outer).group(1).decode()
    assert _blob(records, inner_ref).startswith(b"tool output under $RUN_DIR/work")


def test_release_verifies(release):
    out = release[0]
    result = cli("buildfind", "verify-release", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hold" in result.stdout


def test_release_holds_every_part(release):
    out, run_dir, _ = release
    for rel in (
        "pack/kvstore-wal/spec.yaml",
        "pack/http-router/questions.yaml",
        "prompts/finder.txt",
        "records/manifest.json",
        "records/builds.jsonl",
        "records/finds.jsonl",
        "records/view_finds.jsonl",
        "data/question_rows.parquet",
        "data/question_rows.csv",
        "data/view_rows.parquet",
        "data/builds.parquet",
        "tables/calibration.csv",
        "tables/view_accuracy.parquet",
        "reports/report.html",
        "labels/prelabels.parquet",
        "labels/evidence_audit.csv",
        "labels/PROVENANCE.md",
        "claims.json",
        "LICENSE",
        "croissant.json",
    ):
        assert (out / rel).is_file(), rel
    assert (out / "pack" / "kvstore-wal" / "spec.yaml").read_bytes() == (
        CONFIG.parent / "buildfind-pack" / "kvstore-wal" / "spec.yaml"
    ).read_bytes()
    assert read_rows(out / "data" / "question_rows.parquet").equals(
        read_rows(run_dir / "question_rows.parquet")
    )
    # artifacts as probed (build outputs left out), byte for byte except the scrubbed file
    released = {
        p.relative_to(out / "artifacts").as_posix(): p.read_bytes()
        for p in (out / "artifacts").rglob("*")
        if p.is_file()
    }
    original = {
        p.relative_to(run_dir / "artifacts").as_posix(): p.read_bytes()
        for p in (run_dir / "artifacts").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert released.keys() == original.keys()
    assert [k for k in released if released[k] != original[k]] == [
        k for k in original if k.endswith("NOTES.txt")
    ]
    licenses = (out / "LICENSES.md").read_text()
    assert "Model weights" in licenses and "Agent CLI code" in licenses
    # every file is listed with its SHA-256
    sums = dict(
        reversed(line.split("  ", 1)) for line in (out / "SHA256SUMS").read_text().splitlines()
    )
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    assert set(sums) == files
    assert all(hashlib.sha256((out / f).read_bytes()).hexdigest() == sums[f] for f in files)
    # the tarball holds the same tree
    with tarfile.open(out.parent / "release.tar.gz") as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        assert set(members) == {f"release/{f}" for f in files | {"SHA256SUMS"}}
        for name in ("release/data/question_rows.csv", "release/croissant.json"):
            assert tar.extractfile(members[name]).read() == (out / name[8:]).read_bytes()


def test_croissant_describes_the_rows_with_the_schema(release):
    out = release[0]
    doc = json.loads((out / "croissant.json").read_text())
    assert doc["conformsTo"] == "http://mlcommons.org/croissant/1.0"
    sets = {s["@id"]: s for s in doc["recordSet"]}
    assert {"question_rows", "view_rows", "builds", "finds_records", "view_finds_records"} <= set(
        sets
    )
    fields = {f["name"]: f for f in sets["question_rows"]["field"]}
    assert list(fields) == list(COLUMNS)
    assert fields["correct"]["dataType"] == "sc:Boolean"
    assert fields["find_trial"]["dataType"] == "sc:Integer"
    assert all(fields[c]["description"] == COLUMNS[c][1] for c in COLUMNS)
    files = {d["contentUrl"]: d["sha256"] for d in doc["distribution"]}
    for rel, digest in files.items():
        assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == digest

    import mlcroissant as mlc

    dataset = mlc.Dataset(jsonld=str(out / "croissant.json"))
    records = list(dataset.records(record_set="question_rows"))
    assert len(records) == read_rows(out / "data" / "question_rows.parquet").height
    first = records[0]
    assert set(first) == {f"question_rows/{c}" for c in COLUMNS}


def _strings(path: Path) -> str:
    if path.suffix == ".parquet":
        df = pl.read_parquet(path)
        return "\n".join(
            str(v) for c, t in df.schema.items() if t == pl.String for v in df.get_column(c)
        )
    return ""


def test_no_secret_or_host_path_is_released(release):
    out, run_dir, home = release
    markers = [SECRET, str(run_dir), str(run_dir.resolve()), str(home), str(CONFIG.parent)]
    leaks = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        text = _strings(path)
        leaks += [(path.name, m) for m in markers if m.encode() in data or m in text]
    with tarfile.open(out.parent / "release.tar.gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                data = tar.extractfile(member).read()
                leaks += [(member.name, m) for m in markers if m.encode() in data]
    assert leaks == []
    notes = next((out / "artifacts" / "kvstore-wal" / "documented").rglob("NOTES.txt"))
    assert notes.read_text() == "key=[REDACTED] run=$RUN_DIR home=$HOME\n"
    manifest = json.loads((out / "records" / "manifest.json").read_text())
    assert manifest["config"]["pack"] == "$PACK_DIR"


def test_release_of_the_same_run_is_byte_identical(release, tmp_path):
    out, run_dir, home = release
    again = tmp_path / "release"
    env = {**os.environ, "HOME": str(home), SECRET_NAME: SECRET}
    assert cli("buildfind", "release", str(run_dir), "-o", str(again), env=env).returncode == 0
    assert (again.parent / "release.tar.gz").read_bytes() == (
        out.parent / "release.tar.gz"
    ).read_bytes()


def test_the_claim_command_recomputes_the_claimed_tables(release, tmp_path):
    out = release[0]
    claims = json.loads((out / "claims.json").read_text())
    assert {c["table"] for c in claims} >= {"calibration", "rb_effort", "view_accuracy"}
    work = tmp_path / "copy"
    shutil.copytree(out, work)
    argv = shlex.split(claims[0]["command"])
    assert argv[:3] == ["metaeval", "buildfind", "analyze"]
    result = cli(*argv[1:], cwd=work)
    assert result.returncode == 0, result.stderr
    for claim in claims:
        assert (work / claim["output"]).read_bytes() == (
            out / "tables" / f"{claim['table']}.csv"
        ).read_bytes(), claim["id"]
        assert claim["n_rows"] > 0


def _tampered(out: Path, tmp_path: Path, name: str) -> Path:
    copy = tmp_path / name
    shutil.copytree(out, copy)
    return copy


def _flip(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new, 1))


def _resum(root: Path) -> None:
    from metaeval.protocols.buildfind.release.write import checksums

    (root / "SHA256SUMS").write_text(checksums(root))


def _verify(root: Path) -> list[str]:
    result = cli("buildfind", "verify-release", str(root))
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    return result.stdout.splitlines()


def test_one_altered_byte_is_found_and_named(release, tmp_path):
    out = release[0]
    table = _tampered(out, tmp_path, "table")
    _flip(
        table / "tables" / "calibration.csv",
        b"compile_pass,all,6,36,1.0",
        b"compile_pass,all,6,36,0.0",
    )
    lines = _verify(table)
    assert "tables/calibration.csv: SHA-256 differs from SHA256SUMS" in lines
    assert any(
        x.startswith("tables/calibration.csv: row ") and "column accuracy" in x for x in lines
    )

    row = _tampered(out, tmp_path, "row")
    _flip(row / "data" / "question_rows.csv", b",true,", b",fals,")
    lines = _verify(row)
    assert "data/question_rows.csv: SHA-256 differs from SHA256SUMS" in lines

    artifact = _tampered(out, tmp_path, "artifact")
    target = next((artifact / "artifacts" / "http-router" / "terse").rglob("router.py"))
    _flip(target, b"def ", b"dEf ")
    lines = _verify(artifact)
    rel = target.relative_to(artifact).as_posix()
    assert lines[0] == f"{rel}: SHA-256 differs from SHA256SUMS"


def test_tampering_with_consistent_checksums_is_still_found(release, tmp_path):
    """Re-hashing after an edit does not hide it: the tables are recomputed from the rows."""
    out = release[0]
    table = _tampered(out, tmp_path, "table")
    rb = pl.read_parquet(table / "tables" / "rb_effort.parquet")
    rb.with_columns(pl.col("R_b") * (1 + 1e-6)).write_parquet(
        table / "tables" / "rb_effort.parquet"
    )
    _resum(table)
    lines = _verify(table)
    assert any(x.startswith("tables/rb_effort.parquet: row ") and "column R_b" in x for x in lines)
    assert not any("SHA-256" in x for x in lines)

    rows = _tampered(out, tmp_path, "rows")
    df = read_rows(rows / "data" / "question_rows.parquet")
    flipped = df.with_columns(
        correct=pl.when((pl.col("slice") == "formal") & (pl.col("builder") == "terse"))
        .then(~pl.col("correct"))
        .otherwise(pl.col("correct"))
    )
    flipped.write_parquet(rows / "data" / "question_rows.parquet")
    flipped.write_csv(rows / "data" / "question_rows.csv")
    _resum(rows)
    lines = _verify(rows)
    assert any(x.startswith("tables/calibration.parquet: row ") for x in lines)
    assert any(x.startswith("claims.json: claim accuracy.compile_pass") for x in lines)
    assert any(x.startswith("data/question_rows.parquet (derived from records") for x in lines)

    # a record edited (and re-hashed) no longer gives the released rows
    record = _tampered(out, tmp_path, "record")
    finds = record / "records" / "finds.jsonl"
    lines = finds.read_text().splitlines()
    first = json.loads(lines[0])
    answer = first["answers"][sorted(first["answers"])[0]]
    answer["correct"] = not answer["correct"]
    finds.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    _resum(record)
    problems = _verify(record)
    assert any(
        x.startswith("data/question_rows.parquet (derived from records") and "column correct" in x
        for x in problems
    )


def test_bootstrap_ci_is_recomputed_with_the_run_seed(release, tmp_path):
    """The released bootstrap_ci carries the seed derived from the run's seed0; an edited
    interval is found by recomputing it; a release made before the table still verifies."""
    from metaeval.protocols.buildfind.seeds import derive_seed

    out = release[0]
    seed0 = json.loads((out / "records" / "manifest.json").read_text())["config"]["seed0"]
    ci = pl.read_parquet(out / "tables" / "bootstrap_ci.parquet")
    assert ci.height > 0
    assert set(ci["seed"]) == {derive_seed(seed0, "bootstrap_ci")}
    assert set(ci["replicates"]) == {1000}

    edited = _tampered(out, tmp_path, "ci")
    ci.with_columns(pl.col("ci_high") * (1 + 1e-6)).write_parquet(
        edited / "tables" / "bootstrap_ci.parquet"
    )
    _resum(edited)
    lines = _verify(edited)
    assert any(x.startswith("tables/bootstrap_ci.parquet: row ") for x in lines), lines

    older = _tampered(out, tmp_path, "older")
    for ext in ("csv", "parquet"):  # made before bootstrap_ci, so before table_pairs too
        (older / "tables" / f"bootstrap_ci.{ext}").unlink()
        (older / "tables" / f"table_pairs.{ext}").unlink()
    _resum(older)
    result = cli("buildfind", "verify-release", str(older))
    assert result.returncode == 0, result.stdout + result.stderr


def test_verify_release_needs_no_network(release):
    """verify-release, Croissant validation included, inside bubblewrap with the network off."""
    if not bwrap_available():
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail("METAEVAL_REQUIRE_BWRAP=1 but bubblewrap cannot run here")
        pytest.skip("bubblewrap cannot run here")
    from metaeval.sandbox.bwrap import wrap_command
    from metaeval.sandbox.policy import (
        Mount,
        SandboxSpec,
        metaeval_source_dirs,
        running_python_prefixes,
    )
    from metaeval.sandbox.process import run_process

    out = Path(release[0]).resolve()
    src = str(ROOT / "src")
    spec = SandboxSpec(  # the release, metaeval and its Python: nothing else, no network
        mounts=[Mount(str(out)), *(Mount(d) for d in metaeval_source_dirs())],
        chdir=str(out),
        env={"PYTHONPATH": src},
        python_prefixes=running_python_prefixes(),
    )
    argv, env, sandboxed = wrap_command(
        spec, [sys.executable, "-m", "metaeval.cli", "buildfind", "verify-release", "."]
    )
    result = run_process(argv, cwd=out, env=env, timeout_s=300, sandboxed=sandboxed)
    text = result.stdout + result.stderr
    assert result.returncode == 0 and result.sandboxed, text
    assert "hold" in text


def test_bad_inputs_get_clear_errors(tmp_path, release):
    run_dir = release[1]
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    result = cli("buildfind", "release", str(not_a_run), "-o", str(tmp_path / "x"))
    assert result.returncode == 2 and "no manifest.json" in result.stderr
    assert str(not_a_run) in result.stderr and "Traceback" not in result.stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "file").write_text("x")
    result = cli("buildfind", "release", str(run_dir), "-o", str(busy))
    assert result.returncode == 2 and "not empty" in result.stderr
    assert (busy / "file").read_text() == "x"
    lines = _verify(not_a_run)
    assert "SHA256SUMS: missing" in lines
    assert any("records/manifest.json" in x for x in lines)


def test_killed_view_phase_resumes_without_losing_or_duplicating(tmp_path):
    text = CONFIG.read_text().replace(
        "pack: buildfind-pack", f"pack: {CONFIG.parent / 'buildfind-pack'}"
    )
    config = tmp_path / "views.yaml"
    config.write_text(text + "views: [readme_only]\n")
    run_dir = tmp_path / "run"
    views = run_dir / "view_finds.jsonl"
    kept = kill_after_lines(["buildfind", "run", str(config), "-o", str(run_dir)], views, 3, 300)
    assert 3 <= kept.count(b"\n") < 36, "the kill should land mid view phase"

    rerun = cli("buildfind", "run", str(config), "-o", str(run_dir))
    assert rerun.returncode == 0, rerun.stderr
    assert views.read_bytes().startswith(kept)
    records = [json.loads(x) for x in views.read_text().splitlines()]
    keys = [
        (r["view"], r["task"], r["builder"], r["build_trial"], r["finder"], r["find_trial"])
        for r in records
    ]
    assert len(keys) == 36 and len(set(keys)) == 36
    assert pl.read_parquet(run_dir / "view_rows.parquet").height == 36 * 15


def test_broken_files_are_reported_not_raised(release, tmp_path):
    out = release[0]
    broken = _tampered(out, tmp_path, "broken")
    aels = broken / "tables" / "aels.parquet"
    aels.write_bytes(aels.read_bytes()[:64])
    doc = json.loads((broken / "croissant.json").read_text())
    rows_set = next(s for s in doc["recordSet"] if s["@id"] == "question_rows")
    rows_set["field"][0]["dataType"] = "sc:NoSuchType"
    (broken / "croissant.json").write_text(json.dumps(doc))
    _resum(broken)
    lines = _verify(broken)
    assert any(x.startswith("tables/aels.parquet: not a readable Parquet table") for x in lines)
    assert any(x.startswith("croissant.json: ") and "dataType" in x for x in lines)
    # the other tables were still compared (and hold)
    assert not any(x.startswith("tables/calibration") for x in lines)

    # valid metadata whose field reads the wrong column is caught by reading the records
    wrong = _tampered(out, tmp_path, "wrong-column")
    doc = json.loads((wrong / "croissant.json").read_text())
    rows_set = next(s for s in doc["recordSet"] if s["@id"] == "question_rows")
    task = next(f for f in rows_set["field"] if f["name"] == "task")
    task["source"]["extract"]["column"] = "finder"
    (wrong / "croissant.json").write_text(json.dumps(doc))
    _resum(wrong)
    lines = _verify(wrong)
    assert any(
        x.startswith("croissant.json: record set question_rows record 1 field task") for x in lines
    )


def test_a_view_changed_under_the_same_name_is_refused(view_run, tmp_path):
    run_dir, _, _, env = view_run
    text = CONFIG.read_text().replace(
        "pack: buildfind-pack", f"pack: {CONFIG.parent / 'buildfind-pack'}"
    )
    config = tmp_path / "changed.yaml"
    config.write_text(text + VIEWS.replace('exclude: ["README*", "readme*"]', "exclude: []"))
    before = (run_dir / "view_finds.jsonl").read_bytes()
    result = cli("buildfind", "run", str(config), "-o", str(run_dir), env=env)
    assert result.returncode == 2, result.stdout
    assert "'no_readme'" in result.stderr and "views.2" in result.stderr
    assert "Traceback" not in result.stderr
    assert (run_dir / "view_finds.jsonl").read_bytes() == before


def test_scrubber_replaces_whole_host_paths_longest_first(tmp_path, monkeypatch):
    from metaeval.protocols.buildfind.release.scrub import Scrubber

    home = tmp_path / "home"
    run_dir = home / "runs" / "x"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(SECRET_NAME, SECRET)
    scrub = Scrubber(run_dir, None)
    text = f"{run_dir}/a {home}/b {home}x/c {run_dir}. key={SECRET}"
    assert scrub.text(text) == "$RUN_DIR/a $HOME/b " + f"{home}x/c $RUN_DIR. key=[REDACTED]"
    data = b"\x00\xff" + str(run_dir).encode() + b"\x00"
    assert scrub.data(data, "bin") == b"\x00\xff$RUN_DIR\x00"
    assert scrub.changed == {"bin": 1}


def test_manifest_columns_are_released_and_checked(release, tmp_path):
    """Appendix D: the released rows carry each run's seeds and hashes, equal to its records;
    an edited value of one of those columns fails verification even with fresh checksums."""
    out = release[0]
    rows = read_rows(out / "data" / "question_rows.parquet")
    finds = [json.loads(x) for x in (out / "records" / "finds.jsonl").read_text().splitlines()]
    first = next(r for r in finds if r.get("slice") == "formal" and r.get("answers"))
    row = rows.filter(
        (pl.col("builder") == first["builder"])
        & (pl.col("finder") == first["finder"])
        & (pl.col("task") == first["task"])
        & (pl.col("build_trial") == first["build_trial"])
        & (pl.col("find_trial") == first["find_trial"])
    ).row(0, named=True)
    assert row["find_seed"] == first["seed"]
    assert row["finder_prompt_hash"] == first["prompt_hash"]
    assert row["spec_hash"] == first["spec_hash"]
    assert row["find_created_at"] == first["created_at"]
    formal = rows.filter(pl.col("slice") == "formal")
    assert formal.height > 0 and formal.get_column("build_seed").null_count() == 0

    edited = _tampered(out, tmp_path, "seed")
    df = rows.with_columns(pl.col("find_seed") + 1)
    df.write_parquet(edited / "data" / "question_rows.parquet")
    df.write_csv(edited / "data" / "question_rows.csv")
    _resum(edited)
    lines = _verify(edited)
    assert any(
        x.startswith("data/question_rows.parquet (derived from records") and "find_seed" in x
        for x in lines
    ), lines


def _table3_as_released_before(gate: pl.DataFrame) -> pl.DataFrame:
    """Table 3 in the layout releases had before builders were lined up by label, written
    here from its description: per panel the builders sorted by name on rows 0..n-1, one
    column per task with "97.8% (6/6)", a bare dash where a builder lacks a task."""
    tasks = sorted(set(gate["task"]))
    columns: dict[str, list[str]] = {}
    for panel in sorted(set(gate["effort_panel"])):
        part = [r for r in gate.iter_rows(named=True) if r["effort_panel"] == panel]
        builders = sorted({r["builder"] for r in part})
        columns[f"{panel} builder"] = builders
        for task in tasks:
            found = {r["builder"]: r for r in part if r["task"] == task}
            columns[f"{panel} {task}"] = [
                f"{100 * found[b]['G_task']:.1f}% "
                f"({found[b]['contributing_cells']}/{found[b]['total_cells']})"
                if b in found
                else "–"
                for b in builders
            ]
    assert len({len(v) for v in columns.values()}) == 1  # one panel or equal panels here
    return pl.DataFrame(columns)


def test_a_release_holding_the_earlier_table3_layout_still_verifies(release, tmp_path):
    """A release written before Table 3 lined builders up by label verifies; an edited cell
    of that older layout does not."""
    out = release[0]
    gate = pl.read_parquet(out / "tables" / "recovery_gate.parquet")
    old = _table3_as_released_before(gate)
    current = pl.read_parquet(out / "tables" / "paper_table3.parquet")
    assert old.columns != current.columns  # the two layouts differ

    earlier = _tampered(out, tmp_path, "table3_before")
    old.write_parquet(earlier / "tables" / "paper_table3.parquet")
    old.write_csv(earlier / "tables" / "paper_table3.csv")
    _resum(earlier)
    result = cli("buildfind", "verify-release", str(earlier))
    assert result.returncode == 0, result.stdout + result.stderr

    edited = _tampered(earlier, tmp_path, "table3_before_edited")
    cell = old.columns[1]
    bad = old.with_columns(pl.lit("12.3% (1/6)").alias(cell))
    bad.write_parquet(edited / "tables" / "paper_table3.parquet")
    bad.write_csv(edited / "tables" / "paper_table3.csv")
    _resum(edited)
    assert any("paper_table3" in line for line in _verify(edited))


def test_an_edited_blob_or_spec_behind_a_reshaped_manifest_is_found(release, tmp_path):
    """Re-hashing SHA256SUMS hides neither a blob whose bytes no longer match its name nor a
    spec edited while the manifest's `layers` is made a non-list (or its hash removed)."""
    out = release[0]
    blob_copy = _tampered(out, tmp_path, "blob")
    blob = next(p for p in sorted((blob_copy / "records" / "blobs").rglob("*")) if p.is_file())
    blob.write_bytes(blob.read_bytes() + b" ")
    _resum(blob_copy)
    rel = blob.relative_to(blob_copy).as_posix()
    assert f"{rel}: content does not hash to its name" in _verify(blob_copy)

    spec_copy = _tampered(out, tmp_path, "spec")
    spec = next((spec_copy / "pack").glob("*/spec.yaml"))
    spec.write_text(spec.read_text() + "# edited\n")
    manifest_path = spec_copy / "records" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["layers"] = "none"
    manifest_path.write_text(json.dumps(manifest))
    _resum(spec_copy)
    lines = _verify(spec_copy)
    assert any("field 'layers' is a string, not an array of objects" in x for x in lines), lines

    unhashed = _tampered(out, tmp_path, "unhashed")
    manifest_path = unhashed / "records" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for layer in manifest.get("layers") or []:
        layer["hashes"] = {}
    manifest["hashes"] = {}
    manifest_path.write_text(json.dumps(manifest))
    _resum(unhashed)
    rel = next((unhashed / "pack").glob("*/spec.yaml")).relative_to(unhashed).as_posix()
    assert f"{rel}: records/manifest.json records no hash" in _verify(unhashed)
