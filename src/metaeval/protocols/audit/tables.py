"""Tables a reader of the BenchGuard paper expects, from a run's reported findings and cells.

- findings by subcategory by source (the paper's Table 6 shape: subcategories down, models
  across, with totals);
- definition-level vs execution-level findings per source, side by side, when a run holds
  findings of both protocols (the paper's Table 9 compares the two);
- cost per task per model: tasks audited, total dollars, dollars and tokens per task (the
  paper's "Cost Breakdown": $0.011/task).
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from metaeval.protocols.audit.findings import SUBCATEGORIES, Finding
from metaeval.protocols.audit.records import STATIC_SOURCE, Cells, ModelCell
from metaeval.protocols.audit.score_report import fmt_cost
from metaeval.report.markdown import markdown_table

PROTOCOLS = ("definition", "execution")


class SourceCost(BaseModel):
    """What one model spent: on all its audited tasks, and per task."""

    source: str
    tasks: int  # tasks with a final cell (a failed parse costs too)
    cost_usd: float | None  # None when a call had no known price
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def cost_per_task(self) -> float | None:
        return None if self.cost_usd is None or not self.tasks else self.cost_usd / self.tasks


class PaperTables(BaseModel):
    """The three tables (see the module docstring)."""

    sources: list[str] = Field(default_factory=list)
    by_subcategory: dict[str, dict[str, int]] = Field(default_factory=dict)  # sub -> source -> n
    by_protocol: dict[str, dict[str, int]] = Field(default_factory=dict)  # source -> protocol -> n
    costs: list[SourceCost] = Field(default_factory=list)

    def to_markdown(self) -> str:
        parts = []
        if self.by_subcategory:
            parts += [
                "### Findings by subcategory and source\n",
                markdown_table(*self.subcategory_table()),
            ]
        if self.by_protocol:
            parts += [
                "\n### Definition-level vs execution-level findings\n",
                markdown_table(*self.protocol_table()),
            ]
        if self.costs:
            parts += ["\n### Cost per task per model\n", markdown_table(*self.cost_table())]
        return "\n".join(parts) + "\n" if parts else ""

    def subcategory_table(self) -> tuple[list[str], list[list[str]]]:
        columns = ["Subcategory", *self.sources, "Total"]
        rows = []
        for sub in sorted(self.by_subcategory, key=list(SUBCATEGORIES).index):
            counts = self.by_subcategory[sub]
            rows.append([sub, *(str(counts.get(s, 0)) for s in self.sources)])
            rows[-1].append(str(sum(counts.values())))
        totals = [sum(c.get(s, 0) for c in self.by_subcategory.values()) for s in self.sources]
        rows.append(["Total", *(str(n) for n in totals), str(sum(totals))])
        return columns, rows

    def protocol_table(self) -> tuple[list[str], list[list[str]]]:
        rows = [
            [source, *(str(counts.get(p, 0)) for p in PROTOCOLS)]
            for source, counts in self.by_protocol.items()
        ]
        return ["Source", "Definition-level", "Execution-level"], rows

    def cost_table(self) -> tuple[list[str], list[list[str]]]:
        columns = ["Model", "Tasks", "Cost ($)", "Cost per task ($)", "Tokens per task"]
        rows = [
            [
                c.source,
                str(c.tasks),
                fmt_cost(c.cost_usd),
                fmt_cost(c.cost_per_task),
                str(round((c.input_tokens + c.output_tokens) / c.tasks)) if c.tasks else "n/a",
            ]
            for c in self.costs
        ]
        return columns, rows


def paper_tables(findings: list[Finding], cells: Cells) -> PaperTables:
    """The tables of one run: `findings` are its valid findings (one per source, unmerged),
    `cells` its latest cell records per (task, source)."""
    reported = [f for f in findings if f.reported]
    sources = sorted({f.source for f in reported} | {s for _, s in cells})
    by_sub: dict[str, dict[str, int]] = {}
    for (sub, source), n in Counter((f.subcategory, f.source) for f in reported).items():
        by_sub.setdefault(sub, {})[source] = n
    by_protocol: dict[str, dict[str, int]] = {}
    if {f.protocol for f in reported if f.source != STATIC_SOURCE} >= set(PROTOCOLS):
        for source in sources:
            mine: Counter[str] = Counter(f.protocol for f in reported if f.source == source)
            if any(mine.get(p) for p in PROTOCOLS):
                by_protocol[source] = {p: mine.get(p, 0) for p in PROTOCOLS}
    return PaperTables(
        sources=sources,
        by_subcategory=by_sub,
        by_protocol=by_protocol,
        costs=[_cost(source, cells) for source in sources if source != STATIC_SOURCE],
    )


def _cost(source: str, cells: Cells) -> SourceCost:
    done = [rec for (_, s), rec in cells.items() if s == source and rec.is_final]
    models = [rec for rec in done if isinstance(rec, ModelCell)]
    # a model cell that raised has no cost: the source's total is unknown then
    costs = [rec.cost_usd if isinstance(rec, ModelCell) else None for rec in done]
    return SourceCost(
        source=source,
        tasks=len(done),
        cost_usd=None if None in costs else sum(c for c in costs if c is not None),
        input_tokens=sum(rec.input_tokens for rec in models),
        output_tokens=sum(rec.output_tokens for rec in models),
    )
