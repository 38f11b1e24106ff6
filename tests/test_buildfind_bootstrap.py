"""Bootstrap intervals over artifacts (`bootstrap_ci`) against a bootstrap written here in
plain Python: same seed, same resampling unit (artifacts drawn with replacement within each
(builder, task), strata sorted, artifacts sorted by build_trial), R_b and recovery computed
from the paper's definitions (Eqs. 1-4) on each resample."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from metaeval.protocols.buildfind.analysis.bootstrap import bootstrap_seed
from metaeval.protocols.buildfind.finalize import analyze_rows
from metaeval.protocols.buildfind.rows.table import conform
from metaeval.protocols.buildfind.seeds import derive_seed
from metaeval.protocols.buildfind.tables.write import write_tables

BUILDERS = ["b1", "b2", "b3"]
FINDERS = ["f1", "f2"]
TASKS = ["t1", "t2"]
TRIALS = [0, 1, 2]
QUESTIONS = ["q1", "q2", "q3"]
SEED0 = 4242
B = 1000


def _correct(b: int, f: int, t: int, r: int, q: int) -> bool:
    return (b * 5 + f * 3 + t * 7 + r * 2 + q) % 5 != 0


def _bytes(b: int, f: int, t: int, r: int) -> int:
    return 500 + ((b * 31 + f * 17 + t * 11 + r * 7) % 13) * 100


def synthetic_rows() -> pl.DataFrame:
    rows = []
    for bi, builder in enumerate(BUILDERS):
        for fi, finder in enumerate(FINDERS):
            for ti, task in enumerate(TASKS):
                for r in TRIALS:
                    for qi, qid in enumerate(QUESTIONS):
                        ok = _correct(bi, fi, ti, r, qi)
                        rows.append(
                            {
                                "slice": "formal",
                                "task": task,
                                "builder": builder,
                                "builder_family": builder,
                                "finder": finder,
                                "finder_family": finder,
                                "effort_panel": "high",
                                "finder_effort": "high",
                                "build_trial": r,
                                "find_trial": 0,
                                "question_id": qid,
                                "gold": "A",
                                "answer": "A" if ok else "B",
                                "correct": ok,
                                "compile_pass": True,
                                "label": "unlabeled",
                                "label_source": "none",
                                "novel_retrieval_bytes": _bytes(bi, fi, ti, r),
                                "novel_tool_call_bytes": 0,
                                "input_tokens": 1,
                                "output_tokens": 1,
                            }
                        )
    return conform(pl.DataFrame(rows))


def _stats(draw: list[tuple[int, int, int]]) -> tuple[dict[str, float], dict[str, float | None]]:
    """Recovery per finder (and 'all') and R_b per builder on a multiset of artifacts."""
    acc: dict[str, list[float]] = defaultdict(list)
    cost_runs: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for b, t, r in draw:
        for f in range(len(FINDERS)):
            hits = [_correct(b, f, t, r, q) for q in range(len(QUESTIONS))]
            accuracy = sum(hits) / len(hits)
            acc[FINDERS[f]].append(accuracy)
            acc["all"].append(accuracy)
            if all(hits):
                cost_runs[b, f, t].append(_bytes(b, f, t, r))
    recovery = {f: sum(v) / len(v) for f, v in acc.items()}
    cost = {k: sum(v) / len(v) for k, v in cost_runs.items()}
    rb: dict[str, float | None] = {}
    for b, name in enumerate(BUILDERS):
        logs = [
            math.log(c / min(c2 for (_, f2, t2), c2 in cost.items() if (f2, t2) == (f, t)))
            for (b1, f, t), c in cost.items()
            if b1 == b
        ]
        rb[name] = math.exp(sum(logs) / len(logs)) if logs else None
    return recovery, rb


def hand_bootstrap(seed: int, replicates: int) -> dict[tuple[str, str], tuple[float, float, float]]:
    strata = {(b, t): [(b, t, r) for r in TRIALS] for b in range(3) for t in range(len(TASKS))}
    everything = [a for arts in strata.values() for a in arts]
    point_rec, point_rb = _stats(everything)
    rng = np.random.default_rng(seed)
    samples: dict[tuple[str, str], list[float]] = defaultdict(list)
    for _ in range(replicates):
        draw = []
        for b, t in sorted(strata, key=lambda k: (BUILDERS[k[0]], TASKS[k[1]])):
            arts = strata[b, t]
            draw += [arts[int(i)] for i in rng.integers(0, len(arts), len(arts))]
        recovery, rb = _stats(draw)
        for f, v in recovery.items():
            samples["recovery", f].append(v)
        for name, v in rb.items():
            if v is not None:
                samples["R_b", name].append(v)
    out = {}
    for key, values in samples.items():
        point = point_rec[key[1]] if key[0] == "recovery" else point_rb[key[1]]
        assert point is not None
        low, high = np.percentile(values, [2.5, 97.5])
        out[key] = (point, float(low), float(high))
    return out


def _table(tables: dict[str, pl.DataFrame]) -> dict[tuple[str, str], dict]:
    ci = tables["bootstrap_ci"]
    return {
        (r["statistic"], r["builder"] if r["statistic"] == "R_b" else r["finder"]): r
        for r in ci.to_dicts()
    }


def test_intervals_equal_a_hand_written_bootstrap() -> None:
    tables = analyze_rows(synthetic_rows(), seed0=SEED0)
    got = _table(tables)
    seed = derive_seed(SEED0, "bootstrap_ci")
    assert bootstrap_seed(SEED0) == seed
    want = hand_bootstrap(seed, B)
    assert (
        set(got)
        == set(want)
        == {
            *(("R_b", b) for b in BUILDERS),
            *(("recovery", f) for f in [*FINDERS, "all"]),
        }
    )
    for key, (point, low, high) in want.items():
        row = got[key]
        assert row["estimate"] == pytest.approx(point, rel=1e-12), key
        assert row["ci_low"] == pytest.approx(low, rel=1e-12), key
        assert row["ci_high"] == pytest.approx(high, rel=1e-12), key
        assert row["ci_low"] <= row["estimate"] <= row["ci_high"], key
        assert row["ci_low"] < row["ci_high"], key  # the resamples do vary
        assert (row["seed"], row["replicates"], row["level"]) == (seed, B, 0.95)
    # the point estimates are the published ones
    rb = tables["rb_effort"].filter(pl.col("metric") == "total_bytes")
    for r in rb.to_dicts():
        assert got["R_b", r["builder"]]["estimate"] == pytest.approx(r["R_b"], rel=1e-12)
    calib = tables["calibration"].filter(
        (pl.col("slice") == "compile_pass") & (pl.col("task") == "all")
    )
    assert got["recovery", "all"]["estimate"] == pytest.approx(calib["accuracy"][0], rel=1e-12)


def test_same_seed_same_bytes_and_recorded_default(tmp_path: Path) -> None:
    rows = synthetic_rows()
    first = analyze_rows(rows, seed0=SEED0)["bootstrap_ci"]
    second = analyze_rows(rows, seed0=SEED0)["bootstrap_ci"]
    assert set(first.get_column("replicates").to_list()) == {1000}
    write_tables({"bootstrap_ci": first}, tmp_path / "a")
    write_tables({"bootstrap_ci": second}, tmp_path / "b")
    for name in ("bootstrap_ci.csv", "bootstrap_ci.parquet"):
        a = (tmp_path / "a" / "tables" / name).read_bytes()
        assert a == (tmp_path / "b" / "tables" / name).read_bytes(), name
    readme = (tmp_path / "a" / "tables" / "README.md").read_text()
    assert "not documented" not in readme and "derive_seed(seed0" in readme
    other = analyze_rows(rows, seed0=SEED0 + 1)["bootstrap_ci"]
    assert other.get_column("ci_low").to_list() != first.get_column("ci_low").to_list()


def test_analyze_rows_cli_takes_seed0(tmp_path: Path) -> None:
    """`buildfind analyze --rows FILE --seed0 N` gives the intervals of seed0 N."""
    rows = synthetic_rows()
    path = tmp_path / "rows.parquet"
    rows.write_parquet(path)
    out = tmp_path / "out"
    args = ["buildfind", "analyze", "--rows", str(path), "--seed0", str(SEED0), "-o", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    got = pl.read_parquet(out / "tables" / "bootstrap_ci.parquet")
    want = analyze_rows(rows, seed0=SEED0)["bootstrap_ci"]
    assert got.equals(want)
    assert set(got["seed"]) == {derive_seed(SEED0, "bootstrap_ci")}
