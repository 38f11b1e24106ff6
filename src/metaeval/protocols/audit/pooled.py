"""The paper's ensemble rule: pool every model's findings, count agreeing models per gold issue.

BenchGuard (Table 3, Appendix G) pools the findings of all models *without merging* them and
counts a gold issue for the rule "≥k" when at least k models each have an aligned finding for
it (Recall_A), or each an aligned or partial one (Recall_A+P); the union is k = 1. This module
derives those rows from the per-model rows of a `ScoreReport` (so every pair is judged once):

- recall: per gold issue, the number of model rows whose best verdict is ALIGNED (exact) or
  ALIGNED/PARTIAL (with partials), compared with k;
- Find., findings, suppressed and cost: the sums over the models (the pooled findings are all
  of them; the paper's ensemble cost is the sum of the models' costs, unknown when one is);
- precision of the union: the pooled findings on defective tasks that are aligned (or partial)
  with a gold issue, over all of them. For k ≥ 2 the paper gives no precision (the rule selects
  gold issues, not findings), so it is n/a here too.

The merged rows ("merged any", "merged >=k") are another reading, kept beside these: findings
of several models that cite the same evidence merged into one first, then voted on.
"""

from __future__ import annotations

from collections.abc import Iterable

from metaeval.protocols.audit.score_report import RowScore, ScoreReport, ratio

POOLED_PREFIX = "pooled"


def pooled_name(k: int) -> str:
    return f"{POOLED_PREFIX} union" if k == 1 else f"{POOLED_PREFIX} >={k}"


def _sum_costs(rows: list[RowScore]) -> float | None:
    costs = [r.cost_usd for r in rows]
    return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)


def add_pooled_rows(report: ScoreReport, models: list[str], ks: Iterable[int] = (1, 2, 3)) -> None:
    """Append the pooled rows for `models` (row names of single models) to `report`, with their
    per-issue marks and per-category recall. Rules with k above the number of models are left
    out; nothing is added for fewer than two models."""
    model_rows = [report.row(m) for m in models]
    if len(model_rows) < 2:
        return
    report.pooled_models = list(models)
    for k in ks:
        if k > len(model_rows):
            continue
        name = pooled_name(k)
        recalled_a = recalled_ap = 0
        for detail in report.issues:
            labels = [detail.best.get(m) for m in models]
            exact = sum(1 for label in labels if label == "ALIGNED")
            loose = sum(1 for label in labels if label in ("ALIGNED", "PARTIAL"))
            mark = "ALIGNED" if exact >= k else "PARTIAL" if loose >= k else None
            detail.best[name] = mark  # type: ignore[assignment]
            recalled_a += exact >= k
            recalled_ap += loose >= k
        defective = sum(r.n_findings_defective for r in model_rows)
        precise_a = sum(r.precise_a for r in model_rows) if k == 1 else 0
        precise_ap = sum(r.precise_ap for r in model_rows) if k == 1 else 0
        report.rows.append(
            RowScore(
                name=name,
                kind="pooled",
                n_gold=report.n_gold,
                recalled_a=recalled_a,
                recalled_ap=recalled_ap,
                recall_a=ratio(recalled_a, report.n_gold),
                recall_ap=ratio(recalled_ap, report.n_gold),
                n_findings_defective=defective,
                precise_a=precise_a,
                precise_ap=precise_ap,
                precision_a=ratio(precise_a, defective) if k == 1 else None,
                precision_ap=ratio(precise_ap, defective) if k == 1 else None,
                n_findings=sum(r.n_findings for r in model_rows),
                n_suppressed=sum(r.n_suppressed for r in model_rows),
                cost_usd=_sum_costs(model_rows),
                judge_errors=sum(r.judge_errors for r in model_rows),
            )
        )
        for category in report.categories:
            keys = {
                (d.task_id, d.issue_id) for d in report.issues if d.category == category.category
            }
            marks = [d.best.get(name) for d in report.issues if (d.task_id, d.issue_id) in keys]
            category.recall_a[name] = ratio(sum(m == "ALIGNED" for m in marks), len(keys))
            category.recall_ap[name] = ratio(
                sum(m in ("ALIGNED", "PARTIAL") for m in marks), len(keys)
            )
