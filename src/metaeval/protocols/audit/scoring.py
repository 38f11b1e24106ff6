"""Score audit findings against gold issues (BenchGuard Section 4 metrics).

For each row (one source, or one ensemble rule) and its reported findings (confidence >= 0.3):

- Recall_A = gold issues with at least one ALIGNED finding of the same task / all gold issues.
- Recall_A+P = gold issues with at least one ALIGNED or PARTIAL finding / all gold issues.
- Flagged-task precision, over the findings on tasks that have gold issues ("defective"):
  Precision_A = such findings ALIGNED with at least one gold issue of their task / such
  findings; Precision_A+P likewise with ALIGNED or PARTIAL. Undefined (None, "n/a") when the
  row has no finding on a defective task.
- Find. = findings on defective tasks; `n_findings` = all reported findings of the row.

A finding aligned with two gold issues counts once in precision and credits both in recall.
Every (gold issue, finding) pair of the same task is judged; findings on clean tasks are never
judged. Identical pairs that occur in several rows are judged once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.gold import Gold, GoldIssue
from metaeval.protocols.audit.judge import JudgeLike, Verdict, VerdictLabel
from metaeval.protocols.audit.score_report import (
    CategoryRecall,
    FindingDetail,
    GoldIssueDetail,
    PairVerdict,
    RowScore,
    ScoreReport,
    ratio,
)

_RANK = {"ALIGNED": 0, "PARTIAL": 1, "UNRELATED": 2}


def _best(verdicts: Iterable[VerdictLabel]) -> VerdictLabel | None:
    return min(verdicts, key=lambda v: _RANK[v], default=None)


def _pair_id(issue: GoldIssue, finding: Finding) -> str:
    """Identity of a pair's content: equal pairs in different rows are judged once."""
    return json.dumps(
        [
            issue.task_id,
            issue.id,
            finding.title,
            finding.description,
            finding.subcategory,
            [e.model_dump(mode="json") for e in finding.evidence],
        ],
        sort_keys=True,
        ensure_ascii=False,
    )


Best = dict[tuple[str, str], VerdictLabel | None]  # (task_id, issue id) -> best verdict


class _Scorer:
    """Judges (gold issue, finding) pairs once each and collects the per-issue and per-finding
    details of every row."""

    def __init__(self, gold: Gold, judge: JudgeLike) -> None:
        self.gold, self.judge = gold, judge
        self.issues = list(gold.all_issues())
        self.memo: dict[str, Verdict] = {}
        self.error_pairs: set[str] = set()
        self.details = {
            (i.task_id, i.id): GoldIssueDetail(
                task_id=i.task_id, issue_id=i.id, category=i.category, description=i.description
            )
            for i in self.issues
        }
        self.findings: list[FindingDetail] = []

    def ask(self, issue: GoldIssue, finding: Finding) -> Verdict:
        pid = _pair_id(issue, finding)
        if pid not in self.memo:
            self.memo[pid] = self.judge.judge(issue, finding)
            if self.memo[pid].judge_error:
                self.error_pairs.add(pid)
        return self.memo[pid]

    def row(self, name: str, findings: list[Finding]) -> tuple[Best, int, int, int, int]:
        """Judge one row's reported findings: (best verdict per gold issue, findings on
        defective tasks, of those aligned, aligned or partial, judge errors)."""
        best: Best = {(i.task_id, i.id): None for i in self.issues}
        n_defective = precise_a = precise_ap = errors = 0
        for index, finding in enumerate(findings):
            task_issues = self.gold.issues_for(finding.task_id)
            if not task_issues:
                continue  # clean or ungraded task: counts only in the total
            n_defective += 1
            verdicts = [(issue, self.ask(issue, finding)) for issue in task_issues]
            for issue, v in verdicts:
                key = (issue.task_id, issue.id)
                so_far = best[key]
                best[key] = _best([v.verdict] + ([so_far] if so_far else []))
                errors += v.judge_error
                self.details[key].pairs.append(_pair(name, index, finding, v))
            finding_best = _best(v.verdict for _, v in verdicts)
            assert finding_best is not None
            precise_a += finding_best == "ALIGNED"
            precise_ap += finding_best in ("ALIGNED", "PARTIAL")
            self.findings.append(
                FindingDetail(
                    row=name,
                    task_id=finding.task_id,
                    finding_index=index,
                    title=finding.title,
                    subcategory=finding.subcategory,
                    best=finding_best,
                    aligned_with=[i.id for i, v in verdicts if v.verdict == "ALIGNED"],
                    partial_with=[i.id for i, v in verdicts if v.verdict == "PARTIAL"],
                )
            )
        for key, label in best.items():
            self.details[key].best[name] = label
        return best, n_defective, precise_a, precise_ap, errors


def _pair(row: str, index: int, finding: Finding, v: Verdict) -> PairVerdict:
    return PairVerdict(
        row=row,
        finding_index=index,
        finding_title=finding.title,
        finding_subcategory=finding.subcategory,
        finding_sources=list(finding.sources),
        finding_confidence=finding.confidence,
        verdict=v.verdict,
        reasoning=v.reasoning,
        cached=v.cached,
        judge_error=v.judge_error,
    )


def _category_recall(
    gold: Gold, issues: list[GoldIssue], best_by_row: dict[str, Best]
) -> list[CategoryRecall]:
    categories: list[CategoryRecall] = []
    for category in gold.categories:
        keys = [(i.task_id, i.id) for i in issues if i.category == category]
        entry = CategoryRecall(category=category, n_gold=len(keys))
        for row_name, best in best_by_row.items():
            a = sum(1 for k in keys if best[k] == "ALIGNED")
            ap = sum(1 for k in keys if best[k] in ("ALIGNED", "PARTIAL"))
            entry.recall_a[row_name] = ratio(a, len(keys))
            entry.recall_ap[row_name] = ratio(ap, len(keys))
        categories.append(entry)
    return categories


def score(
    groups: dict[str, list[Finding]],
    gold: Gold,
    judge: JudgeLike,
    costs: dict[str, float | None] | None = None,
    suppressed: dict[str, int] | None = None,
) -> ScoreReport:
    """Score every row of `groups` (row name -> findings) against `gold`.

    Only findings with `.reported` True count; the others are the row's suppressed count,
    unless `suppressed` gives it (a row of merged findings). `costs` maps row names to USD
    (missing or None: unknown, shown as "n/a").
    """
    costs = costs or {}
    suppressed = suppressed or {}
    scorer = _Scorer(gold, judge)
    n_gold = len(scorer.issues)
    best_by_row: dict[str, Best] = {}
    rows: list[RowScore] = []
    for row_name, all_findings in groups.items():
        findings = [f for f in all_findings if f.reported]
        best, n_defective, precise_a, precise_ap, errors = scorer.row(row_name, findings)
        best_by_row[row_name] = best
        recalled_a = sum(1 for label in best.values() if label == "ALIGNED")
        recalled_ap = sum(1 for label in best.values() if label in ("ALIGNED", "PARTIAL"))
        rows.append(
            RowScore(
                name=row_name,
                n_gold=n_gold,
                recalled_a=recalled_a,
                recalled_ap=recalled_ap,
                recall_a=ratio(recalled_a, n_gold),
                recall_ap=ratio(recalled_ap, n_gold),
                n_findings_defective=n_defective,
                precise_a=precise_a,
                precise_ap=precise_ap,
                precision_a=ratio(precise_a, n_defective),
                precision_ap=ratio(precise_ap, n_defective),
                n_findings=len(findings),
                n_suppressed=suppressed.get(row_name, len(all_findings) - len(findings)),
                cost_usd=costs.get(row_name),
                judge_errors=errors,
            )
        )
    return ScoreReport(
        gold_path=gold.path,
        gold_sha256=gold.sha256,
        judge_model=_judge_model_name(judge),
        n_gold=n_gold,
        n_defective_tasks=len(gold.defective_tasks),
        rows=rows,
        categories=_category_recall(gold, scorer.issues, best_by_row),
        issues=list(scorer.details.values()),
        findings=scorer.findings,
        judge_errors=len(scorer.error_pairs),
        judge_pairs=len(scorer.memo),
    )


def _judge_model_name(judge: Any) -> str | None:
    name = getattr(judge, "model_name", None)
    return name if isinstance(name, str) else None
