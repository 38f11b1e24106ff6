"""One model's cell: the LLM protocol on one task, its findings verified against the task.

A model whose output stays malformed is a final audit failure recorded in the cell
(``audit_failure: true``); a provider that fails (after retries) raises, and the engine's one
rule (`metaeval.engine.cells.classify`) sorts it: transient (unreachable, 5xx, rate limit) is
an infrastructure error retried on resume, recorded with the error's own message; anything
else a final failure.
"""

from __future__ import annotations

import json
from typing import Any

from metaeval.models.base import Model
from metaeval.protocols.audit.evidence import verify_evidence
from metaeval.protocols.audit.llm_protocol import audit_task
from metaeval.protocols.audit.output_schema import DEFAULT_ANSWER, AnswerOptions
from metaeval.protocols.audit.prompts import AuditProtocol
from metaeval.protocols.audit.records import ModelCell
from metaeval.protocols.audit.task_view import LoadedTask
from metaeval.records.blobs import BlobStore

Cell = tuple[dict[str, Any], list[dict[str, Any]]]


def model_cell(
    task: LoadedTask,
    model: Model,
    base: dict[str, Any],
    *,
    protocol: AuditProtocol,
    max_tokens: int,
    blobs: BlobStore,
    temperature: float = 0.0,
    answer: AnswerOptions = DEFAULT_ANSWER,
) -> Cell:
    """The cell record and findings of `model` auditing the loaded `task`."""
    audit = audit_task(
        task,
        model,
        protocol=protocol,
        max_tokens=max_tokens,
        temperature=temperature,
        answer=answer,
    )
    findings = [verify_evidence(f, task) for f in audit.findings]
    cell = ModelCell(
        **base,
        status="ok" if audit.status == "ok" else "error",
        audit_failure=audit.status != "ok",
        infra_error=False,
        error=audit.error,
        protocol=audit.protocol,
        attempts=audit.attempts,
        usage=audit.usage.model_dump(),
        cost_usd=audit.cost_usd,
        prompt_tokens=audit.prompt_tokens,
        n_findings=len(findings),
        dropped=audit.dropped,
        notes=getattr(audit, "notes", []),
        cuts=task.cuts,
        # durable before the cell record is (the run's writer syncs them first)
        raw_outputs_blob=blobs.put("\n\n-----\n\n".join(audit.raw_outputs), defer_sync=True),
        model_calls_blob=blobs.put(_jsonl(audit.model_calls), defer_sync=True),
    ).as_record()
    return cell, [f.model_dump(mode="json") for f in findings]


def _jsonl(items: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(item, sort_keys=True, default=str) for item in items)
