"""The cost of reading one full grid two ways (issue 39): `run_analysis` on the paper-sized
grid (2 tasks x 12 builders x 2 build trials, every one of 12 finders on every artifact,
3 find trials, 15 questions: 25,920 formal rows plus both controls), once with the split
reading (pooled tables on every pair, per-panel tables on matched pairs) and once with the
legacy one (every table on matched pairs). Prints seconds per reading and their ratio.

Usage: python bench/buildfind_two_readings.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import polars as pl

from metaeval.protocols.buildfind.analysis.pair_sets import LEGACY, SPLIT
from metaeval.protocols.buildfind.analysis.suite import run_analysis
from metaeval.protocols.buildfind.rows.table import conform

MODELS = ("gpt5_5", "gpt5_4_mini", "opus_4_7", "sonnet_4_6", "mimo_v2_5_pro", "mimo_v2_5")
AGENTS = [(f"{m}_{e}", m.split("_")[0], e) for m in MODELS for e in ("high", "low")]
TASKS, BUILD_TRIALS, FIND_TRIALS, QUESTIONS = ("minidb", "nanoweb"), 2, 3, 15


def grid() -> pl.DataFrame:
    rows = []
    for b, (builder, b_family, b_effort) in enumerate(AGENTS):
        for f, (finder, f_family, f_effort) in enumerate(AGENTS):
            for t, task in enumerate(TASKS):
                for bt in range(BUILD_TRIALS):
                    for rf in range(FIND_TRIALS):
                        run_bytes = 1000 + (b * 37 + f * 11 + t * 5 + bt * 3 + rf) % 50 * 100
                        for q in range(QUESTIONS):
                            ok = (b * 7 + f * 3 + t + bt + rf + q) % 23 != 0
                            rows.append(_row("formal", task, builder, b_family, b_effort, bt))
                            rows[-1] |= _answer(finder, f_family, f_effort, rf, q, ok, run_bytes)
    for control in ("question_only", "spec_only"):
        for f, (finder, f_family, f_effort) in enumerate(AGENTS):
            for task in TASKS:
                for rf in range(FIND_TRIALS):
                    for q in range(QUESTIONS):
                        rows.append(_row(control, task, "", "", f_effort, -1))
                        rows[-1] |= _answer(
                            finder, f_family, f_effort, rf, q, (f + q) % 7 != 0, 300
                        )
    return conform(pl.DataFrame(rows))


def _row(slice_: str, task: str, builder: str, family: str, effort: str, bt: int) -> dict:
    formal = slice_ == "formal"
    return {
        "slice": slice_,
        "task": task,
        "builder": builder,
        "builder_family": family,
        "effort_panel": effort,
        "build_trial": bt,
        "compile_pass": True if formal else None,
        "label": "implemented_gold" if formal else "unlabeled",
        "label_source": "consensus_prelabel" if formal else "none",
        "gold": "A",
    }


def _answer(finder: str, family: str, effort: str, rf: int, q: int, ok: bool, size: int) -> dict:
    return {
        "finder": finder,
        "finder_family": family,
        "finder_effort": effort,
        "find_trial": rf,
        "question_id": f"q{q:02d}",
        "answer": "A" if ok else "B",
        "correct": ok,
        "novel_retrieval_bytes": size,
        "novel_tool_call_bytes": 40,
        "input_tokens": 1000,
        "output_tokens": 100,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = grid()
    print(f"rows: {rows.height}")
    best = {}
    for reading in (LEGACY, SPLIT):
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            run_analysis(rows, reading=reading)
            times.append(time.perf_counter() - start)
        best[reading] = min(times)
        print(f"{reading} reading: {best[reading]:.2f} s (best of {args.repeat})")
    print(f"split / legacy: {best[SPLIT] / best[LEGACY]:.2f}x")


if __name__ == "__main__":
    main()
