"""Bundle summary files and the report of a recursive run (Appendix B.2, Section 3.5)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metaeval.errors import RecordIntegrityError
from metaeval.protocols.improve.extension import (
    EXTENSIONS,
    bundle_budget,
    extension_layer,
    extension_record,
)
from metaeval.protocols.improve.noise import read_noise, repeat_usages
from metaeval.protocols.improve.records import (
    FEEDBACK,
    LedgerEntry,
    Number,
    ledger_entries,
    trial_path,
)
from metaeval.protocols.improve.search.summary import with_search
from metaeval.protocols.improve.summary_records import (
    BestNode,
    FinalNode,
    NodeScores,
    RunSummary,
    Tokens,
)
from metaeval.records import RunDir, redact
from metaeval.records.layers import WAYS_OUT
from metaeval.records.manifest import MANIFEST_NAME, diff_hashes, read_manifest, setting_hashes

if TYPE_CHECKING:
    from metaeval.protocols.improve.plan import Plan
    from metaeval.protocols.improve.records import NodeEval


def open_bundle(plan: Plan) -> RunDir:
    """Open (create or resume) the bundle as a run directory: locked while open, and resumed
    only with the same input files (a changed file aborts, naming it)."""
    resolved = plan.documents.get("resolved_manifest.json") or {}
    files = resolved.get("files") or {}
    hashes = {f"file:{role}": rec["sha256"] for role, rec in sorted(files.items())}
    contract = {
        "contract:trial_budget": str(plan.trial_budget),
        "contract:seed": str(resolved.get("seed")),
        **{f"suite:{split}": s["sha256"] for split, s in (resolved.get("suites") or {}).items()},
    }
    _refuse_changed_contract(plan.bundle, resolved)
    hashes.update(_known_to(plan.bundle, contract))
    config: dict = {
        "run_id": plan.run_id,
        "baseline_id": plan.baseline_id,
        "trial_budget": plan.trial_budget,
    }
    if plan.host_env:
        # the names only; a different allow list can change what the verifiers score, so
        # resuming with another one is refused like a changed input file
        config["host_env"] = list(plan.host_env)
        hashes["allow_host_env"] = "\n".join(plan.host_env)
    layer = extension_layer(plan.bundle, plan.trial_budget, hashes)
    try:
        run = RunDir.open(
            plan.bundle,
            protocol="improve",
            config=config,
            hashes=hashes,
            seeds={},
            new_layer=layer,
        )
    except RecordIntegrityError as exc:
        # improve has no evidence layers: the only way forward is a new bundle
        detail = str(exc).split(WAYS_OUT, 1)[0]
        raise RecordIntegrityError(f"{detail}; use a new output directory (-o)") from None
    if layer is not None:
        run.write_document(EXTENSIONS, extension_record(plan.bundle, plan.trial_budget, layer))
    return run


CONTRACT_SETTINGS = (
    "trial_budget",
    "seed",
    "meta_agent_limits",
    "sandbox",
    "pull",
    "models",
    "noise",
)
"""The resolved manifest's keys that fix what a trial means; a resume may not change them."""


def _refuse_changed_contract(bundle: Path, resolved: dict[str, Any]) -> None:
    """Refuse a resume whose budget, seed, meta-agent limits or suites differ from the
    bundle's, in words (a larger budget is an extension, `extension`). Settings are compared by the run directory's one rule
    (`records.manifest.diff_hashes`, "setting 'seed' changed: 0 -> 7"); a setting the bundle
    did not record yet (an older metaeval) is not compared."""
    path = bundle / "resolved_manifest.json"
    if not path.is_file():
        return
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecordIntegrityError(f"{path}: cannot be read ({exc})") from None
    old = {key: before[key] for key in CONTRACT_SETTINGS if key in before}
    old["trial_budget"] = bundle_budget(bundle)
    if (resolved.get("trial_budget") or 0) > (old["trial_budget"] or 0):
        del old["trial_budget"]  # a larger budget extends the contract (`extension`)
    new = {key: resolved.get(key) for key in old}
    changes = diff_hashes(setting_hashes(old), setting_hashes(new), old, new)
    if before.get("search") != resolved.get("search"):  # absent: the default, recursive
        changes.append("the search policy changed (manifest 'search')")
    for split, suite in (before.get("suites") or {}).items():
        now = (resolved.get("suites") or {}).get(split) or {}
        if suite.get("tasks") != now.get("tasks"):
            changes.append(f"suite '{split}' changed: its task list differs")
        elif suite.get("sha256") != now.get("sha256"):
            changes.append(f"suite '{split}' changed: a task file differs")
    if changes:
        raise RecordIntegrityError(
            f"{bundle}: the run's contract differs from the bundle's: "
            + "; ".join(changes)
            + "; use a new output directory (-o)"
        )


def _known_to(bundle: Path, contract: dict[str, str]) -> dict[str, str]:
    """The contract hashes a resume can compare: all of them for a new bundle, only those its
    manifest already records for a bundle written before they were (it resumes as it did)."""
    manifest = bundle / MANIFEST_NAME
    if not manifest.is_file():
        return contract
    recorded: set[str] = set()
    for layer in read_manifest(bundle).get("layers", []):
        recorded |= set(layer.get("hashes") or {})
    return {name: value for name, value in contract.items() if name in recorded}


class BundleFiles:
    """Writes the bundle's documents (Appendix B.2 layout) through its RunDir: atomically,
    with secrets redacted. Paths may be absolute under the bundle or relative to it."""

    def __init__(self, run: RunDir):
        self.run = run

    def _rel(self, path: str | Path) -> str:
        path = Path(path)
        return str(path.relative_to(self.run.path) if path.is_absolute() else path)

    def json(self, path: str | Path, data: Any) -> None:
        """One JSON document: indented, sorted keys, trailing newline."""
        text = json.dumps(redact(data), indent=2, sort_keys=True, default=str) + "\n"
        self.run.write_document(self._rel(path), text)

    def text(self, path: str | Path, text: str) -> None:
        """One text document (instructions, patches, traces, reports)."""
        self.run.write_document(self._rel(path), text)


def benchmark_summary(
    plan: Plan, baseline: NodeEval, ledger: Sequence[LedgerEntry | Mapping[str, Any]]
) -> RunSummary:
    """Section 3.5: baseline, final promoted candidate, gains, promotions, valid and invalid
    trials, cost.

    "Best" is taken over promoted candidates only (the lineage the selection gate kept), never
    over rejected ones: `best_optimize` is the final promoted candidate (each promotion is a
    strict optimize gain over its parent, so the lineage's last is its best); `best_held_out`
    is the promoted candidate with the highest held-out score, the later one on a tie (closer
    to the final candidate). `best_so_far` is the optimize score of the active parent after
    each trial. Gains are the final candidate's scores minus the baseline's."""
    entries = ledger_entries(ledger)
    valid = [e for e in entries if e.failure_class is None]
    promoted = [e for e in entries if e.decision == "promoted"]
    final = promoted[-1] if promoted else None
    held = [e for e in promoted if e.held_out_score is not None]
    best_held = max(reversed(held), key=lambda e: e.held_out_score or 0, default=None)
    final_opt = baseline.optimize_score if final is None else final.optimize_score
    final_held = baseline.held_out_score if final is None else final.held_out_score
    bundle = getattr(plan, "bundle", None)
    meta_cost, meta_tokens = _meta_agent_totals(entries)
    target_cost, target_tokens, sources = _target_totals(baseline, entries, bundle)
    return RunSummary(
        baseline=NodeScores(
            id=plan.baseline_id,
            optimize_score=baseline.optimize_score,
            held_out_score=baseline.held_out_score,
        ),
        final=FinalNode(
            id=plan.baseline_id if final is None else final.candidate_id,
            optimize_score=final_opt,
            held_out_score=final_held,
            gain_optimize=_gain(final_opt, baseline.optimize_score),
            gain_held_out=_gain(final_held, baseline.held_out_score),
        ),
        best_optimize=None
        if final is None
        else BestNode(id=final.candidate_id, score=final.optimize_score),
        best_held_out=None
        if best_held is None
        else BestNode(id=best_held.candidate_id, score=best_held.held_out_score),
        best_so_far=_best_so_far(baseline, entries),
        trials_consumed=len(entries),
        trial_budget=plan.trial_budget,
        promotions=len(promoted),
        valid_candidates=len(valid),
        invalid_or_broken_trials=len(entries) - len(valid),
        failure_classes=dict(Counter(e.failure_class for e in entries if e.failure_class)),
        meta_agent_cost_usd=meta_cost,
        meta_agent_tokens=meta_tokens,
        target_cost_usd=target_cost,
        target_tokens=target_tokens,
        target_usage_sources=sources,
        baseline_noise=None if bundle is None else read_noise(bundle),
    )


def _best_so_far(baseline: NodeEval, entries: list[LedgerEntry]) -> list[Number | None]:
    """The optimize score of the active parent after each trial."""
    series: list[Number | None] = []
    current = baseline.optimize_score
    for entry in entries:
        if entry.decision == "promoted":
            current = entry.optimize_score
        series.append(current)
    return series


def _meta_agent_totals(entries: list[LedgerEntry]) -> tuple[float | None, Tokens]:
    """The meta-agent's cost (None when any trial's is unknown) and tokens over all trials."""
    runs = [e.meta_agent for e in entries]
    tokens = Tokens(
        input_tokens=sum(int(run.usage.get("input_tokens") or 0) for run in runs if run),
        output_tokens=sum(int(run.usage.get("output_tokens") or 0) for run in runs if run),
    )
    return _total(run.cost_usd if run else None for run in runs), tokens


def _target_totals(
    baseline: NodeEval, entries: list[LedgerEntry], bundle: Path | None
) -> tuple[float | None, Tokens, list[str]]:
    """The target's cost, tokens and who counted them, over the baseline's evaluations (its
    repeats included) and every candidate's (ledger entries written before these were
    recorded count as unknown cost)."""
    usages = [baseline.target_usage, *([] if bundle is None else repeat_usages(bundle))]
    usages += [e.target for e in entries if e.candidate_commit]
    known = [u for u in usages if u]
    tokens = Tokens(
        input_tokens=sum(u.input_tokens for u in known),
        output_tokens=sum(u.output_tokens for u in known),
    )
    return (
        _total(u.cost_usd if u else None for u in usages),
        tokens,
        sorted({u.source for u in known}),
    )


def _gain(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None else round(value - base, 6)


def _total(values: Any) -> float | None:
    """The sum of known costs; None when any is unknown (an unpriced model)."""
    total = 0.0
    for value in values:
        if value is None:
            return None
        total += float(value)
    return round(total, 6)


def _score(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _delta(value: Any) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f} pp"


def summary_text(summary: RunSummary) -> str:
    """One readable line for the CLI: baseline, best candidates, promotions, failures."""
    base, final = summary.baseline, summary.final
    parts = [f"baseline {_score(base.optimize_score)} (held-out {_score(base.held_out_score)})"]
    if not summary.promotions:
        parts.append("no candidate promoted")
    else:
        parts.append(
            f"final {final.id}: optimize {_score(final.optimize_score)} "
            f"({_delta(final.gain_optimize)}), held-out {_score(final.held_out_score)} "
            f"({_delta(final.gain_held_out)})"
        )
    search = summary.search
    if search and search.final_pick is not None:  # a population search: its own decision
        on = search.final_pick.on.replace("_", "-")
        parts.append(f"{search.policy} search, final picked on {on} scores")
    parts.append(
        f"{summary.trials_consumed} of {summary.trial_budget} trials, "
        f"{summary.promotions} promoted, {summary.valid_candidates} valid, "
        f"{summary.invalid_or_broken_trials} invalid or broken"
    )
    return "; ".join(parts)


def lineage(
    plan: Plan, baseline: NodeEval, ledger: Sequence[LedgerEntry | Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The baseline and every trial's candidate as lineage nodes (id, parent, scores)."""
    nodes = [
        {
            "id": plan.baseline_id,
            "parent": None,
            "commit": plan.baseline_commit,
            "optimize_score": baseline.optimize_score,
            "held_out_score": baseline.held_out_score,
            "decision": "baseline",
            "failure_class": None,
        }
    ]
    for entry in ledger_entries(ledger):
        nodes.append(
            {
                "id": entry.candidate_id,
                "parent": entry.parent_id,
                "commit": entry.candidate_commit,
                "optimize_score": entry.optimize_score,
                "held_out_score": entry.held_out_score,
                "decision": entry.decision,
                "failure_class": entry.failure_class,
                # a merge's other parent: the lineage is a graph (issue 41)
                **({"second_parent": entry.second_parent_id} if entry.second_parent_id else {}),
            }
        )
    return nodes


def execution_trace(plan: Plan, baseline: NodeEval, ledger: Sequence[LedgerEntry]) -> str:
    """A stitched narrative of the run, read first."""
    lines = [
        f"recursive run {plan.run_id}: baseline {plan.baseline_id} @ {plan.baseline_commit[:12]}",
        f"baseline optimize score {_score(baseline.optimize_score)}, held-out score "
        f"{_score(baseline.held_out_score)}",
    ]
    for entry in ledger:
        line = (
            f"trial {entry.trial:03d}: parent {entry.parent_id} -> {entry.candidate_id}: "
            f"{entry.decision}"
        )
        if entry.failure_class:
            line += f" [{entry.failure_class}]"
        if entry.optimize_score is not None:
            line += f"; optimize {_score(entry.optimize_score)}"
        if entry.held_out_score is not None:
            line += f", held-out {_score(entry.held_out_score)}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def write_summary_files(
    plan: Plan,
    baseline: NodeEval,
    ledger: Sequence[LedgerEntry | Mapping[str, Any]],
    files: BundleFiles,
) -> RunSummary:
    """lineage_summary, promotion_history, final_feedback_packet, execution_trace, reports."""
    entries = ledger_entries(ledger)
    summary = with_search(plan.bundle, benchmark_summary(plan, baseline, entries), entries, _gain)
    nodes = lineage(plan, baseline, entries)
    files.json("lineage_summary.json", {"summary": summary.model_dump(mode="json"), "nodes": nodes})
    files.json(
        "promotion_history.json",
        [
            {
                "trial": e.trial,
                "from": e.parent_id,
                "to": e.candidate_id,
                "optimize_score": e.optimize_score,
                "held_out_score": e.held_out_score,
            }
            for e in entries
            if e.decision == "promoted"
        ],
    )
    final = {}
    if entries:
        packet = trial_path(plan.bundle, entries[-1].trial) / FEEDBACK
        if packet.exists():
            final = json.loads(packet.read_text())
    files.json("final_feedback_packet.json", final)
    files.text("execution_trace.txt", execution_trace(plan, baseline, entries))
    from metaeval.protocols.improve import report

    trials = report.trial_views(plan.bundle, entries, baseline)
    files.text("report.md", report.render_markdown(plan.run_id, summary, nodes, trials))
    files.text("report.html", report.render_html(plan.run_id, summary, nodes, trials))
    return summary
