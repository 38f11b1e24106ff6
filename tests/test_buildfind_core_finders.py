"""The core-finder selector (paper Appendix E) on calibration tables built to pass or fail each
gate: the paper's own Table 8 figures select the two Sonnet finders and record
MiMo-v2.5-pro-low as the prior-stress audit finder, as Appendix E reports."""

from __future__ import annotations

import polars as pl

from metaeval.protocols.buildfind.analysis.core_finders import (
    CORE,
    GATES,
    PRIOR_STRESS,
    core_finders_from,
)

# Table 8: finder, formal %, Q-only lift, low-prior lift, impl.-signal lift, mean tokens (k)
TABLE8 = [
    ("opus-high", "anthropic", 99.8, -0.2, -0.5, -0.2, 889),
    ("opus-low", "anthropic", 99.7, -0.3, -0.7, -0.4, 470),
    ("sonnet-high", "anthropic", 99.6, 4.1, 12.1, 6.1, 133),
    ("sonnet-low", "anthropic", 99.5, 1.7, 5.1, 2.6, 116),
    ("gpt55-low", "openai", 99.4, -0.6, -0.3, -0.2, 390),
    ("gpt55-high", "openai", 99.2, -0.8, -0.3, -0.2, 547),
    ("mimo-high", "mimo", 99.0, 5.7, 18.0, 8.8, 404),
    ("mimo-low", "mimo", 98.8, 3.3, 10.4, 5.3, 397),
    ("mimo-pro-low", "mimo", 98.8, 34.3, 39.8, 38.3, 409),
    ("mimo-pro-high", "mimo", 98.7, 8.7, 26.9, 11.7, 413),
    ("gpt54mini-low", "openai", 97.4, -0.4, 1.1, 0.1, 331),
    ("gpt54mini-high", "openai", 97.2, -2.8, -3.7, -2.5, 639),
]


def calibration(rows=TABLE8) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "finder": f,
                "finder_family": fam,
                "formal_runs": 144,
                "formal_recovery": formal / 100,
                "qonly_lift_pp": q,
                "low_prior_lift_pp": lp,
                "impl_signal_lift_pp": impl,
                "mean_tokens_per_run": tokens * 1000.0,
            }
            for f, fam, formal, q, lp, impl, tokens in rows
        ]
    )


def kendall(taus: dict[str, float | None]) -> pl.DataFrame:
    """Each finder paired once with a reference finder, with the given tau."""
    return pl.DataFrame(
        [{"finder_a": f, "finder_b": "~ref", "tau": t} for f, t in taus.items()],
        schema={"finder_a": pl.String, "finder_b": pl.String, "tau": pl.Float64},
    )


def matrix(own: dict[str, float]) -> pl.DataFrame:
    """One own-family cell per finder with the given residual (cross-family cells ignored)."""
    fams = {f: fam for f, fam, *_ in TABLE8}
    rows = [
        {"finder": f, "builder_family": fams[f], "finder_family": fams[f], "residual": r}
        for f, r in own.items()
    ]
    rows.append(
        {
            "finder": "opus-high",
            "builder_family": "openai",
            "finder_family": "anthropic",
            "residual": 0.9,
        }
    )
    return pl.DataFrame(rows)


def test_table8_selects_the_papers_routine_panel() -> None:
    stable = {f: 0.4 for f, *_ in TABLE8}
    out = core_finders_from(calibration(), kendall(stable), matrix({f: 0.01 for f in stable}))
    roles = dict(out.select("finder", "role").iter_rows())
    assert sorted(f for f, r in roles.items() if r == CORE) == ["sonnet-high", "sonnet-low"]
    assert [f for f, r in roles.items() if r == PRIOR_STRESS] == ["mimo-pro-low"]
    row = out.filter(pl.col("finder") == "opus-high").row(0, named=True)
    assert row["recovery_ok"] and not row["qonly_lift_ok"]  # saturated question-only control
    # cost ceiling: half the median of the twelve mean token counts
    tokens = sorted(t * 1000.0 for *_, t in TABLE8)
    assert out.get_column("cost_ceiling")[0] == (tokens[5] + tokens[6]) / 2 / 2


def test_each_gate_can_fail_a_finder_that_passes_the_others() -> None:
    stable = {f: 0.4 for f, *_ in TABLE8}
    own = {f: 0.01 for f in stable}
    unstable = core_finders_from(
        calibration(), kendall({**stable, "sonnet-low": -0.5}), matrix(own)
    )
    row = unstable.filter(pl.col("finder") == "sonnet-low").row(0, named=True)
    assert not row["rank_ok"] and not row["selected"] and row["mean_tau"] == -0.5
    unmeasured = core_finders_from(
        calibration(), kendall({**stable, "sonnet-low": None}), matrix(own)
    )
    assert not unmeasured.filter(pl.col("finder") == "sonnet-low")["rank_ok"][0]
    biased = core_finders_from(calibration(), kendall(stable), matrix({**own, "sonnet-high": 0.08}))
    row = biased.filter(pl.col("finder") == "sonnet-high").row(0, named=True)
    assert not row["affinity_ok"] and row["role"] is None
    weak = [(*r[:2], 90.0, *r[3:]) if r[0] == "sonnet-high" else r for r in TABLE8]
    low = core_finders_from(calibration(weak), kendall(stable), matrix(own))
    row = low.filter(pl.col("finder") == "sonnet-high").row(0, named=True)
    assert [g for g in GATES if not row[g]] == ["recovery_ok"]
