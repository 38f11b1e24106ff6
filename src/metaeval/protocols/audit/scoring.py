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

from pydantic import BaseModel, Field

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.gold import Gold, GoldIssue
from metaeval.protocols.audit.judge import JudgeLike, Verdict, VerdictLabel
from metaeval.protocols.audit.review import ReviewSummary
from metaeval.report.markdown import markdown_table

SCORE_COLUMNS = (
    "Row",
    "Recall_A",
    "Recall_A+P",
    "Precision_A",
    "Precision_A+P",
    "Find.",
    "Cost ($)",
)
NA = "n/a"
ROWS_NOTE = (
    "Rows: one per source; `merged any` / `merged >=k` merge findings of several models that "
    "cite the same evidence, then vote; `pooled union` / `pooled >=k` are the paper's rule: all "
    "models' findings pooled unmerged, a gold issue counts when at least k models each have an "
    "aligned finding (Recall_A) or an aligned or partial one (Recall_A+P); their cost is the sum "
    "of the models'."
)
_RANK = {"ALIGNED": 0, "PARTIAL": 1, "UNRELATED": 2}
_MARK = {"ALIGNED": "✓", "PARTIAL": "~", "UNRELATED": "✗", None: "✗"}


def fmt_pct(value: float | None) -> str:
    """A ratio as a percentage with one decimal, or "n/a"."""
    return NA if value is None else f"{100.0 * value:.1f}"


def fmt_cost(value: float | None) -> str:
    """USD with two decimals (four below one cent), or "n/a" when unknown."""
    if value is None:
        return NA
    if value == 0:
        return "0.00"
    return f"{value:.4f}" if abs(value) < 0.01 else f"{value:.2f}"


def ratio(num: int, den: int) -> float | None:
    return None if den == 0 else num / den


def _best(verdicts: Iterable[VerdictLabel]) -> VerdictLabel | None:
    return min(verdicts, key=lambda v: _RANK[v], default=None)


class PairVerdict(BaseModel):
    """One judged (gold issue, finding) pair within one row."""

    row: str
    finding_index: int  # position of the finding in the row's reported findings
    finding_title: str
    finding_subcategory: str
    finding_sources: list[str]
    finding_confidence: float
    verdict: VerdictLabel
    reasoning: str = ""
    cached: bool = False
    judge_error: bool = False


class GoldIssueDetail(BaseModel):
    """Per gold issue: the best verdict per row and every judged pair."""

    task_id: str
    issue_id: str
    category: str
    description: str
    best: dict[str, VerdictLabel | None] = Field(default_factory=dict)  # row -> best verdict
    pairs: list[PairVerdict] = Field(default_factory=list)


class FindingDetail(BaseModel):
    """Per finding on a defective task: its best verdict and the gold issues it matched."""

    row: str
    task_id: str
    finding_index: int
    title: str
    subcategory: str
    best: VerdictLabel
    aligned_with: list[str] = Field(default_factory=list)  # gold issue ids
    partial_with: list[str] = Field(default_factory=list)


class RowScore(BaseModel):
    """The metrics of one row, with their numerators and denominators."""

    name: str
    kind: str = "findings"  # "findings": scored from its own findings; "pooled": see pooled.py
    n_gold: int
    recalled_a: int  # gold issues with an ALIGNED finding
    recalled_ap: int  # gold issues with an ALIGNED or PARTIAL finding
    recall_a: float | None
    recall_ap: float | None
    n_findings_defective: int  # "Find.": reported findings on tasks with gold issues
    precise_a: int  # of those, findings ALIGNED with some gold issue of their task
    precise_ap: int
    precision_a: float | None  # None when n_findings_defective == 0
    precision_ap: float | None
    n_findings: int  # all reported findings of the row
    n_suppressed: int  # findings below the report threshold, ignored
    cost_usd: float | None = None
    judge_errors: int = 0  # pairs of this row whose verdict was forced by malformed output


class CategoryRecall(BaseModel):
    """Recall per gold subcategory (Table 3/5 style)."""

    category: str
    n_gold: int
    recall_a: dict[str, float | None] = Field(default_factory=dict)  # row -> recall
    recall_ap: dict[str, float | None] = Field(default_factory=dict)


class ScoreReport(BaseModel):
    """Scores of every row against one gold file."""

    gold_path: str = ""
    gold_sha256: str = ""
    judge_model: str | None = None
    n_gold: int
    n_defective_tasks: int
    rows: list[RowScore]
    categories: list[CategoryRecall]
    issues: list[GoldIssueDetail]
    findings: list[FindingDetail] = Field(default_factory=list)
    judge_errors: int = 0  # distinct pairs whose verdict was forced by malformed judge output
    judge_pairs: int = 0  # distinct pairs judged
    warnings: list[str] = Field(default_factory=list)  # gold tasks a row could not have seen
    review: ReviewSummary | None = None  # precision against the run's review sheet, if any

    def row(self, name: str) -> RowScore:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    def table_rows(self) -> list[list[str]]:
        """The main table (SCORE_COLUMNS) as formatted cells."""
        return [
            [
                r.name,
                fmt_pct(r.recall_a),
                fmt_pct(r.recall_ap),
                fmt_pct(r.precision_a),
                fmt_pct(r.precision_ap),
                str(r.n_findings_defective),
                fmt_cost(r.cost_usd),
            ]
            for r in self.rows
        ]

    def count_columns(self) -> list[str]:
        return [
            "Row",
            "Gold",
            "Recalled A",
            "Recalled A+P",
            "Find.",
            "Prec. A hits",
            "Prec. A+P hits",
            "All findings",
            "Suppressed",
            "Judge errors",
        ]

    def count_rows(self) -> list[list[str]]:
        """Raw counts behind the percentages."""
        return [
            [
                r.name,
                str(r.n_gold),
                str(r.recalled_a),
                str(r.recalled_ap),
                str(r.n_findings_defective),
                str(r.precise_a),
                str(r.precise_ap),
                str(r.n_findings),
                str(r.n_suppressed),
                str(r.judge_errors),
            ]
            for r in self.rows
        ]

    def category_columns(self) -> list[str]:
        cols = ["Category", "Gold"]
        for r in self.rows:
            cols += [f"{r.name} Recall_A", f"{r.name} Recall_A+P"]
        return cols

    def category_rows(self) -> list[list[str]]:
        out = []
        for c in self.categories:
            cells = [c.category, str(c.n_gold)]
            for r in self.rows:
                cells += [fmt_pct(c.recall_a.get(r.name)), fmt_pct(c.recall_ap.get(r.name))]
            out.append(cells)
        return out

    def issue_columns(self) -> list[str]:
        return ["Task", "Issue", "Category", "Description", *(r.name for r in self.rows)]

    def issue_rows(self) -> list[list[str]]:
        """Per gold issue: ✓ aligned, ~ partial, ✗ missed, per row (Table 5 style)."""
        return [
            [
                d.task_id,
                d.issue_id,
                d.category,
                d.description,
                *(_MARK[d.best.get(r.name)] for r in self.rows),
            ]
            for d in self.issues
        ]

    def rows_note(self) -> str:
        """How the merged and the pooled rows differ, when the report has pooled rows."""
        return ROWS_NOTE if any(r.kind == "pooled" for r in self.rows) else ""

    def to_markdown(self) -> str:
        """Table 2/3-style scores, raw counts, per-category recall and per-issue detail."""
        parts = [
            "## Scores against gold\n",
            f"Gold: {self.n_gold} issues on {self.n_defective_tasks} tasks"
            + (f" ({self.gold_path})" if self.gold_path else "")
            + f". Judge: {self.judge_model or 'n/a'}; {self.judge_pairs} pairs judged, "
            f"{self.judge_errors} judge errors. Precision is flagged-task precision (findings "
            "on tasks with gold issues); percentages; n/a = undefined.\n",
            markdown_table(SCORE_COLUMNS, self.table_rows()),
            "\n### Counts\n",
            markdown_table(self.count_columns(), self.count_rows()),
            "\n### Recall per gold category\n",
            markdown_table(self.category_columns(), self.category_rows()),
            "\n### Gold issues (✓ aligned, ~ partial, ✗ missed)\n",
            markdown_table(self.issue_columns(), self.issue_rows()),
        ]
        for warning in self.warnings:
            parts.append(f"\n**Warning:** {warning}\n")
        if self.rows_note():
            parts.append(f"\n{self.rows_note()}\n")
        if self.review is not None:
            parts.append("\n" + self.review.to_markdown())
        if self.judge_errors:
            parts.append(
                f"\n**Warning:** {self.judge_errors} judge verdict(s) were forced to UNRELATED "
                "because the judge output was malformed after one retry.\n"
            )
        return "\n".join(parts)


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
