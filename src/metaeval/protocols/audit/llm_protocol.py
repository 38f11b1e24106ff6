"""The BenchGuard LLM protocol: one consolidated call per (task, model), parsed into Findings.

`audit_task` renders the definition or execution prompt (fitted to the model's context window
when it is known), asks for the JSON array of findings under the output schema, and parses it.
A reply that is not a JSON array (or an object holding one under "findings") gets one repair
retry; a second unusable reply makes the audit an "audit_failure" (a property of the model,
recorded, not retried). Items that fail validation are repaired where the fix is certain (the
subcategory is authoritative for the category; case and spelling of codes) or kept in
`dropped` with the reason. Provider errors (`ModelCallError`, other `MetaevalError`) propagate:
they are infrastructure, and the caller retries them on resume.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from metaeval.engine.call_slots import call_slot
from metaeval.models.base import Model
from metaeval.models.types import Message, ModelRequest, ModelResult, Usage
from metaeval.protocols.audit.findings import SEVERITY_ORDER, SUBCATEGORIES, Finding
from metaeval.protocols.audit.findings import Protocol as FindingProtocol
from metaeval.protocols.audit.output_schema import (
    DEFAULT_ANSWER,
    AnswerOptions,
    findings_object_schema,
    findings_schema,
)
from metaeval.protocols.audit.prompt_fit import fit_prompt_for_model
from metaeval.protocols.audit.prompt_render import (
    render_repair,
)
from metaeval.protocols.audit.prompts import (
    AuditProtocol,
)
from metaeval.protocols.audit.task_view import LoadedTask

__all__ = [
    "FindingsParseError",
    "ModelAudit",
    "audit_task",
    "findings_from_items",
    "output_schema_for",
    "parse_findings_json",
]

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
TRUNCATED_FINISH_REASONS = frozenset({"length", "max_tokens"})
# Providers whose structured-output mode rejects a non-object root (OpenAI's json_schema answers
# 400 "schema must be a JSON Schema of 'type: \"object\"'"); they get {"findings": [...]}.
OBJECT_ROOT_PROVIDERS = frozenset({"openai", "litellm"})

REPAIR_ECHO_CHARS = 1200  # the bad reply is quoted back at most this long


class FindingsParseError(ValueError):
    """A reply that is not a JSON array of findings (nor an object with a "findings" array)."""


class ModelAudit(BaseModel):
    """The outcome of auditing one task with one model."""

    task_id: str
    source: str  # model name
    protocol: AuditProtocol
    status: Literal["ok", "audit_failure"]
    error: str | None = None
    findings: list[Finding] = Field(default_factory=list)
    dropped: list[dict[str, Any]] = Field(default_factory=list)  # {index, reason, item}
    repairs: list[dict[str, Any]] = Field(default_factory=list)  # {index, field, from, to}
    attempts: int = 0  # model calls made: 1, 2 with a repair retry, 0 if nothing was sent
    usage: Usage = Field(default_factory=Usage)  # summed over attempts
    cost_usd: float | None = 0.0  # summed; None if any attempt's cost is unknown
    prompt_tokens: int = 0  # input tokens of the first attempt
    prompt_chars: int = 0  # characters of the first attempt's messages
    raw_outputs: list[str] = Field(default_factory=list)
    model_calls: list[dict[str, Any]] = Field(default_factory=list)  # ModelResult dumps
    notes: list[str] = Field(default_factory=list)  # prompt shortening, JSON extraction, ...


# ---------------------------------------------------------------------------------------------
# Parsing


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


# ---------------------------------------------------------------------------------------------
# The call


def output_schema_for(
    model: Model, answer: AnswerOptions = DEFAULT_ANSWER
) -> dict[str, Any] | None:
    """The output schema sent to `model`: the findings array itself (the contract), or the
    array wrapped as {"findings": [...]} for providers that need an object at the root. The
    parser accepts both shapes. None when the model reasons before its JSON (free text)."""
    if answer.reasoning:
        return None
    if getattr(model, "provider", "") in OBJECT_ROOT_PROVIDERS:
        return findings_object_schema(answer)
    return findings_schema(answer)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]}\n[... {len(text) - head - tail} characters omitted ...]\n{text[-tail:]}"


def _sum_cost(results: list[ModelResult]) -> float | None:
    total = 0.0
    for r in results:
        if r.cost_usd is None:
            return None
        total += r.cost_usd
    return total


def audit_task(
    task: LoadedTask,
    model: Model,
    *,
    protocol: AuditProtocol = "definition",
    max_tokens: int = 2048,
    seed: int = 0,
    temperature: float = 0.0,
    max_prompt_chars: int | None = None,
    answer: AnswerOptions = DEFAULT_ANSWER,
) -> ModelAudit:
    """Audit `task` with `model` in one consolidated call (plus at most one repair retry).

    `answer` sets the caps asked for and whether the model reasons before its JSON.

    The prompt is fitted to `max_prompt_chars` and to the model's context window when known
    (shortenings are listed in `notes`); a prompt that cannot fit gives an "audit_failure"
    without a call. ModelCallError and other MetaevalError from the provider propagate.
    """
    if protocol not in ("definition", "execution"):
        raise ValueError(f"unknown audit protocol {protocol!r}")
    audit = ModelAudit(task_id=task.task_id, source=model.name, protocol=protocol, status="ok")
    if protocol == "execution" and not task.by_role("agent"):
        audit.notes.append("execution protocol without agent files: the agent section is empty")
    fit = fit_prompt_for_model(
        task,
        model,
        protocol=protocol,
        max_tokens=max_tokens,
        max_prompt_chars=max_prompt_chars,
        answer=answer,
    )
    audit.notes.extend(fit.notes)
    audit.prompt_chars = fit.chars
    if not fit.fits:
        audit.status = "audit_failure"
        size = f"{fit.chars} chars" + (f", {fit.tokens} tokens" if fit.tokens else "")
        audit.error = f"the prompt does not fit the model's context even when shortened ({size})"
        return audit

    messages = list(fit.messages)
    schema = output_schema_for(model, answer)
    results: list[ModelResult] = []
    errors: list[str] = []
    items: list[Any] | None = None
    for attempt in (1, 2):
        request = ModelRequest(
            model=model.name,
            messages=messages,
            json_schema=schema,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
        )
        with call_slot():  # the run's bound on calls in service (see models.call_slots)
            result = model.complete(request)  # provider errors propagate to the caller
        results.append(result)
        audit.raw_outputs.append(result.text)
        try:
            items, note = parse_findings_json(result.text)
        except FindingsParseError as exc:
            truncated = result.finish_reason in TRUNCATED_FINISH_REASONS
            error = str(exc)
            if truncated:
                error += f"; the reply stopped at the output limit (max_tokens {max_tokens})"
            errors.append(f"attempt {attempt}: {error}")
            if attempt == 1:
                messages = [
                    *messages,
                    Message(role="assistant", content=_clip(result.text, REPAIR_ECHO_CHARS)),
                    Message(role="user", content=render_repair(error, truncated=truncated)),
                ]
            continue
        if note:
            audit.notes.append(f"attempt {attempt}: {note}")
        break

    audit.attempts = len(results)
    usage = Usage()
    for r in results:
        usage = usage + r.usage
    audit.usage = usage
    audit.cost_usd = _sum_cost(results)
    audit.prompt_tokens = results[0].usage.input_tokens
    audit.model_calls = [r.model_dump(mode="json") for r in results]
    if items is None:
        audit.status = "audit_failure"
        audit.error = "malformed output after 2 attempts: " + " | ".join(errors)
        return audit
    if errors:
        audit.notes.append("repair retry used after: " + errors[0])
    findings, dropped, repairs = findings_from_items(
        items, task_id=task.task_id, source=model.name, protocol=protocol
    )
    audit.findings, audit.dropped, audit.repairs = findings, dropped, repairs
    return audit
