"""What a finished CLI run's result says: its status from its stream and exit (timeout, ok,
error), how its memory was bounded, and, on the gateway, the gateway's count of tokens and
calls (the CLI's report kept beside)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metaeval.agents.effort import compute_effort
from metaeval.agents.types import AgentResult, AgentStatus, Limits, TranscriptEvent

if TYPE_CHECKING:
    from metaeval.agents.cli.base import CLIAdapter
    from metaeval.agents.cli.stream import ParsedStream


def _tail(text: str, limit: int = 2000) -> str:
    """`text`, or its start and end when longer than `limit` (a CLI's complaint is often the
    first line, before a long usage text)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit // 4
    return text[:head] + " ... " + text[-(limit - head) :]


def stream_outcome(
    name: str,
    parsed: ParsedStream,
    produced: list[str],
    timed_out: bool,
    returncode: int | None,
    stderr: str,
    limits: Limits,
) -> AgentResult:
    """The result of CLI `name`'s run from its parsed stream: a timeout when the harness
    killed it at the limit, else what the CLI reported (its exit code and stderr when it
    reported nothing)."""
    status: AgentStatus
    if timed_out:
        status, error = "timeout", f"{name} timed out after {limits.time_limit_s:g}s"
    elif parsed.reported_success is True:
        status, error = "ok", None
    elif parsed.reported_success is False:
        status = "error"
        error = parsed.error or f"{name} reported failure"
    else:
        status = "error"
        error = parsed.error or f"{name} exited with code {returncode} without reporting a result"
        if returncode not in (0, None) and stderr.strip():
            error += f"; stderr: {_tail(stderr)}"
    steps = parsed.num_turns
    if steps is None:
        steps = sum(1 for e in parsed.transcript if e.type == "tool_call")
    return AgentResult(
        status=status,
        error=error,
        submission=parsed.final_text,
        files_produced=produced,
        usage=parsed.usage,
        cost_usd=parsed.cost_usd,
        effort=compute_effort(parsed.transcript),
        steps=steps,
        time_limit_s=limits.time_limit_s,
        transcript=parsed.transcript,
    )


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
    dropped = [r for r in records if dropped_by_client(r)]
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
    elif dropped and result.status == "error":
        update["infra_error"] = True
        update["error"] = (
            f"{result.error}; transport: the CLI gave up on a request the gateway was still "
            f"answering ({len(dropped)} of {len(records)} requests; the model was slower than "
            "the CLI waits)"
        )
    return result.model_copy(update=update)


def dropped_by_client(record: dict[str, Any]) -> bool:
    """A request its client stopped waiting for: still unanswered, or answered to a closed
    connection (499). When such a run fails, the failure is the link's, not the agent's: it
    is an infrastructure error, retried like one."""
    if record.get("kind") not in ("pending", "completion", "error"):
        return False
    return record.get("status") == 499 or "status" not in record
