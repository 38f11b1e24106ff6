"""The BenchGuard LLM protocol: one consolidated call per (task, model), parsed into Findings.

`audit_task` renders the definition or execution prompt (fitted to the model's context window
when it is known), asks for the JSON array of findings under the output schema, and parses it.
A reply that is not a JSON array (or an object holding one under "findings") gets one repair
retry; a second unusable reply makes the audit an "audit_failure" (a property of the model,
recorded, not retried). Items that fail validation are repaired where the fix is certain (the
subcategory is authoritative for the category; case and spelling of codes) or kept in
`dropped` with the reason (`findings_parse.py`). Provider errors (`ModelCallError`, other `MetaevalError`) propagate:
they are infrastructure, and the caller retries them on resume.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from metaeval.engine.call_slots import call_slot
from metaeval.models.base import Model
from metaeval.models.types import Message, ModelRequest, ModelResult, Usage
from metaeval.protocols.audit.call_options import PAPER_MAX_TOKENS
from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.findings_parse import (
    FindingsParseError,
    findings_from_items,
    parse_findings_json,
)
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

__all__ = ["ModelAudit", "audit_task", "output_schema_for"]

TRUNCATED_FINISH_REASONS = frozenset({"length", "max_tokens"})
# Providers whose structured-output mode rejects a non-object root (OpenAI's json_schema answers
# 400 "schema must be a JSON Schema of 'type: \"object\"'"); they get {"findings": [...]}.
OBJECT_ROOT_PROVIDERS = frozenset({"openai", "litellm"})

REPAIR_ECHO_CHARS = 1200  # the bad reply is quoted back at most this long


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
    max_tokens: int = PAPER_MAX_TOKENS,
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
    request = ModelRequest(
        model=model.name,
        messages=list(fit.messages),
        json_schema=output_schema_for(model, answer),
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
    )
    results, items, errors = _ask_with_repair(audit, model, request)
    _count_calls(audit, results)
    _take_findings(audit, items, errors)
    return audit


def _take_findings(audit: ModelAudit, items: list[Any] | None, errors: list[str]) -> None:
    """The parsed items as the audit's findings (validated, repaired or dropped), or an
    audit failure when no reply parsed."""
    if items is None:
        audit.status = "audit_failure"
        audit.error = "malformed output after 2 attempts: " + " | ".join(errors)
        return
    if errors:
        audit.notes.append("repair retry used after: " + errors[0])
    findings, dropped, repairs = findings_from_items(
        items, task_id=audit.task_id, source=audit.source, protocol=audit.protocol
    )
    audit.findings, audit.dropped, audit.repairs = findings, dropped, repairs


def _ask_with_repair(
    audit: ModelAudit, model: Model, request: ModelRequest
) -> tuple[list[ModelResult], list[Any] | None, list[str]]:
    """Ask for the findings array; a reply that does not parse gets one repair round (the
    bad reply echoed, clipped, and what was wrong). Returns (the calls' results, the parsed
    items or None, the parse errors). Raw replies and extraction notes go to `audit`."""
    messages = list(request.messages)
    results: list[ModelResult] = []
    errors: list[str] = []
    for attempt in (1, 2):
        with call_slot():  # the run's bound on calls in service (see models.call_slots)
            # provider errors propagate to the caller
            result = model.complete(request.model_copy(update={"messages": messages}))
        results.append(result)
        audit.raw_outputs.append(result.text)
        try:
            items, note = parse_findings_json(result.text)
        except FindingsParseError as exc:
            truncated = result.finish_reason in TRUNCATED_FINISH_REASONS
            error = str(exc)
            if truncated:
                error += (
                    f"; the reply stopped at the output limit (max_tokens {request.max_tokens})"
                )
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
        return results, items, errors
    return results, None, errors


def _count_calls(audit: ModelAudit, results: list[ModelResult]) -> None:
    """The calls' attempts, summed usage and cost, first prompt's tokens and dumps."""
    audit.attempts = len(results)
    usage = Usage()
    for r in results:
        usage = usage + r.usage
    audit.usage = usage
    audit.cost_usd = _sum_cost(results)
    audit.prompt_tokens = results[0].usage.input_tokens
    audit.model_calls = [r.model_dump(mode="json") for r in results]
