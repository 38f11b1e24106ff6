"""A model's reply as findings: the JSON array found in it, each item validated as a Finding.

`parse_findings_json` takes the array from the reply (a JSON array, or an object holding one
under "findings"; markdown fences and prose around it tolerated). `findings_from_items`
validates the items, repairing what is certain (the subcategory is authoritative for the
category; case and spelling of codes; a "file:12-14" evidence string) and dropping the rest
with the reason.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from metaeval.protocols.audit.findings import SEVERITY_ORDER, SUBCATEGORIES, Finding
from metaeval.protocols.audit.findings import Protocol as FindingProtocol

MODEL_FIELDS = (
    "category",
    "subcategory",
    "severity",
    "finding_type",
    "title",
    "description",
    "evidence",
    "recommendation",
    "confidence",
)


class FindingsParseError(ValueError):
    """A reply that is not a JSON array of findings (nor an object with a "findings" array)."""


def _candidates(text: str) -> list[tuple[str, str | None]]:
    """JSON candidates in `text`: the whole reply, its fenced blocks (last first), the
    outermost [..] / {..}."""
    out: list[tuple[str, str | None]] = [(text, None)]
    fences = re.findall(r"```[a-zA-Z]*\s*\n?(.*?)```", text, re.S)
    for fence in dict.fromkeys(fences[::-1]):  # the last first: reasoning ends with its JSON
        out.append((fence.strip(), "JSON taken from a markdown code fence"))
    for open_, close in (("[", "]"), ("{", "}")):
        i, j = text.find(open_), text.rfind(close)
        if 0 <= i < j and (i > 0 or j < len(text) - 1):
            out.append((text[i : j + 1], "JSON extracted from surrounding text"))
    return out


def parse_findings_json(text: str) -> tuple[list[Any], str | None]:
    """The findings array in a reply, and a note when it had to be extracted from around.

    Accepts a JSON array, or an object whose "findings" value is an array; tolerates markdown
    fences and prose around the JSON. Raises FindingsParseError naming what was wrong.
    """
    stripped = text.strip()
    if not stripped:
        raise FindingsParseError("the reply was empty")
    first_error: str | None = None
    for candidate, note in _candidates(stripped):
        try:
            value = json.loads(candidate, strict=False)
        except json.JSONDecodeError as exc:
            if first_error is None:
                first_error = f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            continue
        if isinstance(value, list):
            return value, note
        if isinstance(value, dict) and isinstance(value.get("findings"), list):
            return value["findings"], note or 'findings taken from the "findings" key'
        # Valid JSON of the wrong shape: say so (never dig arrays out of other objects).
        shape = (
            f"an object with keys {sorted(value)[:10]}"
            if isinstance(value, dict)
            else f"a JSON {type(value).__name__}"
        )
        raise FindingsParseError(
            f'expected a JSON array of findings (or an object with a "findings" array), got {shape}'
        )
    raise FindingsParseError(first_error or "no JSON found in the reply")


def _code(value: Any) -> str:
    return re.sub(r"[\s_]+", "-", str(value).strip().upper())


def _canonical(value: Any, allowed: list[str] | tuple[str, ...]) -> Any:
    if not isinstance(value, str):
        return value
    for option in allowed:
        if value.strip().lower() == option.lower():
            return option
    return value


_EVIDENCE_STRING = re.compile(r"^\s*(?P<file>[^:\s]+):(?P<start>\d+)(?:-(?P<end>\d+))?\s*$")


def _normalize_item(
    item: dict[str, Any], index: int, repairs: list[dict[str, Any]]
) -> dict[str, Any]:
    def repaired(name: str, old: Any, new: Any) -> None:
        repairs.append({"index": index, "field": name, "from": old, "to": new})

    data = {k: item[k] for k in MODEL_FIELDS if k in item}
    extra = sorted(k for k in item if k not in MODEL_FIELDS)
    if extra:
        repaired("(ignored keys)", extra, None)

    sub = data.get("subcategory")
    if isinstance(sub, str):
        code = _code(sub)
        if code not in SUBCATEGORIES and data.get("category") is not None:
            prefixed = f"{_code(data['category'])}-{code}"
            if prefixed in SUBCATEGORIES:
                code = prefixed
        if code in SUBCATEGORIES and code != sub:
            repaired("subcategory", sub, code)
            data["subcategory"] = code
    sub = data.get("subcategory")
    if isinstance(sub, str) and sub in SUBCATEGORIES:
        expected = SUBCATEGORIES[sub]  # the subcategory is authoritative
        if data.get("category") != expected:
            repaired("category", data.get("category"), expected)
            data["category"] = expected

    for name, allowed in (("severity", list(SEVERITY_ORDER)), ("finding_type", ["Bug", "Warning"])):
        if name in data:
            new = _canonical(data[name], allowed)
            if new != data[name]:
                repaired(name, data[name], new)
                data[name] = new

    evidence = data.get("evidence")
    if evidence is None:
        data["evidence"] = []
    elif isinstance(evidence, dict | str):
        evidence = [evidence]
        data["evidence"] = evidence
    if isinstance(data["evidence"], list):
        items = []
        for e in data["evidence"]:
            match = _EVIDENCE_STRING.match(e) if isinstance(e, str) else None
            if match:
                new = {
                    "file": match["file"],
                    "line_start": int(match["start"]),
                    "line_end": int(match["end"] or match["start"]),
                }
                repaired("evidence", e, new)
                e = new
            items.append(e)
        data["evidence"] = items
    if data.get("recommendation") is None:
        data["recommendation"] = ""
    return data


def _validation_reason(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "item"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def findings_from_items(
    items: list[Any], *, task_id: str, source: str, protocol: FindingProtocol
) -> tuple[list[Finding], list[dict[str, Any]], list[dict[str, Any]]]:
    """Validate array items as Findings: (findings, dropped, repairs).

    Only the model-output fields are taken from an item; task_id, source and protocol are
    ours. Codes are normalised (case, "_" for "-", a missing category prefix), the category is
    set from the subcategory, a single evidence object or "file:12-14" string becomes a list.
    Items still invalid are returned in `dropped` as {index, reason, item}.
    """
    findings: list[Finding] = []
    dropped: list[dict[str, Any]] = []
    repairs: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            reason = f"item is a JSON {type(item).__name__}, not an object"
            dropped.append({"index": index, "reason": reason, "item": item})
            continue
        item_repairs: list[dict[str, Any]] = []
        data = _normalize_item(item, index, item_repairs)
        try:
            # A model's finding is never `executed` on its own, whatever it cites (a log line
            # it quotes proves nothing ran): only an execution check's finding folded into
            # it (`dedupe.merge_check_findings`) promotes a finding to that tier.
            finding = Finding(
                task_id=task_id,
                source=source,
                protocol=protocol,
                evidence_tier="self-contained",
                **data,
            )
        except ValidationError as exc:
            dropped.append({"index": index, "reason": _validation_reason(exc), "item": item})
            continue
        except (TypeError, ValueError) as exc:
            dropped.append({"index": index, "reason": str(exc), "item": item})
            continue
        findings.append(finding)
        repairs.extend(item_repairs)
    return findings, dropped, repairs
