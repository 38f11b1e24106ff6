"""What a finished CLI run's result says beyond its own stream: how its memory was bounded,
and, on the gateway, the gateway's count of tokens and calls (the CLI's report kept beside)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metaeval.agents.effort import compute_effort
from metaeval.agents.types import AgentResult, TranscriptEvent

if TYPE_CHECKING:
    from metaeval.agents.cli.base import CLIAdapter


def memory_outcome(out: AgentResult, result: Any, adapter: CLIAdapter) -> AgentResult:
    """Note how memory was bounded; a run the cgroup's OOM killer ended is an error with
    stop reason ``out_of_memory`` (the CLI's own failure, not the harness's)."""
    note = getattr(result, "memory_note", None)
    transcript = list(out.transcript)
    if note:
        transcript.append(TranscriptEvent(type="info", text=f"memory: {note}"))
    update: dict[str, Any] = {"transcript": transcript}
    hits = getattr(result, "memory_cap_hits", 0) or 0
    if hits and not getattr(result, "oom_killed", False):
        pressure = f"it reached its memory cap ({adapter.memory_cgroup_mb} MiB) {hits} times"
        transcript.append(TranscriptEvent(type="info", text=f"memory: {pressure}"))
        if out.status == "timeout":  # reclaim near the cap can stall a run until its deadline
            update["error"] = f"{out.error} ({pressure}: it may have been starved of memory)"
    if getattr(result, "oom_killed", False):
        update.update(
            status="error",
            stop_reason="out_of_memory",
            infra_error=False,
            error=(
                f"{adapter.name} was killed for using more than its memory cap "
                f"({adapter.memory_cgroup_mb} MiB, cgroup)"
            ),
        )
    return out.model_copy(update=update)


def delivered_results(records: list[dict[str, Any]]) -> dict[str, str]:
    """Tool call id -> the tool result text a CLI sent its model, from gateway records."""
    delivered: dict[str, str] = {}
    for record in records:
        request = record.get("request")
        for message in getattr(request, "messages", None) or []:
            call_id = message.tool_call_id
            if message.role == "tool" and call_id and call_id not in delivered:
                delivered[call_id] = message.content
    return delivered


def settle_with_gateway(result: AgentResult, link: Any, adapter: CLIAdapter) -> AgentResult:
    """The gateway's count becomes the run's usage; the CLI's own report is kept beside it,
    and a disagreement is written into the transcript."""
    records = link.gateway.exchanges.for_client(link.tag)
    completions = [r for r in records if r.get("kind") == "completion"]
    counted = link.gateway.exchanges.usage(link.tag)
    reported = result.usage
    transcript = adapter.fill_from_gateway(list(result.transcript), delivered_results(records))
    if counted != reported:
        transcript.append(
            TranscriptEvent(
                type="info",
                text=(
                    f"token usage disagrees: gateway counted {counted.model_dump()}, "
                    f"CLI reported {reported.model_dump()}"
                ),
            )
        )
    calls = [
        {
            "seq": r.get("seq"),
            "api": r.get("api"),
            "usage": r.get("usage"),
            "usage_source": r.get("usage_source"),
            "model_s": r.get("model_s"),
            "status": r.get("status"),
        }
        for r in completions
    ]
    errors = [r for r in records if r.get("kind") == "error" and r.get("status") == 500]
    update: dict[str, Any] = {
        "usage": counted,
        "cli_usage": reported,
        "transcript": transcript,
        "effort": compute_effort(transcript),
        "model_calls": calls,
    }
    if errors and result.status != "ok":
        update["infra_error"] = True
        update["error"] = f"{result.error}; gateway: {errors[-1].get('error')}"
    return result.model_copy(update=update)
