"""Differences between two runs of one protocol."""

from __future__ import annotations

from typing import Any

from metaeval.protocols.audit.findings import SEVERITY_ORDER, Finding
from metaeval.view import audit_pages, buildfind_pages, improve_pages
from metaeval.view.runs import Run


def finding_key(f: Finding) -> tuple[str, str, str]:
    """A finding's identity across runs: task, subcategory and the first cited file."""
    return (f.task_id, f.subcategory, f.evidence[0].file if f.evidence else "")


def _by_key(findings: list[Finding]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per key the most severe reported finding and every source that reported the key."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for f in findings:
        if not f.reported:
            continue
        item = out.setdefault(finding_key(f), {"f": f, "sources": set()})
        item["sources"].update(f.sources)
        if SEVERITY_ORDER[f.severity] < SEVERITY_ORDER[item["f"].severity]:
            item["f"] = f
    return out


def audit_diff(a: Run, b: Run) -> dict[str, Any]:
    old = _by_key(audit_pages.load(a).findings)
    new = _by_key(audit_pages.load(b).findings)
    changed = [
        {"key": k, "old": old[k]["f"], "new": new[k]["f"]}
        for k in sorted(old.keys() & new.keys())
        if old[k]["f"].severity != new[k]["f"].severity
    ]
    return {
        "added": [{"key": k, **new[k]} for k in sorted(new.keys() - old.keys())],
        "removed": [{"key": k, **old[k]} for k in sorted(old.keys() - new.keys())],
        "changed": changed,
        "same": len(old.keys() & new.keys()) - len(changed),
    }


def _pairs(old: dict[str, dict], new: dict[str, dict], fields: tuple[str, ...]) -> list[dict]:
    rows = []
    for name in sorted(old.keys() | new.keys()):
        a, b = old.get(name, {}), new.get(name, {})
        rows.append({"name": name, "a": a, "b": b, "fields": fields})
    return rows


def improve_diff(a: Run, b: Run) -> dict[str, Any]:
    old, new = improve_pages.task_rewards(a), improve_pages.task_rewards(b)
    tasks = [
        {"node": k[0], "suite": k[1], "task": k[2], "a": old.get(k), "b": new.get(k)}
        for k in sorted(old.keys() | new.keys())
    ]
    changed = [t for t in tasks if t["a"] != t["b"]]
    return {
        "rows": _pairs(improve_pages.scores(a), improve_pages.scores(b), ("optimize", "held_out")),
        "tasks": changed,
        "tasks_same": len(tasks) - len(changed),
    }


def buildfind_diff(a: Run, b: Run) -> dict[str, Any]:
    return {
        "rows": _pairs(
            buildfind_pages.recovery_by(a), buildfind_pages.recovery_by(b), ("recovery",)
        )
    }


def diff(a: Run, b: Run) -> dict[str, Any]:
    if a.protocol != b.protocol:
        raise ValueError(f"{a.id} is a {a.protocol} run and {b.id} a {b.protocol} run")
    make = {"audit": audit_diff, "improve": improve_diff, "buildfind": buildfind_diff}
    return make[a.protocol](a, b)
