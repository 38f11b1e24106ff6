"""One finding per defect when a static check and an execution check both see it.

Both kinds of deterministic check have the source "static", so the cross-source ensemble
merge never joins them. A defect such as a missing module is then reported twice: once by
the import check ("tests import `scipy`, which nothing installs") and once by the oracle run
("the reference run needs 'scipy'"). `merge_check_findings` folds each execution finding
into the static finding of the same task and subcategory (preferring one whose title names
the same module or path), keeping every piece of evidence, the higher severity and
confidence, and saying in the description that the run confirmed it. When no static finding
shares the subcategory, an execution finding whose log says a path a static finding names is
missing ("cp: cannot stat '/solution/x': No such file or directory" under "the reference
solution fails") is the same defect seen from its effect: it folds into that static finding,
which names the cause. An execution finding with no static counterpart stays as it is.

The same rule reads the logs of faithful runs that made no finding (`run_logs`: a null agent
whose tests failed, as they should): a log line saying a path an `assumed` absence claim
quotes is missing shows that claim in the task's environment, so it becomes `executed`, with
that line as evidence. There is one rule for both (`_missing_lines`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from metaeval.protocols.audit.findings import SEVERITY_ORDER, Evidence, Finding

# a name in backticks, or in single quotes that are not an apostrophe ("instruction's")
_QUOTED = re.compile(r"`([^`]+)`|(?<![\w])'([^']+)'(?![\w])")
_MISSING = re.compile(r"no such file|not found|cannot (?:stat|open|access)|does not exist", re.I)


def _keys(finding: Finding) -> set[str]:
    """Names a finding's title quotes (`scipy`, '/home/alice/x'), lower-cased."""
    return {m.lower().strip("/") for m in _quoted(finding.title)}


def _quoted(title: str) -> list[str]:
    return [tick or quote for tick, quote in _QUOTED.findall(title)]


def _pick(candidates: list[Finding], execution: Finding) -> Finding | None:
    if not candidates:
        return None
    wanted = _keys(execution)
    for candidate in candidates:
        keys = _keys(candidate)
        if wanted & keys or any(w in k or k in w for w in wanted for k in keys if w and k):
            return candidate
    return candidates[0] if len(candidates) == 1 else None


def _missing_lines(candidate: Finding, text: str) -> list[str]:
    """The lines of a run's log `text` that report a path `candidate` quotes as missing."""
    paths = [k for k in _quoted(candidate.title) if k.startswith("/") and len(k) > 3]
    if not paths:
        return []
    return [
        line
        for line in text.splitlines()
        if _MISSING.search(line) and any(path in line for path in paths)
    ]


def _names_missing_path(candidate: Finding, execution: Finding) -> bool:
    """True when the execution finding's log reports a path `candidate` quotes as missing."""
    return any(_missing_lines(candidate, e.snippet or "") for e in execution.evidence)


def merge_check_findings(
    static: list[Finding], execution: list[Finding], run_logs: Mapping[str, str] | None = None
) -> list[Finding]:
    """Static findings with matching execution findings folded in, then the rest; an
    absence claim that a faithful run's log (`run_logs`, by cited file name) shows missing
    becomes `executed`."""
    merged = [f.model_copy(deep=True) for f in static]
    extra: list[Finding] = []
    for found in execution:
        same = [
            f for f in merged if f.task_id == found.task_id and f.subcategory == found.subcategory
        ]
        target = _pick(same, found)
        if target is None:
            target = next(
                (f for f in merged if f.task_id == found.task_id and _names_missing_path(f, found)),
                None,
            )
        if target is None:
            extra.append(found)
            continue
        target.evidence = target.evidence + [e for e in found.evidence if e not in target.evidence]
        if SEVERITY_ORDER[found.severity] < SEVERITY_ORDER[target.severity]:
            target.severity = found.severity
        target.confidence = max(target.confidence, found.confidence)
        if found.evidence_tier == "executed":  # a faithful run confirmed it
            _shown(target)
        target.finding_type = (
            "Bug" if "Bug" in (target.finding_type, found.finding_type) else target.finding_type
        )
        target.description = (
            f"{target.description} An execution check confirmed it: {found.title.rstrip('.')}."
        )
    for name, log in (run_logs or {}).items():
        for target in merged:
            if target.claim != "absence" or target.evidence_tier != "assumed":
                continue
            lines = _missing_lines(target, log)
            if not lines:
                continue
            target.evidence = target.evidence + [Evidence(file=name, snippet=lines[0])]
            _shown(target)
            target.description = (
                f"{target.description} A run in the task's environment confirmed it "
                f"({name}: {lines[0].strip()})."
            )
    return merged + extra


def _shown(target: Finding) -> None:
    """`target` was seen in a faithful run of the task's environment: `executed`."""
    target.evidence_tier = "executed"
    if target.claim is not None:
        target.tier_reason = f"{target.claim} claim, shown by a run in the task's environment"
