"""One run, two readings (issue 39): a synthetic full grid (every finder on every builder, both
efforts, two build and two find trials, audit labels, one compile-failed artifact, controls)
analysed once. Pooled tables must read every pair and per-panel tables the matched pairs; each
number is checked against a computation written here in plain Python from the paper's
equations (Eq. 1 accuracy, Table 1, Eqs. 2-4 R_b, Eqs. 5-6 G_task, Eq. 7 AELS, Kendall tau-b,
Appendix K residuals)."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import subprocess
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from statistics import mean

import polars as pl
import pytest
import yaml

from metaeval.protocols.buildfind.analysis.pair_sets import ALL_PAIRS, PANEL_PAIRS, TABLE
from metaeval.protocols.buildfind.analysis.panels import panel_notes
from metaeval.protocols.buildfind.finalize import analyze_rows
from metaeval.protocols.buildfind.rows.table import conform

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["openai", "anthropic", "mimo"]
EFFORTS = ["high", "low"]
AGENTS = [(f"{fam}_{e}", fam, e) for fam in FAMILIES for e in EFFORTS]  # 6 builders = 6 finders
TASKS = ["t1", "t2"]
QUESTIONS = ["q1", "q2", "q3", "q4"]
R_BUILD, R_FIND = 2, 2
FAILED = (0, "t2", 1)  # (builder index, task, build trial) whose compile probe failed


def gold(b: int, t: int, bt: int, q: int) -> bool:
    """The audit label: a few questions are implemented-non-gold."""
    return (b * 5 + t * 3 + bt + q * 7) % 9 != 0


def correct(b: int, f: int, t: int, bt: int, rf: int, q: int) -> bool:
    return (b * 7 + f * 3 + t * 5 + bt * 2 + rf + q * 11) % 4 != 0


def run_bytes(b: int, f: int, t: int, bt: int, rf: int) -> tuple[int, int]:
    return 500 + ((b * 31 + f * 17 + t * 7 + bt * 3 + rf * 5) % 23) * 40, 20 + (b + f + rf) % 5


def _row(**values: object) -> dict[str, object]:
    return {
        "gold": "A",
        "input_tokens": 100,
        "output_tokens": 10,
        "builder_agent": "codex",
        "builder_model": "m",
        "finder_agent": "claude-code",
        "finder_model": "m",
        **values,
    }


def full_grid() -> pl.DataFrame:
    rows = []
    for b, (builder, b_family, b_effort) in enumerate(AGENTS):
        for f, (finder, f_family, f_effort) in enumerate(AGENTS):
            for t, task in enumerate(TASKS):
                for bt in range(R_BUILD):
                    for rf in range(R_FIND):
                        retrieval, calls = run_bytes(b, f, t, bt, rf)
                        for q, qid in enumerate(QUESTIONS):
                            ok = correct(b, f, t, bt, rf, q)
                            label = (
                                "implemented_gold" if gold(b, t, bt, q) else "implemented_non_gold"
                            )
                            rows.append(
                                _row(
                                    slice="formal",
                                    task=task,
                                    builder=builder,
                                    builder_family=b_family,
                                    finder=finder,
                                    finder_family=f_family,
                                    effort_panel=b_effort,
                                    finder_effort=f_effort,
                                    build_trial=bt,
                                    find_trial=rf,
                                    question_id=qid,
                                    answer="A" if ok else "B",
                                    correct=ok,
                                    compile_pass=(b, task, bt) != FAILED,
                                    label=label,
                                    label_source="consensus_prelabel",
                                    novel_retrieval_bytes=retrieval,
                                    novel_tool_call_bytes=calls,
                                )
                            )
    for control in ("question_only", "spec_only"):
        for f, (finder, f_family, f_effort) in enumerate(AGENTS):
            for t, task in enumerate(TASKS):
                for rf in range(R_FIND):
                    for q, qid in enumerate(QUESTIONS):
                        ok = q < 2 or (f + t + rf + q + len(control)) % 5 != 0  # q3, q4: low prior
                        rows.append(
                            _row(
                                slice=control,
                                task=task,
                                builder="",
                                builder_family="",
                                finder=finder,
                                finder_family=f_family,
                                effort_panel=f_effort,
                                finder_effort=f_effort,
                                build_trial=-1,
                                find_trial=rf,
                                question_id=qid,
                                answer="A" if ok else "B",
                                correct=ok,
                                compile_pass=None,
                                label="unlabeled",
                                label_source="none",
                                novel_retrieval_bytes=300,
                                novel_tool_call_bytes=5,
                            )
                        )
    return conform(pl.DataFrame(rows))


# --------------------------------------------------------------------------- by hand


def hand_runs(matched_only: bool) -> list[dict]:
    """Every formal compile-pass run with its Eq. 1 accuracy on the audited scoring set."""
    out = []
    for b, (_, _, b_effort) in enumerate(AGENTS):
        for f, (_, _, f_effort) in enumerate(AGENTS):
            if matched_only and b_effort != f_effort:
                continue
            for t, task in enumerate(TASKS):
                for bt in range(R_BUILD):
                    if (b, task, bt) == FAILED:
                        continue
                    for rf in range(R_FIND):
                        scored = [q for q in range(len(QUESTIONS)) if gold(b, t, bt, q)]
                        right = [q for q in scored if correct(b, f, t, bt, rf, q)]
                        out.append(
                            {
                                "b": b,
                                "f": f,
                                "t": t,
                                "bt": bt,
                                "panel": b_effort,
                                "acc": len(right) / len(scored),
                                "all_correct": len(right) == len(scored),
                                "bytes": sum(run_bytes(b, f, t, bt, rf)),
                            }
                        )
    return out


def hand_residuals(runs: list[dict], scope_of) -> dict[tuple[int, int], float]:
    """Appendix K: s(b,f) - builder mean - finder mean + grand mean, means inside a scope."""
    scores: dict[tuple[int, int], list[float]] = defaultdict(list)
    for r in runs:
        scores[r["b"], r["f"]].append(r["acc"])
    s = {k: mean(v) for k, v in scores.items()}
    out = {}
    for (b, f), value in s.items():
        scope = scope_of(b)
        cells = {k: v for k, v in s.items() if scope_of(k[0]) == scope}
        b_mean = mean(v for (b2, _), v in cells.items() if b2 == b)
        f_mean = mean(v for (_, f2), v in cells.items() if f2 == f)
        out[b, f] = value - b_mean - f_mean + mean(cells.values())
    return out


def hand_panel_metrics(runs: list[dict]) -> dict[str, dict]:
    """R_b (Eqs. 2-4), G_task (Eqs. 5-6) and AELS (Eq. 7) per (panel, builder) on matched pairs."""
    cost: dict[tuple, list[int]] = defaultdict(list)
    g: dict[tuple, list[float]] = defaultdict(list)
    for r in runs:
        key = (r["panel"], r["b"], r["f"], r["t"])
        g[key].append(r["acc"])
        if r["all_correct"]:
            cost[key].append(r["bytes"])
    c = {k: mean(v) for k, v in cost.items()}
    rb, gate, aels = {}, {}, {}
    for b, (name, _, panel) in enumerate(AGENTS):
        finders = [f for f, a in enumerate(AGENTS) if a[2] == panel]
        logs = []
        for f in finders:
            for t in range(len(TASKS)):
                if (panel, b, f, t) in c:
                    least = min(
                        v for (p, _, f2, t2), v in c.items() if (p, f2, t2) == (panel, f, t)
                    )
                    logs.append(math.log(c[panel, b, f, t] / least))
        r_b = math.exp(sum(logs) / len(logs)) if logs else None
        rb[name] = (r_b, len(logs), len(finders) * len(TASKS))
        cells = {k: mean(v) for k, v in g.items() if k[:2] == (panel, b)}
        for t, task in enumerate(TASKS):
            values = [v for k, v in cells.items() if k[3] == t]
            gate[name, task] = (mean(values) if values else None, len(values), len(finders))
        a = mean(cells.values())
        s = hand_stability(b, finders)
        cov = len(logs) / (len(finders) * len(TASKS))
        aels[name] = a * s * cov * r_b**-0.1 if r_b else 0.0
    return {"rb": rb, "gate": gate, "aels": aels}


def hand_stability(b: int, finders: list[int]) -> float:
    """S of Eq. 7: share of (artifact, finder, scored question) cells whose find trials are all
    correct, over the builder's compile-pass artifacts."""
    agree = []
    for f in finders:
        for t, task in enumerate(TASKS):
            for bt in range(R_BUILD):
                if (b, task, bt) == FAILED:
                    continue
                for q in range(len(QUESTIONS)):
                    if gold(b, t, bt, q):
                        agree.append(all(correct(b, f, t, bt, rf, q) for rf in range(R_FIND)))
    return mean(agree)


def hand_tau(runs: list[dict], panel: str, t: int, fa: int, fb: int) -> tuple[float | None, int]:
    """Kendall tau-b of two finders' all-correct total-byte costs over shared builders."""
    cost: dict[tuple[int, int], list[int]] = defaultdict(list)
    for r in runs:
        if r["panel"] == panel and r["t"] == t and r["all_correct"]:
            cost[r["f"], r["b"]].append(r["bytes"])
    x = {b: mean(v) for (f, b), v in cost.items() if f == fa}
    y = {b: mean(v) for (f, b), v in cost.items() if f == fb}
    shared = sorted(set(x) & set(y))
    if len(shared) < 2:
        return None, len(shared)
    s = n1 = n2 = 0
    pairs = list(combinations(shared, 2))
    for i, j in pairs:
        sx = (x[i] > x[j]) - (x[i] < x[j])
        sy = (y[i] > y[j]) - (y[i] < y[j])
        s += sx * sy
        n1 += sx == 0
        n2 += sy == 0
    n0 = len(pairs)
    denom = math.sqrt((n0 - n1) * (n0 - n2))
    return (s / denom if denom else None), len(shared)


# --------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def grid_tables() -> dict[str, pl.DataFrame]:
    return analyze_rows(full_grid(), find_pairs="all")


def test_pooled_tables_read_every_pair(grid_tables: dict[str, pl.DataFrame]) -> None:
    every = hand_runs(matched_only=False)
    passing_artifacts = len(AGENTS) * len(TASKS) * R_BUILD - 1
    assert len(every) == passing_artifacts * len(AGENTS) * R_FIND  # the full grid's Table 5
    cal = grid_tables["calibration"].filter(pl.col("task") == "all")
    row = cal.filter(pl.col("slice") == "compile_pass").row(0, named=True)
    assert row["builds"] == passing_artifacts
    assert row["finds"] == len(every)
    assert row["accuracy"] == pytest.approx(mean(r["acc"] for r in every), rel=1e-12)
    assert row["perfect"] == pytest.approx(mean(r["all_correct"] for r in every), rel=1e-12)
    present = cal.filter(pl.col("slice") == "artifact_present").row(0, named=True)
    assert present["finds"] == len(AGENTS) * len(TASKS) * R_BUILD * len(AGENTS) * R_FIND
    # Table 8: each finder read every compile-pass artifact, not only its own effort's
    calib = grid_tables["finder_calibration"]
    assert set(calib.get_column("formal_runs").to_list()) == {passing_artifacts * R_FIND}
    for f, (finder, _, _) in enumerate(AGENTS):
        want = [r for r in every if r["f"] == f]
        n = sum(
            len([q for q in range(len(QUESTIONS)) if gold(r["b"], r["t"], r["bt"], q)])
            for r in want
        )
        got = calib.filter(pl.col("finder") == finder).row(0, named=True)["formal_recovery"]
        pooled = (
            sum(
                r["acc"]
                * len([q for q in range(len(QUESTIONS)) if gold(r["b"], r["t"], r["bt"], q)])
                for r in want
            )
            / n
        )
        assert got == pytest.approx(pooled, rel=1e-12)
    # Table 17: every artifact-present find run of the finder
    tokens = grid_tables["token_usage"].filter(pl.col("role") == "finder_formal")
    assert set(tokens.get_column("runs").to_list()) == {len(AGENTS) * len(TASKS) * R_BUILD * R_FIND}
    # Figure 5: one matrix over all 36 pairs
    matrix = grid_tables["affinity_matrix"]
    assert matrix.height == len(AGENTS) ** 2
    want = hand_residuals(every, lambda b: "one matrix")
    names = [a[0] for a in AGENTS]
    for r in matrix.iter_rows(named=True):
        key = (names.index(r["builder"]), names.index(r["finder"]))
        assert r["residual"] == pytest.approx(want[key], abs=1e-12)


def test_per_panel_tables_read_matched_pairs(grid_tables: dict[str, pl.DataFrame]) -> None:
    matched = hand_runs(matched_only=True)
    want = hand_panel_metrics(matched)
    rb = grid_tables["rb_effort"].filter(pl.col("metric") == "total_bytes")
    assert rb.height == len(AGENTS)
    for r in rb.iter_rows(named=True):
        r_b, cells, total = want["rb"][r["builder"]]
        assert (r["cells"], r["total_cells"]) == (cells, total) == (r["cells"], 3 * len(TASKS))
        assert r["R_b"] == pytest.approx(r_b, rel=1e-12)
    gate = grid_tables["recovery_gate"]
    for r in gate.iter_rows(named=True):
        value, cells, total = want["gate"][r["builder"], r["task"]]
        assert (r["contributing_cells"], r["total_cells"]) == (cells, total) == (cells, 3)
        assert r["G_task"] == pytest.approx(value, rel=1e-12)
    for r in grid_tables["aels"].iter_rows(named=True):
        assert r["AELS"] == pytest.approx(want["aels"][r["builder"]], rel=1e-12)
    names = [a[0] for a in AGENTS]
    tau = grid_tables["kendall_tau"]
    assert tau.height == len(EFFORTS) * len(TASKS) * 3  # 3 finder pairs per panel and task
    for r in tau.iter_rows(named=True):
        fa, fb = names.index(r["finder_a"]), names.index(r["finder_b"])
        value, n = hand_tau(matched, r["effort_panel"], TASKS.index(r["task"]), fa, fb)
        assert r["n"] == n
        assert (r["tau"] is None) == (value is None)
        if value is not None:
            assert r["tau"] == pytest.approx(value, abs=1e-12)
    panel_of = {b: AGENTS[b][2] for b in range(len(AGENTS))}
    residuals = hand_residuals(matched, panel_of.__getitem__)
    aff = grid_tables["affinity"]
    assert aff.height == len(EFFORTS) * 3 * 3
    for r in aff.iter_rows(named=True):
        key = (names.index(r["builder"]), names.index(r["finder"]))
        assert r["residual"] == pytest.approx(residuals[key], abs=1e-12)


def test_table_pairs_names_each_tables_pair_set(grid_tables: dict[str, pl.DataFrame]) -> None:
    pairs = {r["table"]: r for r in grid_tables[TABLE].iter_rows(named=True)}
    for name in ("calibration", "repeatability", "coverage", "affinity_matrix", "token_usage"):
        assert pairs[name]["pairs"] == ALL_PAIRS and not pairs[name]["partial"]
        assert pairs[name]["effort_pairs"] == "high/high, high/low, low/high, low/low"
    for name in ("rb_effort", "recovery_gate", "aels", "kendall_tau", "affinity"):
        assert pairs[name]["pairs"] == PANEL_PAIRS
        assert pairs[name]["effort_pairs"] == "high/high, low/low"
    assert "effort_panels" not in pairs


def test_a_matched_only_run_keeps_the_panel_tables_and_says_its_pooled_tables_are_partial(
    grid_tables: dict[str, pl.DataFrame],
) -> None:
    rows = full_grid()
    formal = pl.col("slice") == "formal"
    matched_rows = rows.filter(~formal | (pl.col("effort_panel") == pl.col("finder_effort")))
    matched = analyze_rows(matched_rows, find_pairs="matched")
    for name in ("rb_effort", "cell_costs", "recovery_gate", "aels", "kendall_tau", "affinity"):
        assert matched[name].equals(grid_tables[name]), name
    cal = matched["calibration"].filter(
        (pl.col("slice") == "compile_pass") & (pl.col("task") == "all")
    )
    assert cal.row(0, named=True)["finds"] == len(hand_runs(matched_only=True))
    partial = matched[TABLE].filter(pl.col("table") == "calibration").row(0, named=True)
    assert partial["partial"] and "high/low, low/high" in partial["note"]
    assert "find_pairs: matched" in partial["note"]
    notes = panel_notes(matched["effort_panels"], matched[TABLE])
    assert any("pooled tables are partial" in n for n in notes)
    assert not grid_tables[TABLE].get_column("partial").any()


def test_the_legacy_reading_reads_every_table_on_the_panel_pairs() -> None:
    """Releases made before the split recompute as they were made: every table on matched
    pairs, no table_pairs."""
    rows = full_grid()
    legacy = analyze_rows(rows, reading="panel")
    assert TABLE not in legacy
    cal = legacy["calibration"].filter(
        (pl.col("slice") == "compile_pass") & (pl.col("task") == "all")
    )
    assert cal.row(0, named=True)["finds"] == len(hand_runs(matched_only=True))
    assert legacy["affinity_matrix"].height == len(EFFORTS) * 3 * 3


# --------------------------------------------------------------------------- end to end


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args], capture_output=True, text=True, timeout=900
    )


def test_a_full_grid_release_verifies_and_an_older_one_is_recomputed_its_way(tmp_path) -> None:
    """A real run of the reference agents at two efforts on the full grid: released and
    verified with both readings; the same release as metaeval wrote it before the split
    (every table on matched pairs, no table_pairs) verifies too, and a split release whose
    table_pairs was removed does not (it is then recomputed the old way)."""
    if importlib.util.find_spec("mlcroissant") is None:
        pytest.skip("mlcroissant is not installed (extra `release`)")
    from metaeval.protocols.buildfind.analysis.pair_sets import LEGACY
    from metaeval.protocols.buildfind.finalize import mark_self_labelled, self_labelled_finders
    from metaeval.protocols.buildfind.release.verify import recompute
    from metaeval.protocols.buildfind.release.write import checksums
    from metaeval.protocols.buildfind.report.claims import claims, with_row_counts
    from metaeval.protocols.buildfind.tables.write import csv_ready

    config = {
        "pack": str(ROOT / "examples" / "buildfind-pack"),
        "tasks": ["kvstore-wal"],
        "builders": [
            {"name": "doc_high", "agent": "reference:documented", "effort": "high"},
            {"name": "terse_low", "agent": "reference:terse", "effort": "low"},
        ],
        "finders": [
            {"name": "fa_high", "agent": "reference-finder", "effort": "high"},
            {"name": "fb_low", "agent": "reference-finder", "effort": "low"},
        ],
        "r_find": 1,
        "controls": ["question_only"],
        "base_finders": ["fa_high", "fb_low"],
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir, out = tmp_path / "run", tmp_path / "release"
    assert _cli("buildfind", "run", str(path), "-o", str(run_dir)).returncode == 0
    # trial seeds as the paper derives them (Algorithm 1, Appendix C): seed0 + r
    seed0 = json.loads((run_dir / "manifest.json").read_text())["config"]["seed0"]
    for kind, trial in (("builds", "build_trial"), ("finds", "find_trial")):
        records = [json.loads(x) for x in (run_dir / f"{kind}.jsonl").read_text().splitlines()]
        assert {r["seed"] - r[trial] for r in records} == {seed0}, kind
    made = _cli("buildfind", "release", str(run_dir), "-o", str(out))
    assert made.returncode == 0, made.stderr
    pairs = pl.read_parquet(out / "tables" / f"{TABLE}.parquet")
    calibration = pairs.filter(pl.col("table") == "calibration").row(0, named=True)
    assert calibration["effort_pairs"] == "high/high, high/low, low/high, low/low"
    readme = (out / "tables" / "README.md").read_text()
    assert "Pairs: pooled over every formal pair" in readme
    assert "Pairs: per panel" in readme
    verified = _cli("buildfind", "verify-release", str(out))
    assert verified.returncode == 0, verified.stdout + verified.stderr

    # a question's id planted in a released artifact: the recorded leakage scan no longer holds
    leaked = tmp_path / "leaked"
    shutil.copytree(out, leaked)
    qid = json.loads((leaked / "records" / "builds.jsonl").read_text().splitlines()[0])
    artifact = leaked / qid["artifact"]
    question = yaml.safe_load((leaked / "pack" / "kvstore-wal" / "questions.yaml").read_text())
    first = question["questions"][0]["id"]
    (artifact / f"{first}.md").write_text("see the question\n")
    (leaked / "SHA256SUMS").write_text(checksums(leaked))
    found = _cli("buildfind", "verify-release", str(leaked))
    assert found.returncode == 1
    assert f"leakage question_ids recorded [], the released artifact gives ['{first}']" in (
        found.stdout
    )

    # a find record whose seed was edited: its seed and option order no longer follow
    reseeded = tmp_path / "reseeded"
    shutil.copytree(out, reseeded)
    finds = reseeded / "records" / "finds.jsonl"
    lines = finds.read_text().splitlines()
    first_find = json.loads(lines[0])
    first_find["seed"] += 7
    finds.write_text("\n".join([json.dumps(first_find, sort_keys=True), *lines[1:]]) + "\n")
    (reseeded / "SHA256SUMS").write_text(checksums(reseeded))
    found = _cli("buildfind", "verify-release", str(reseeded))
    assert found.returncode == 1
    want = f"records/finds.jsonl record 1: seed {first_find['seed']}, the seed0+trial rule"
    assert want in found.stdout

    # the same release as written before the split
    older = tmp_path / "older"
    shutil.copytree(out, older)
    split, frames, _ = recompute(out)
    rows = frames["data/question_rows.parquet"]
    legacy = analyze_rows(
        rows,
        pl.read_parquet(out / "data" / "builds.parquet"),
        "matched",
        config["finders"],
        reading=LEGACY,
    )
    mark_self_labelled(legacy, self_labelled_finders(rows, config["base_finders"]))
    changed = [n for n in legacy if n in split and not legacy[n].equals(split[n])]
    assert "calibration" in changed and "rb_effort" not in changed
    for name in changed:
        legacy[name].write_parquet(older / "tables" / f"{name}.parquet")
        (older / "tables" / f"{name}.csv").write_text(csv_ready(legacy[name]).write_csv())
    for suffix in ("parquet", "csv"):
        (older / "tables" / f"{TABLE}.{suffix}").unlink()
    claim_list = with_row_counts(claims(legacy), frames)
    (older / "claims.json").write_text(json.dumps(claim_list, indent=2, sort_keys=True) + "\n")
    (older / "SHA256SUMS").write_text(checksums(older))
    verified = _cli("buildfind", "verify-release", str(older))
    assert verified.returncode == 0, verified.stdout + verified.stderr

    # a split release without its table_pairs is read the old way: its pooled tables differ
    stripped = tmp_path / "stripped"
    shutil.copytree(out, stripped)
    for suffix in ("parquet", "csv"):
        (stripped / "tables" / f"{TABLE}.{suffix}").unlink()
    (stripped / "SHA256SUMS").write_text(checksums(stripped))
    failed = _cli("buildfind", "verify-release", str(stripped))
    assert failed.returncode == 1
    assert "tables/calibration.parquet" in failed.stdout


def test_restricted_view_tables_read_the_full_views_pair_sets(
    grid_tables: dict[str, pl.DataFrame],
) -> None:
    """A view that kept every file (its rows equal the full view's) compares like with like:
    pooled accuracy and finder recovery over every pair, R_b and G_task per panel, so every
    lift against the full view is zero and the counts are the full grid's."""
    from metaeval.protocols.buildfind.views.evidence import view_tables

    rows = full_grid()
    view_rows = rows.filter(pl.col("slice") == "formal").with_columns(view=pl.lit("everything"))
    views = view_tables(rows, view_rows, grid_tables, "matched")
    accuracy = views["view_accuracy"].filter(
        (pl.col("slice") == "compile_pass") & (pl.col("task") == "all")
    )
    assert accuracy["finds"][0] == len(hand_runs(matched_only=False))
    assert accuracy["lift_vs_full_pp"][0] == pytest.approx(0.0, abs=1e-12)
    finder = views["view_finder"]
    assert (finder["recovery"] - finder["full_view_recovery"]).abs().max() < 1e-12
    rb = views["view_rb_effort"]
    assert rb.height == len(AGENTS)
    assert rb["cells"].to_list() == rb["full_view_cells"].to_list()
    gate = views["view_recovery_gate"]
    assert (gate["G_task"] - gate["full_view_G_task"]).abs().max() < 1e-12


def test_the_evidence_audit_rule_is_the_papers_and_recorded(
    grid_tables: dict[str, pl.DataFrame],
) -> None:
    """Appendix I: correct compile-pass answers (audited scoring set), strata task x builder
    family x finder family x prior status, two per stratum, seed 20260601; on this grid's
    2 tasks x 3 x 3 families the rule draws 2 x (strata), the paper's 72 with both statuses."""
    low = {
        (r["task"], r["question_id"])
        for r in grid_tables["question_agreement"].filter("low_prior").iter_rows(named=True)
    }
    population: dict[tuple, int] = defaultdict(int)
    for b, (_, b_family, _) in enumerate(AGENTS):
        for f, (_, f_family, _) in enumerate(AGENTS):
            for t, task in enumerate(TASKS):
                for bt in range(R_BUILD):
                    if (b, task, bt) == FAILED:
                        continue
                    for rf in range(R_FIND):
                        for q, qid in enumerate(QUESTIONS):
                            if gold(b, t, bt, q) and correct(b, f, t, bt, rf, q):
                                stratum = (task, b_family, f_family, (task, qid) in low)
                                population[stratum] += 1
    rule = grid_tables["evidence_audit_rule"].row(0, named=True)
    assert (rule["seed"], rule["per_stratum"]) == (20260601, 2)
    assert rule["population"] == sum(population.values())
    assert rule["strata"] == len(population)
    assert rule["rows"] == sum(min(n, 2) for n in population.values())
    assert rule["rows"] == grid_tables["evidence_audit_sample"].height
    statuses = {s[3] for s in population}
    assert rule["rows"] == 2 * len(TASKS) * 3 * 3 * len(statuses)  # 72 with both statuses
