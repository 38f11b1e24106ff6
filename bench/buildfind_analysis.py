"""Build-and-find analysis at scale: every core metric on a synthetic 10M-row question table.

Generates a realistic question-rows table directly as columns (numpy + polars, no Python loop
over rows): 2 effort panels x 6 builders x 6 finders, 3 build trials x 5 find trials, 15
questions per task, with as many tasks as needed to reach --rows (plus question-only and
spec-only controls). String columns are `Enum` (a few bytes per row instead of a string each);
pass --dtype string for the canonical `String` schema.

It then times (1) `analyze`, which computes every table from two shared aggregations, and
(2) each public metric function called on its own (`run_accuracy`, `calibration`,
`repeatability`, `recovery_gate`, `cell_costs` and `rb_effort` for the three metrics, `aels`,
`coverage`), and prints elapsed seconds for generation and analysis separately and the peak
resident memory (ru_maxrss, MB) after each phase. ru_maxrss is the process peak, so it includes
the generated table itself.

Usage: python bench/buildfind_analysis.py [--rows 10000000] [--dtype enum|string] [--seed 0]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np
import polars as pl

from metaeval.protocols.buildfind.analysis.accuracy import recovery_gate, run_accuracy
from metaeval.protocols.buildfind.analysis.calibration import calibration, repeatability
from metaeval.protocols.buildfind.analysis.core import METRICS
from metaeval.protocols.buildfind.analysis.coverage import coverage
from metaeval.protocols.buildfind.analysis.effort import aels, cell_costs, rb_effort
from metaeval.protocols.buildfind.analysis.suite import analyze
from metaeval.protocols.buildfind.rows.table import COLUMNS, LABEL_SOURCES, LABELS, SLICES

PANELS = ("high", "low")
MODELS = ("gpt5_5", "gpt5_4_mini", "opus_4_7", "sonnet_4_6", "mimo_v2_5_pro", "mimo_v2_5")
FAMILIES = ("openai", "openai", "anthropic", "anthropic", "mimo", "mimo")
BUILD_TRIALS, FIND_TRIALS, QUESTIONS = 3, 5, 15


def peak_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def enum(codes: np.ndarray, categories: list[str]) -> pl.Series:
    return pl.Series(codes.astype(np.uint32)).cat.to(pl.Enum(categories))


def unravel(shape: tuple[int, ...]) -> list[np.ndarray]:
    """Row-major coordinates of every cell of `shape` as int32 arrays (last axis fastest)."""
    index = np.arange(int(np.prod(shape)), dtype=np.int32)
    coords = []
    for size in reversed(shape):
        coords.append(index % size)
        index //= size
    return coords[::-1]


def generate_enum(n_rows: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    agents = [f"{m}_{p}" for p in PANELS for m in MODELS]  # index = panel * 6 + model
    n_models = len(MODELS)
    formal_per_task = len(PANELS) * n_models * n_models * BUILD_TRIALS * FIND_TRIALS * QUESTIONS
    control_per_task = 2 * len(PANELS) * n_models * FIND_TRIALS * QUESTIONS
    n_tasks = max(1, round(n_rows / (formal_per_task + control_per_task)))
    tasks = [f"task_{i:04d}" for i in range(n_tasks)]

    # formal rows: (task, panel, builder model, build trial, finder model, find trial, question)
    formal_shape = (n_tasks, len(PANELS), n_models, BUILD_TRIALS, n_models, FIND_TRIALS, QUESTIONS)
    # controls: (task, slice, panel, finder model, find trial, question)
    control_shape = (n_tasks, 2, len(PANELS), n_models, FIND_TRIALS, QUESTIONS)
    t, p, bm, bt, fm, ft, q = unravel(formal_shape)
    ct, cs, cp, cfm, cft, cq = unravel(control_shape)
    n_formal, n_control = t.size, ct.size

    task = np.concatenate([t, ct])
    panel = np.concatenate([p, cp])
    slice_ = np.concatenate([np.zeros(n_formal, np.int32), cs + 1])
    builder = np.concatenate([p * n_models + bm + 1, np.zeros(n_control, np.int32)])  # 0 = ""
    finder = np.concatenate([p * n_models + fm, cp * n_models + cfm])
    build_trial = np.concatenate([bt, np.full(n_control, -1, np.int32)])
    find_trial = np.concatenate([ft, cft])
    question = np.concatenate([q, cq])
    del t, p, bm, bt, fm, ft, q, ct, cs, cp, cfm, cft, cq
    formal = slice_ == 0

    # artifact-level draws: compile pass (85%), 2% of artifacts still unlabeled
    artifact = (task * len(agents) + (builder - 1)) * BUILD_TRIALS + build_trial
    artifact[~formal] = 0
    n_artifacts = n_tasks * len(agents) * BUILD_TRIALS
    passes = rng.random(n_artifacts) < 0.85
    unlabeled_artifact = rng.random(n_artifacts) < 0.02
    # pair labels: 95% implemented_gold, 3% non-gold, 2% ambiguous
    pair_label = rng.choice(3, size=(n_artifacts, QUESTIONS), p=[0.95, 0.03, 0.02])
    label = np.where(unlabeled_artifact[:, None], 3, pair_label)[artifact, question]
    label = np.where(formal, label, 3).astype(np.uint8)
    label_source = np.where(label == 3, 2, (rng.random(label.size) < 0.04).astype(np.uint8))
    compile_pass = pl.Series(passes[artifact]).set(pl.Series(~formal), None)

    # answers: gold per (task, question); correct with slice-dependent rate, 1% unanswered
    gold = rng.integers(0, 4, size=(n_tasks, QUESTIONS), dtype=np.uint8)[task, question]
    rate = np.array([0.985, 0.945, 0.999])[slice_]
    correct = rng.random(task.size) < rate
    wrong = (gold + rng.integers(1, 4, size=task.size, dtype=np.uint8)) % 4
    answer = np.where(correct, gold, wrong)
    unanswered = ~correct & (rng.random(task.size) < 0.2)
    correct_series = pl.Series(correct)
    answer_series = enum(answer, ["A", "B", "C", "D"]).set(pl.Series(unanswered), None)

    # run-level effort, constant across the run's questions; 0.5% of runs read nothing
    run = np.arange(task.size) // QUESTIONS  # rows are generated question-innermost
    n_runs = task.size // QUESTIONS
    retrieval = (rng.lognormal(11, 0.8, n_runs) * (rng.random(n_runs) > 0.005)).astype(np.int64)
    tool_call = rng.lognormal(7, 0.6, n_runs).astype(np.int64)
    in_tokens = (retrieval / 3 + rng.integers(20_000, 60_000, n_runs)).astype(np.int64)
    out_tokens = rng.integers(500, 5_000, n_runs, dtype=np.int64)

    family = {"openai": 0, "anthropic": 1, "mimo": 2}
    agent_family = np.array([family[f] for f in FAMILIES] * len(PANELS))
    families = list(family)
    columns = {
        "slice": enum(slice_, list(SLICES)),
        "task": enum(task, tasks),
        "builder": enum(builder, ["", *agents]),
        "builder_family": enum(
            np.where(builder > 0, agent_family[np.maximum(builder - 1, 0)] + 1, 0),
            ["", *families],
        ),
        "finder": enum(finder, agents),
        "finder_family": enum(agent_family[finder], families),
        "effort_panel": enum(panel, list(PANELS)),
        "build_trial": pl.Series(build_trial),
        "find_trial": pl.Series(find_trial),
        "question_id": enum(question, [f"q{i:02d}" for i in range(QUESTIONS)]),
        "gold": enum(gold, ["A", "B", "C", "D"]),
        "answer": answer_series,
        "correct": correct_series,
        "compile_pass": compile_pass,
        "label": enum(label, list(LABELS)),
        "label_source": enum(label_source, list(LABEL_SOURCES)),
        "novel_retrieval_bytes": pl.Series(retrieval[run]),
        "novel_tool_call_bytes": pl.Series(tool_call[run]),
        "input_tokens": pl.Series(in_tokens[run]),
        "output_tokens": pl.Series(out_tokens[run]),
        # matched panels: a finder runs at its panel's effort; agents named like the builders
        "finder_effort": enum(panel, list(PANELS)),
        "builder_agent": enum(builder, ["", *agents]).set(pl.Series(builder == 0), None),
        "builder_model": pl.repeat(None, task.size, dtype=pl.String, eager=True),
        "finder_agent": enum(finder, agents),
        "finder_model": pl.repeat(None, task.size, dtype=pl.String, eager=True),
    }
    return pl.DataFrame({name: columns[name].alias(name) for name in COLUMNS})


def generate(n_rows: int, seed: int, dtype: str) -> pl.DataFrame:
    """The synthetic table; for dtype "string" (the canonical schema) the Enum columns are cast
    once the numpy scratch arrays of the generation are freed."""
    rows = generate_enum(n_rows, seed)
    if dtype == "string":
        rows = rows.with_columns(pl.col(pl.Enum).cast(pl.String))
    return rows


def timed(label: str, fn):
    started = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - started
    print(f"  {label:<34} {elapsed:7.2f} s   peak {peak_mb():7.0f} MB")
    return result, elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--dtype", choices=("enum", "string"), default="enum")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-individual", action="store_true")
    args = parser.parse_args()

    print(f"polars {pl.__version__}, threads {pl.thread_pool_size()}")
    rows, gen_s = timed("generate", lambda: generate(args.rows, args.seed, args.dtype))
    n_tasks = rows.height // (
        len(PANELS) * len(MODELS) * QUESTIONS * FIND_TRIALS * (len(MODELS) * BUILD_TRIALS + 2)
    )
    print(
        f"rows {rows.height:,} ({rows.estimated_size('mb'):.0f} MB in memory, {args.dtype}), "
        f"runs {rows.height // QUESTIONS:,} ({QUESTIONS} questions each), tasks {n_tasks:,}"
    )
    gen_peak = peak_mb()

    print("analyze (all tables, shared aggregations):")
    tables, analyze_s = timed("analyze", lambda: analyze(rows))
    analyze_peak = peak_mb()
    for name, table in tables.items():
        print(f"    {name:<16} {table.height:>9,} rows")

    print("run_analysis (every table of a run: core plus Kendall tau, affinity, subsets, ...):")
    from metaeval.protocols.buildfind.analysis.suite import run_analysis

    full_tables, full_s = timed("run_analysis", lambda: run_analysis(rows))
    full_peak = peak_mb()
    print(f"    {len(full_tables)} tables")

    individual_s = 0.0
    if not args.skip_individual:
        print("each public function on its own:")
        calls = [
            ("run_accuracy", lambda: run_accuracy(rows)),
            ("calibration", lambda: calibration(rows)),
            ("repeatability", lambda: repeatability(rows)),
            ("recovery_gate", lambda: recovery_gate(rows)),
            *[(f"cell_costs[{m}]", lambda m=m: cell_costs(rows, m)) for m in METRICS],
            *[(f"rb_effort[{m}]", lambda m=m: rb_effort(rows, m)) for m in METRICS],
            ("aels", lambda: aels(rows)),
            ("coverage", lambda: coverage(rows)),
        ]
        for name, call in calls:
            result, elapsed = timed(name, call)
            individual_s += elapsed
            want = tables[name.split("[")[0]]
            if "[" in name:
                want = want.filter(pl.col("metric") == name.split("[")[1].rstrip("]"))
            assert result.equals(want), f"{name} differs from analyze()"

    print()
    print(f"generation: {gen_s:.2f} s (peak after generation {gen_peak:.0f} MB)")
    print(f"analysis via analyze(): {analyze_s:.2f} s (peak {analyze_peak:.0f} MB)")
    print(f"full analysis via run_analysis(): {full_s:.2f} s (peak {full_peak:.0f} MB)")
    if not args.skip_individual:
        print(f"analysis via every public function separately: {individual_s:.2f} s")
    print(f"peak resident memory (ru_maxrss, includes the generated table): {peak_mb():.0f} MB")


if __name__ == "__main__":
    main()
