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
"""

from __future__ import annotations

import re

from metaeval.protocols.audit.findings import SEVERITY_ORDER, Finding

_QUOTED = re.compile(r"[`'](.+?)[`']")
_MISSING = re.compile(r"no such file|not found|cannot (?:stat|open|access)|does not exist", re.I)


def _keys(finding: Finding) -> set[str]:
    """Names a finding's title quotes (`scipy`, '/home/alice/x'), lower-cased."""
    return {m.lower().strip("/") for m in _QUOTED.findall(finding.title)}


def _pick(candidates: list[Finding], execution: Finding) -> Finding | None:
    if not candidates:
        return None
    wanted = _keys(execution)
    for candidate in candidates:
        keys = _keys(candidate)
        if wanted & keys or any(w in k or k in w for w in wanted for k in keys if w and k):
            return candidate
    return candidates[0] if len(candidates) == 1 else None


def _names_missing_path(candidate: Finding, execution: Finding) -> bool:
    """True when the execution finding's log reports a path `candidate` quotes as missing."""
    paths = [k for k in _QUOTED.findall(candidate.title) if k.startswith("/") and len(k) > 3]
    if not paths:
        return False
    for evidence in execution.evidence:
        for line in (evidence.snippet or "").splitlines():
            if _MISSING.search(line) and any(path in line for path in paths):
                return True
    return False


def merge_check_findings(static: list[Finding], execution: list[Finding]) -> list[Finding]:
    """Static findings with matching execution findings folded in, then the rest."""
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
            target.evidence_tier = "executed"
            if target.claim is not None:
                target.tier_reason = (
                    f"{target.claim} claim, shown by a run in the task's environment"
                )
        target.finding_type = (
            "Bug" if "Bug" in (target.finding_type, found.finding_type) else target.finding_type
        )
        target.description = (
            f"{target.description} An execution check confirmed it: {found.title.rstrip('.')}."
        )
    return merged + extra
