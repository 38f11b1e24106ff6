"""Artifact checks of a build, each on artifacts built to pass or fail it: the relaxed compile
probe (paper Appendix G, Table 10) in the real sandbox, and the leakage scan over the whole
artifact (Appendix H)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from metaeval.protocols.buildfind.artifact.relaxed_probe import (
    NESTED_FAIL,
    NESTED_PASS,
    NESTED_TIMEOUT,
    NO_NESTED,
    NOT_CONFIGURED,
    ROOT_PROJECT,
    SEVERAL_NESTED,
    relaxed_probe,
    relaxed_probe_table,
)
from metaeval.protocols.buildfind.artifact.validation import leakage_scan

# the root-level probe of a task whose project root is marked by proj.toml
PROBE = "test -f proj.toml && python3 -m compileall -q ."
GOOD, BAD = "def f():\n    return 1\n", "def f(:\n"


def artifact(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.bwrap
def test_relaxed_probe_builds_a_unique_nested_project_without_touching_the_artifact(
    tmp_path: Path,
) -> None:
    nested = artifact(tmp_path / "a", {"crate/proj.toml": "", "crate/m.py": GOOD, "README": "x"})
    before = sorted(p.relative_to(nested) for p in nested.rglob("*"))
    result = relaxed_probe(nested, "proj.toml", PROBE)
    assert result["outcome"] == NESTED_PASS and result["nested"] == "crate"
    assert sorted(p.relative_to(nested) for p in nested.rglob("*")) == before  # no pycache
    broken = artifact(tmp_path / "b", {"crate/proj.toml": "", "crate/m.py": BAD})
    failed = relaxed_probe(broken, "proj.toml", PROBE)
    assert failed["outcome"] == NESTED_FAIL and failed["returncode"] != 0


@pytest.mark.bwrap
def test_relaxed_probe_records_a_timeout(tmp_path: Path) -> None:
    slow = artifact(tmp_path / "a", {"crate/proj.toml": ""})
    assert relaxed_probe(slow, "proj.toml", "sleep 120", timeout_s=2)["outcome"] == NESTED_TIMEOUT


def test_relaxed_probe_runs_only_on_a_unique_nested_project(tmp_path: Path) -> None:
    none = artifact(tmp_path / "none", {"m.py": GOOD})
    two = artifact(tmp_path / "two", {"a/proj.toml": "", "b/proj.toml": ""})
    root = artifact(tmp_path / "root", {"proj.toml": "", "m.py": BAD})
    assert relaxed_probe(none, "proj.toml", PROBE)["outcome"] == NO_NESTED
    several = relaxed_probe(two, "proj.toml", PROBE)
    assert several["outcome"] == SEVERAL_NESTED and several["nested"] == ["a", "b"]
    assert relaxed_probe(root, "proj.toml", PROBE)["outcome"] == ROOT_PROJECT
    assert relaxed_probe(none, None, PROBE)["outcome"] == NOT_CONFIGURED


def test_table10_counts_the_excluded_builds_by_outcome() -> None:
    outcomes = [NESTED_PASS] * 6 + [NO_NESTED, NESTED_FAIL, None]
    builds = pl.DataFrame(
        {
            "status": ["ok"] * 9 + ["ok", "timeout"],
            "compile_pass": [False] * 9 + [True, False],
            "relaxed_probe": [*outcomes, None, NESTED_PASS],  # a passing and a failed build
        }
    )
    table = dict(relaxed_probe_table(builds).iter_rows())
    assert table["Primary root-level compile-probe exclusions"] == 9
    assert table["Unique nested project found"] == 7
    assert table["Nested project builds under relaxed probe"] == 6
    assert table["Nested project build failures"] == 1
    assert table["No nested project found"] == 1
    assert table["Relaxed probe not run"] == 1
    old = relaxed_probe_table(builds.drop("relaxed_probe"))  # builds written before it
    assert dict(old.iter_rows())["Relaxed probe not run"] == 9


def question(qid: str, gold: str = "B") -> SimpleNamespace:
    return SimpleNamespace(
        id=qid,
        gold=gold,
        question="How does the store recover after a crash during compaction?",
        options={"A": "alpha", "B": "bravo", "C": "charlie", "D": "delta"},
    )


def test_leakage_scan_reads_the_whole_artifact(tmp_path: Path) -> None:
    task = SimpleNamespace(questions=[question("kv-07"), question("kv-08")])
    clean = artifact(tmp_path / "clean", {"kv.py": GOOD, "README.md": "A store.\n"})
    assert not any(leakage_scan(clean, task).values())
    leaky = artifact(tmp_path / "leaky", {"kv.py": GOOD})
    # a Latin-1 file (not UTF-8) holding a gold key: scanned, not skipped
    (leaky / "notes.txt").write_bytes("caf\xe9 kv-07: answer B\n".encode("latin-1"))
    (leaky / "docs").mkdir()
    (leaky / "docs" / "kv-08.md").write_text("nothing\n")  # a file named after a question
    (leaky / "FAQ.md").write_text(
        "how does the store recover after a crash\n   during compaction?\n"
    )
    found = leakage_scan(leaky, task)
    assert found["gold_keys"] == ["kv-07"]
    assert found["question_ids"] == ["kv-07", "kv-08"]
    assert found["question_texts"] == ["kv-07", "kv-08"]  # both share the copied wording
    assert found["unscanned"] == []
