"""The improve bundle's report: what each trial changed, how it scored and why it was kept or not.

Everything is read back from the bundle (Appendix B.2 layout), so `metaeval improve report`
re-renders it from the files alone. A bundle handed to the command may come from anyone: its
files are read through `bundle_reads` (no symlink, FIFO or device, sizes and JSON nesting
capped; each record through its model in `records`, so a ledger line, selection decision or
evaluation lacking a field is named, not half-read), and a trial file that is refused is
named in the trial's evidence instead of being shown:

- per trial: the meta-agent's summary, the selection decision and its reason (the gate's
  comparisons in words), scores per suite next to the parent's and the baseline's, the failure
  class with its evidence (boundary reasons, the launch or framework error, failed tasks), and
  the candidate's diff, collapsed;
- a lineage chart and a score chart (`charts`), drawn as large inline SVG;
- the HTML page uses the shared report stylesheet (`metaeval.report.html`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from metaeval.exit_codes import CellFailure, one_line
from metaeval.protocols.improve.bundle_reads import read_patch_head, read_record
from metaeval.protocols.improve.charts import COLOURS, lineage_svg, score_text, scores_svg
from metaeval.protocols.improve.records import (
    CANDIDATE_EVAL,
    FEEDBACK,
    SELECTION,
    FeedbackPacket,
    Gate,
    LedgerEntry,
    NodeEval,
    Number,
    ParentRef,
    SelectionDecision,
    ledger_entries,
    trial_path,
)
from metaeval.protocols.improve.search.summary import search_items
from metaeval.protocols.improve.summary_records import BestNode, RunSummary
from metaeval.report.html import page_template, shared_css
from metaeval.report.markdown import markdown_table, md_code, md_document, md_text

FAILURE_CLASSES = (
    "meta_agent_failure",
    "target_agent_failure",
    "evaluation_framework_failure",
    "task_failure",
)
FAILURE_MEANING = {
    "meta_agent_failure": "the meta-agent's output broke the contract (error, malformed or "
    "empty patch, or a change outside the mutation boundary); the candidate was not evaluated",
    "target_agent_failure": "the candidate could not launch or serve the suite",
    "evaluation_framework_failure": "the harness or the target's model endpoint failed; not "
    "the candidate's fault",
    "task_failure": "the candidate ran and failed some tasks inside a valid evaluation",
}
MAX_DIFF_CHARS = 200_000
MAX_PATCH_BYTES = 4 * MAX_DIFF_CHARS
"""More of a candidate.patch than this is never read (the report shows MAX_DIFF_CHARS)."""


def framework_failures(bundle: Path, trials: int) -> list[CellFailure]:
    """The trials 1..`trials` of a bundle whose evaluation the harness could not complete
    (evaluation_framework_failure), with the reason from their feedback packet. A trial is
    consumed whatever its outcome, so these are final; the meta-agent's and the candidate's
    own failures are results, not listed here."""
    failures = []
    for trial in range(1, trials + 1):
        trial_dir = trial_path(bundle, trial)
        packet = read_record(trial_dir / FEEDBACK, FeedbackPacket, bundle, [])
        if packet and packet.failure_class == "evaluation_framework_failure":
            # the evaluation's own error: the packet's omits the held-out split (meta-agent's)
            node = read_record(trial_dir / CANDIDATE_EVAL, NodeEval, bundle, [])
            reason = one_line(
                (node.error if node else None) or packet.error or "no reason recorded"
            )
            failures.append(CellFailure("evaluation framework failures", reason, retried=False))
    return failures


def gate_reason(entry: LedgerEntry, selection: SelectionDecision | None) -> str:
    """Why the trial ended as it did, in words."""
    failure = entry.failure_class
    if failure == "meta_agent_failure":
        return "invalid: the candidate was not evaluated because the meta-agent's output broke the contract"
    if failure in ("target_agent_failure", "evaluation_framework_failure"):
        return f"invalid ({failure.replace('_', ' ')}): no usable scores"
    gate = (selection.gate if selection else None) or Gate(decision="")
    optimize, held = gate.optimize, gate.held_out
    cand, parent = optimize.candidate, optimize.parent
    parts = []
    if optimize.strictly_better:
        parts.append(f"optimize {score_text(cand)} is above the parent's {score_text(parent)}")
    else:
        parts.append(f"optimize {score_text(cand)} is not above the parent's {score_text(parent)}")
    state = held.state
    gate_name = str(held.gate or "").replace("_", " ")
    if state in ("passed", "failed"):
        parts.append(
            f"held-out gate '{gate_name}' {state} (candidate {score_text(held.candidate)}, "
            f"parent {score_text(held.parent)})"
        )
    elif state == "unavailable":
        parts.append(
            f"held-out gate '{gate_name}' could not be checked (a held-out score is missing)"
        )
    elif state == "recorded":
        parts.append("held-out score recorded, not gating")
    verdict = "promoted" if entry.decision == "promoted" else "rejected"
    return f"{verdict}: " + "; ".join(parts)


def _evidence(selection: SelectionDecision | None, evaluation: NodeEval | None) -> list[str]:
    """Evidence lines for the trial's failure class (or its failed tasks)."""
    lines: list[str] = []
    for reason in selection.reasons if selection else []:
        where = f" ({reason.path})" if reason.path else ""
        lines.append(f"{reason.code}{where}: {reason.detail}".strip())
    if evaluation and evaluation.error:
        lines.append(f"evaluation {evaluation.status}: {evaluation.error}")
    for suite in ("optimize", "held_out"):
        result = evaluation.suite(suite) if evaluation else None
        for task in result.tasks if result else []:
            if task.status != "passed":
                lines.append(
                    f"{suite.replace('_', '-')} task {task.task_id}: {task.status}"
                    + (f" ({task.reason})" if task.reason else "")
                )
    return lines


def trial_views(
    bundle: Path, ledger: Sequence[LedgerEntry | Mapping[str, Any]], baseline: NodeEval
) -> list[dict[str, Any]]:
    """One dict per trial with everything the reports show; the ledger lines, selection
    decisions and evaluations are read through their record models (`records`)."""
    return [_trial_view(bundle, entry, baseline) for entry in ledger_entries(ledger)]


def _trial_view(bundle: Path, entry: LedgerEntry, baseline: NodeEval) -> dict[str, Any]:
    folder = trial_path(bundle, entry.trial)
    refused: list[str] = []
    selection = read_record(folder / SELECTION, SelectionDecision, bundle, refused)
    evaluation = read_record(folder / CANDIDATE_EVAL, NodeEval, bundle, refused)
    diff, longer = read_patch_head(
        folder / "candidate.patch", bundle, refused, max_bytes=MAX_PATCH_BYTES
    )
    failure = entry.failure_class
    failure_shown = "task_failure" if failure is None and entry.task_failures else failure
    meta = entry.meta_agent
    return {
        "trial": entry.trial,
        "id": entry.candidate_id,
        "parent": entry.parent_id,
        "decision": entry.decision or "n/a",
        "failure_class": failure_shown,
        "failure_meaning": FAILURE_MEANING.get(failure_shown or "", ""),
        "reason": gate_reason(entry, selection),
        "summary": (meta.summary if meta else "") or "",
        "meta_status": (meta.status if meta else "") or "n/a",
        "suites": _suite_rows(entry, selection, evaluation, baseline),
        "evidence": refused + _evidence(selection, evaluation),
        "diff": diff[:MAX_DIFF_CHARS],
        "diff_cut": longer or len(diff) > MAX_DIFF_CHARS,
        "diff_lines": diff.count("\n"),
        "files": _changed_files(diff),
        "wall_clock_s": entry.wall_clock_s,
    }


def _suite_rows(
    entry: LedgerEntry,
    selection: SelectionDecision | None,
    evaluation: NodeEval | None,
    baseline: NodeEval,
) -> list[dict[str, Any]]:
    """Per suite: the baseline's, the parent's and the candidate's score, and task counts."""
    parent = selection.parent if selection else None
    rows = []
    for key, label, base_score, score in (
        ("optimize", "optimize", baseline.optimize_score, entry.optimize_score),
        ("held_out", "held-out", baseline.held_out_score, entry.held_out_score),
    ):
        result = evaluation.suite(key) if evaluation else None
        if result is None and score is None and base_score is None:
            continue
        rows.append(
            {
                "suite": label,
                "baseline": score_text(base_score),
                "parent": score_text(_parent_score(parent, key)),
                "candidate": score_text(score),
                "passed": "n/a" if result is None else result.passed,
                "failed": "n/a" if result is None else result.failed,
                "infra_errors": "n/a" if result is None else result.infra_errors,
            }
        )
    return rows


def _parent_score(parent: ParentRef | None, suite: str) -> Number | None:
    if parent is None:
        return None
    return parent.optimize_score if suite == "optimize" else parent.held_out_score


def _changed_files(diff: str) -> list[str]:
    files = []
    for line in diff.splitlines():
        if line.startswith("+++ ") and not line.endswith("/dev/null"):
            files.append(line[4:].removeprefix("b/"))
        elif line.startswith("deleted file") and files is not None:
            continue
    return files


# ---------------------------------------------------------------------------------------------
# pages


def final_items(summary: RunSummary) -> list[tuple[str, str]]:
    """The final promoted candidate, its gains and the meta-agent's and the target's cost."""
    final = summary.final

    def gain(value: Number | None) -> str:
        return "n/a" if value is None else f"{value * 100:+.1f} pp"

    def cost(value: Number | None) -> str:
        return "unknown" if value is None else f"${value:.4f}"

    meta, target = summary.meta_agent_tokens, summary.target_tokens
    sources = ", ".join(summary.target_usage_sources) or "none"
    return [
        (
            "Final candidate",
            f"{final.id}: optimize {score_text(final.optimize_score)} "
            f"({gain(final.gain_optimize)}), held-out "
            f"{score_text(final.held_out_score)} ({gain(final.gain_held_out)})"
            + (f"; picked by {final.chosen_by}" if final.chosen_by else ""),
        ),
        (
            "Meta-agent cost",
            f"{cost(summary.meta_agent_cost_usd)}, {meta.input_tokens} input and "
            f"{meta.output_tokens} output tokens",
        ),
        (
            "Target cost",
            f"{cost(summary.target_cost_usd)}, {target.input_tokens} input and "
            f"{target.output_tokens} output tokens (counted by: {sources})",
        ),
    ]


def summary_items(run_id: str, summary: RunSummary) -> list[tuple[str, str]]:
    """(label, text) pairs for the run summary."""
    base = summary.baseline

    def best(item: BestNode | None) -> str:
        return "none" if item is None else f"{item.id} at {score_text(item.score)}"

    counts = summary.failure_classes
    failures = ", ".join(
        f"{c.replace('_', ' ')} {counts[c]}" for c in FAILURE_CLASSES if counts.get(c)
    )
    return [
        ("Run", run_id),
        ("Baseline", f"{base.id}: optimize {score_text(base.optimize_score)}, held-out "
         f"{score_text(base.held_out_score)}"),
        *final_items(summary),
        *search_items(summary),
        ("Best on optimize (promoted)", best(summary.best_optimize)),
        ("Best held-out (promoted)", best(summary.best_held_out)),
        ("Trials", f"{summary.trials_consumed} of {summary.trial_budget}"),
        ("Promotions", str(summary.promotions)),
        ("Valid candidates", str(summary.valid_candidates)),
        ("Invalid or broken", f"{summary.invalid_or_broken_trials}" + (f" ({failures})" if failures else "")),
    ]  # fmt: skip


def render_markdown(run_id: str, summary: RunSummary, nodes: list[dict], trials: list[dict]) -> str:
    """report.md: summary, the trial table, then one section per trial. Text from the bundle
    (the meta-agent's summary, reasons, evidence, file names) is shown as text (`md_text`,
    `md_code`), and the whole document passes `md_document`."""
    lines = [f"# Improve run {md_text(run_id)}", ""]
    lines += [f"- **{label}**: {md_text(text)}" for label, text in summary_items(run_id, summary)]
    lines += ["", "## Trials", ""]
    rows = [
        [
            n["id"],
            n["parent"] or "-",
            n["decision"],
            n["failure_class"] or "-",
            score_text(n["optimize_score"]),
            score_text(n["held_out_score"]),
        ]
        for n in nodes
    ]
    lines.append(
        markdown_table(
            ["node", "parent", "decision", "failure class", "optimize", "held-out"], rows
        )
    )
    for trial in trials:
        head = f"Trial {trial['trial']:03d}: {trial['id']} (parent {trial['parent']})"
        lines += [f"## {md_text(head)}", ""]
        if trial["summary"]:
            # quoted: whatever Markdown the meta-agent wrote stays inside its own block
            quoted = md_text(trial["summary"]).split("\n")
            lines += ["Meta-agent:", "", *[f"> {line}" for line in quoted], ""]
        lines += [f"Decision: {md_text(trial['reason'])}.", ""]
        if trial["failure_class"]:
            failure = f"{trial['failure_class']} ({trial['failure_meaning']})"
            lines += [f"Failure class: {md_text(failure)}.", ""]
        if trial["suites"]:
            lines.append(
                markdown_table(
                    ["suite", "baseline", "parent", "candidate", "passed", "failed"],
                    [
                        [s["suite"], s["baseline"], s["parent"], s["candidate"], s["passed"], s["failed"]]
                        for s in trial["suites"]
                    ],
                )
            )  # fmt: skip
        if trial["evidence"]:
            evidence = [f"- {' '.join(md_text(e).split())}" for e in trial["evidence"]]
            lines += ["Evidence:", "", *evidence, ""]
        files = ", ".join(md_code(f) for f in trial["files"]) or "none"
        lines += [
            f"Changed files: {files} (diff in `trials/{trial['trial']:03d}/candidate.patch`).",
            "",
        ]
    return md_document("\n".join(lines).rstrip() + "\n")


def _trial_anchor(node: dict[str, Any]) -> str | None:
    """A lineage node -> its trial's section of the page (the baseline has none)."""
    return None if node.get("decision") == "baseline" else f"#{node['id']}"


def render_html(run_id: str, summary: RunSummary, nodes: list[dict], trials: list[dict]) -> str:
    """report.html: one self-contained page in the shared report style."""
    template = page_template("metaeval.protocols.improve", "templates/report.html.j2")
    return template.render(
        shared_css=shared_css(),
        run_id=run_id,
        summary=summary_items(run_id, summary),
        lineage=Markup(lineage_svg(nodes, _trial_anchor)),
        scores=Markup(scores_svg(nodes)),
        nodes=[{**n, "optimize": score_text(n["optimize_score"]), "held_out": score_text(n["held_out_score"])} for n in nodes],
        trials=trials,
        colours=COLOURS,
        failure_counts=[(c, summary.failure_classes.get(c, 0), FAILURE_MEANING[c]) for c in FAILURE_CLASSES],
    )  # fmt: skip
