"""Effort panels on a paper-shaped grid: 6 agents x 2 efforts as builders and finders, every
finder on every builder. R_b and C_b are computed here by hand from the paper's definitions
(Eqs. 2-4, Table 3's "(n/6)") with plain Python and compared with metaeval's tables."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from metaeval.protocols.buildfind.analysis.panels import OLD_ROWS_NOTE
from metaeval.protocols.buildfind.finalize import analyze_rows, analyze_rows_file
from metaeval.protocols.buildfind.rows.table import OPTIONAL, conform, read_rows

OLD_RECORDS = (
    Path(__file__).parent / "fixtures" / "old_format" / "buildfind" / "release" / "records"
)

AGENTS = ["claude", "codex", "gemini", "kimi", "glm", "mimo"]
EFFORTS = ["high", "low"]
TASKS = ["t1", "t2"]
QUESTIONS = ["q1", "q2", "q3"]
AGENTS_X_EFFORTS = [(f"{a}_{e}", e) for a in AGENTS for e in EFFORTS]


def _correct(b: int, f: int, t: int, q: int) -> bool:
    return (b * 7 + f * 3 + t * 5 + q) % 6 != 0


def _bytes(b: int, f: int, t: int) -> tuple[int, int]:
    return 800 + ((b * 37 + f * 11 + t * 5) % 17) * 100, 40 + (b * 13 + f) % 7


def paper_grid() -> pl.DataFrame:
    """Question rows: every finder on every builder's artifact of every task, one trial."""
    rows = []
    for bi, (builder, b_effort) in enumerate(AGENTS_X_EFFORTS):
        for fi, (finder, f_effort) in enumerate(AGENTS_X_EFFORTS):
            for ti, task in enumerate(TASKS):
                retrieval, calls = _bytes(bi, fi, ti)
                for qi, qid in enumerate(QUESTIONS):
                    ok = _correct(bi, fi, ti, qi)
                    rows.append(
                        {
                            "slice": "formal",
                            "task": task,
                            "builder": builder,
                            "builder_family": builder.split("_")[0],
                            "finder": finder,
                            "finder_family": finder.split("_")[0],
                            "effort_panel": b_effort,
                            "build_trial": 0,
                            "find_trial": 0,
                            "question_id": qid,
                            "gold": "A",
                            "answer": "A" if ok else "B",
                            "correct": ok,
                            "compile_pass": True,
                            "label": "unlabeled",
                            "label_source": "none",
                            "novel_retrieval_bytes": retrieval,
                            "novel_tool_call_bytes": calls,
                            "input_tokens": 100,
                            "output_tokens": 10,
                            "finder_effort": f_effort,
                            "builder_agent": "codex",
                            "builder_model": "m",
                            "finder_agent": "claude-code",
                            "finder_model": "m",
                        }
                    )
    return conform(pl.DataFrame(rows))


def hand_rb(builder_effort: str, finder_effort: str | None) -> dict[str, tuple[float | None, int]]:
    """Eqs. 2-4 by hand: builder -> (R_b, |C_b|) in the panel of (builder, finder) effort.

    finder_effort None pools every finder (the old, builder-only panels).
    c(b,f,t) = bytes of the all-correct run (one trial); r = c / min_b' c(b',f,t) over the
    panel's builders with an all-correct cell; R_b = geometric mean of r over C_b.
    """
    builders = [(i, n) for i, (n, e) in enumerate(AGENTS_X_EFFORTS) if e == builder_effort]
    finders = [i for i, (_, e) in enumerate(AGENTS_X_EFFORTS) if finder_effort in (None, e)]
    cost: dict[tuple[int, int, int], int] = {}
    for b, _ in builders:
        for f in finders:
            for t in range(len(TASKS)):
                if all(_correct(b, f, t, q) for q in range(len(QUESTIONS))):
                    cost[b, f, t] = sum(_bytes(b, f, t))
    out: dict[str, tuple[float | None, int]] = {}
    for b, name in builders:
        logs = []
        for f in finders:
            for t in range(len(TASKS)):
                if (b, f, t) in cost:
                    best = min(c for (b2, f2, t2), c in cost.items() if (f2, t2) == (f, t))
                    logs.append(math.log(cost[b, f, t] / best))
        out[name] = (math.exp(sum(logs) / len(logs)) if logs else None, len(logs))
    return out


def _rb(tables: dict[str, pl.DataFrame], panel: str) -> dict[str, tuple[float | None, int, int]]:
    rb = tables["rb_effort"].filter(
        (pl.col("metric") == "total_bytes") & (pl.col("effort_panel") == panel)
    )
    return {r["builder"]: (r["R_b"], r["cells"], r["total_cells"]) for r in rb.to_dicts()}


def _check(got: dict, want: dict, finders: int) -> None:
    assert set(got) == set(want)
    for builder, (rb, cells) in want.items():
        got_rb, got_cells, total = got[builder]
        assert got_cells == cells, builder
        assert total == finders * len(TASKS), builder
        assert (got_rb is None) == (rb is None)
        if rb is not None:
            assert got_rb == pytest.approx(rb, rel=1e-12), builder


def test_matched_panels_equal_the_hand_computation() -> None:
    tables = analyze_rows(paper_grid())
    for effort in EFFORTS:
        _check(_rb(tables, effort), hand_rb(effort, effort), finders=6)
    gate = tables["recovery_gate"]
    assert set(gate.get_column("total_cells").to_list()) == {6}  # Table 3's "(n/6)"
    assert set(gate.get_column("effort_panel").to_list()) == {"high", "low"}
    panels = tables["effort_panels"]
    analysed = panels.filter("analysed")
    assert sorted(zip(analysed["builder_effort"], analysed["finder_effort"], strict=True)) == [
        ("high", "high"),
        ("low", "low"),
    ]
    assert panels.filter(~pl.col("analysed")).height == 2
    # panel-local extras follow the panels: no low finder in a high panel
    aff = tables["affinity"]
    high = aff.filter(pl.col("effort_panel") == "high")
    assert high.height and all(f.endswith("_high") for f in high["finder"])
    tau = tables["kendall_tau"].filter(pl.col("effort_panel") == "low")
    assert tau.height and all(
        a.endswith("_low") and b.endswith("_low")
        for a, b in zip(tau["finder_a"], tau["finder_b"], strict=True)
    )
    assert set(tables["aels"].get_column("effort_panel").to_list()) == {"high", "low"}


def test_cross_panels_give_the_full_grid_with_their_own_numbers() -> None:
    rows = paper_grid()
    matched = analyze_rows(rows)
    cross = analyze_rows(rows, panels="cross")
    names = set(cross["rb_effort"].get_column("effort_panel").to_list())
    assert names == {"high/high", "high/low", "low/high", "low/low"}
    for b_effort in EFFORTS:
        for f_effort in EFFORTS:
            want = hand_rb(b_effort, f_effort)
            _check(_rb(cross, f"{b_effort}/{f_effort}"), want, finders=6)
    # the diagonal equals the matched panels; the off-diagonal numbers differ from them
    assert _rb(cross, "high/high") == _rb(matched, "high")
    assert _rb(cross, "high/low") != _rb(matched, "high")
    assert cross["effort_panels"].get_column("analysed").all()


def test_old_rows_follow_the_builder_effort_and_say_so(tmp_path: Path) -> None:
    old = paper_grid().drop(*OPTIONAL)
    path = tmp_path / "old_rows.csv"
    old.write_csv(path)
    rows = read_rows(path)  # the optional metadata columns read as null
    assert rows.get_column("finder_effort").is_null().all()
    tables = analyze_rows(rows)
    for effort in EFFORTS:
        _check(_rb(tables, effort), hand_rb(effort, None), finders=12)
    notes = tables["effort_panels"].get_column("note").to_list()
    assert notes == [OLD_ROWS_NOTE, OLD_ROWS_NOTE]
    # the pooled numbers are not the paper's: some builder's R_b or C_b moves
    assert any(hand_rb(e, None)[b] != hand_rb(e, e)[b] for e in EFFORTS for b in hand_rb(e, e))
    out = tmp_path / "analysis"
    analyze_rows_file(path, out)
    assert OLD_ROWS_NOTE in (out / "tables" / "README.md").read_text(encoding="utf-8")


def test_rows_say_which_agent_model_and_effort_produced_them() -> None:
    from metaeval.protocols.buildfind.rows.extract import rows_from_finds

    config = {
        "builders": [{"name": "b", "agent": "codex", "model": "gpt-5.5", "effort": "high"}],
        "finders": [{"name": "f", "agent": "claude-code", "model": "glm-5", "effort": "low"}],
    }
    # a find record as the old code wrote it, with one answer, keyed as each cell
    written = (OLD_RECORDS / "finds.jsonl").read_text(encoding="utf-8").splitlines()[0]
    record = json.loads(written) | {"status": "ok", "answers_status": "ok"}
    record["answers"] = {"q1": record["answers"]["q01"] | {"gold": "A", "answer": "A"}}
    finds = {
        ("formal", "t1", "b", 0, "f", 0): record | {"compile_pass": True},
        ("question_only", "t1", "", -1, "f", 0): record | {"compile_pass": None},
    }
    build = json.loads((OLD_RECORDS / "builds.jsonl").read_text(encoding="utf-8").splitlines()[0])
    rows = rows_from_finds(config, {("t1", "b", 0): build}, finds)
    formal, control = (
        rows.filter(pl.col("slice") == "formal"),
        rows.filter(pl.col("slice") == "question_only"),
    )
    assert formal.select(
        "effort_panel", "finder_effort", "builder_agent", "builder_model", "finder_agent"
    ).row(0) == ("high", "low", "codex", "gpt-5.5", "claude-code")
    assert control.select("effort_panel", "finder_effort", "builder_agent").row(0) == (
        "low",
        "low",
        None,
    )
    # a low finder on a high builder: outside the matched panels, its own panel in cross mode
    assert analyze_rows(rows)["effort_panels"].select("analysed", "note").row(0)[0] is False
    cross = analyze_rows(rows, panels="cross")["effort_panels"]
    assert cross.get_column("effort_panel").to_list() == ["high/low"]


def test_find_pairs_matched_runs_only_same_effort_pairs_end_to_end(tmp_path: Path) -> None:
    """A real run of the reference agents: high and low builders and finders; with
    `find_pairs: matched` each finder reads only builders of its effort, the records and rows
    say which effort produced them, and `analyze --panels` on the CLI follows the option."""
    import json
    import subprocess
    import sys

    import yaml

    root = Path(__file__).resolve().parents[1]
    config = {
        "pack": str(root / "examples" / "buildfind-pack"),
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
        "find_pairs": "matched",
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "run"
    cli = [sys.executable, "-m", "metaeval.cli", "buildfind"]
    done = subprocess.run(
        [*cli, "run", str(path), "-o", str(run_dir)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    finds = [json.loads(x) for x in (run_dir / "finds.jsonl").read_text().splitlines() if x]
    formal = sorted((r["builder"], r["finder"]) for r in finds if r["slice"] == "formal")
    assert formal == [("doc_high", "fa_high"), ("terse_low", "fb_low")]
    assert {r["effort"] for r in finds} == {"high", "low"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["find_pairs"] == "matched"
    assert manifest["config"]["finders"][0]["effort"] == "high"
    rows = read_rows(run_dir / "question_rows.parquet")
    pairs = (
        rows.filter(pl.col("slice") == "formal").select("effort_panel", "finder_effort").unique()
    )
    assert sorted(pairs.rows()) == [("high", "high"), ("low", "low")]
    bad = subprocess.run(
        [*cli, "analyze", str(run_dir), "--panels", "diagonal"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert bad.returncode == 2 and "panels" in bad.stderr and "diagonal" in bad.stderr
    out = tmp_path / "cross"
    ok = subprocess.run(
        [*cli, "analyze", str(run_dir), "--panels", "cross", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ok.returncode == 0, ok.stderr
    panels = pl.read_parquet(out / "tables" / "effort_panels.parquet")
    assert sorted(panels.get_column("effort_panel").to_list()) == ["high/high", "low/low"]


def test_unconfigured_finder_effort_joins_the_builder_panel_and_left_out_pairs_are_named(
    tmp_path: Path,
) -> None:
    from metaeval.protocols.buildfind.analysis.panels import DEFAULT_NOTE, panel_notes

    rows = paper_grid().with_columns(finder_effort=pl.lit("default"))
    tables = analyze_rows(rows)
    for effort in EFFORTS:  # every finder counts in the builder's panel, as before
        _check(_rb(tables, effort), hand_rb(effort, None), finders=12)
    assert set(tables["effort_panels"].get_column("note").to_list()) == {DEFAULT_NOTE}
    grid = analyze_rows(paper_grid())
    notes = panel_notes(grid["effort_panels"], grid["table_pairs"])
    assert notes == [
        "matched panels leave out 2 builder/finder effort pair(s) (high/low, low/high) of the "
        "per-panel tables; the pooled tables read them; `--panels cross` analyses them per panel"
    ]
    path = tmp_path / "rows.parquet"
    paper_grid().write_parquet(path)
    analyze_rows_file(path, tmp_path / "out")
    assert "high/low, low/high" in (tmp_path / "out" / "tables" / "README.md").read_text()
