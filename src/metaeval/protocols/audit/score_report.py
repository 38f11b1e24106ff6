"""The score file of an audit (`score.json`, `score.md`): the scores of every row against one
gold file, the judged pairs behind them, and their Markdown tables (see `scoring` for how they
are computed and what each metric means)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from metaeval.protocols.audit.judge import VerdictLabel
from metaeval.protocols.audit.review_results import ReviewSummary
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
STRATEGY_COLUMNS = ("Strategy", "Exact", "Recall_A", "With partials", "Recall_A+P")
NA = "n/a"
ROWS_NOTE = (
    "Rows: one per source; `merged any` / `merged >=k` merge findings of several models that "
    "cite the same evidence, then vote; `pooled union` / `pooled >=k` are the paper's rule: all "
    "models' findings pooled unmerged, a gold issue counts when at least k models each have an "
    "aligned finding (Recall_A) or an aligned or partial one (Recall_A+P); their cost is the sum "
    "of the models'."
)
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
    pooled_models: list[str] = Field(default_factory=list)  # the models the pooled rows pool
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

    def strategy_rows(self) -> list[list[str]]:
        """Appendix G's ensemble strategies, exact and with partials (recalled / gold and
        percent): the best single model (most exact, then most with partials), then the
        pooled union, >=3 and >=2 rows."""
        singles = [self.row(m) for m in self.pooled_models]
        pooled = {r.name: r for r in self.rows if r.kind == "pooled"}
        if not singles or not pooled:
            return []
        best = max(singles, key=lambda r: (r.recalled_a, r.recalled_ap))
        chosen = [(f"best single model ({best.name})", best)]
        for name, label in (
            ("union", "union (any model)"),
            (">=3", ">=3 models"),
            (">=2", ">=2 models"),
        ):
            row = pooled.get(f"pooled {name}")
            if row is not None:
                chosen.append((label, row))
        return [
            [
                label,
                f"{r.recalled_a}/{r.n_gold}",
                fmt_pct(r.recall_a),
                f"{r.recalled_ap}/{r.n_gold}",
                fmt_pct(r.recall_ap),
            ]
            for label, r in chosen
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
        if strategies := self.strategy_rows():
            parts += [
                "\n### Ensemble strategies (Appendix G)\n",
                markdown_table(STRATEGY_COLUMNS, strategies),
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
