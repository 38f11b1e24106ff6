"""Reading a mini-swe-agent trajectory (``mini -o traj.json``) into a `ParsedStream`.

mini-swe-agent prints a rich console UI, not events, so its adapter reads the trajectory
file it saves (``--output``; written by ``DefaultAgent.save`` / ``run/utils/save.py`` in
SWE-agent/mini-swe-agent)::

    {"trajectory_format": "mini-swe-agent-1" | "mini-swe-agent-1.1",
     "info": {"exit_status": "Submitted" | "LimitsExceeded" | ..., "submission": str,
              "model_stats": {"instance_cost": float, "api_calls": int}, ...},
     "messages": [{"role": "system" | "user" | "assistant" | "tool" | "exit", "content": ...,
                   "extra": {...}}, ...]}

Actions: in text mode an assistant message holds exactly one fenced shell block (```bash in
v1, ```mswea_bash_command in v2); v2 also records them in ``extra.actions`` and, in tool-call
mode, as ``tool_calls`` to the single ``bash`` tool. An assistant message with zero or several
blocks is a format error and has no action. The observation follows as a ``user`` message
(text mode) or a ``tool`` message (tool-call mode), rendered like
``<returncode>0</returncode>\\n<output>\\n...</output>``; the part inside ``<output>`` is the
tool result. The final ``exit`` message (v2) or ``info`` carries exit status and submission.

Each command is classified like codex's (`metaeval.agents.shell_commands.classify_shell_command`);
the ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` command is kind ``submit``. Usage is summed
over assistant messages' ``extra.response.usage`` when the model class recorded it (v2); v1
trajectories carry only cost and call count, so their token usage stays 0. A reply without
exactly one action has its response stored on the format-error message that follows it; that
usage is counted too.
"""

from __future__ import annotations

import json
import re
from typing import Any

from metaeval.agents.cli.stream import ParsedStream, as_float, as_int, text_of_content
from metaeval.agents.shell_commands import classify_shell_command, shell_read_span
from metaeval.agents.types import TranscriptEvent
from metaeval.models.types import Usage

ACTION_PATTERNS = (
    re.compile(r"```mswea_bash_command\s*\n(.*?)\n```", re.DOTALL),
    re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL),
)
RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
OUTPUT = re.compile(r"<output>\n(.*)</output>", re.DOTALL)


def mini_usage(raw: Any) -> Usage:
    """Usage of one model response (chat-completions or responses-API field names)."""
    if not isinstance(raw, dict):
        return Usage()
    prompt_details = raw.get("prompt_tokens_details") or raw.get("input_tokens_details") or {}
    output_details = raw.get("completion_tokens_details") or raw.get("output_tokens_details") or {}
    cached = as_int(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else 0
    cached = cached or as_int(raw.get("cache_read_input_tokens"))
    reasoning = (
        as_int(output_details.get("reasoning_tokens")) if isinstance(output_details, dict) else 0
    )
    return Usage(
        input_tokens=as_int(raw.get("prompt_tokens", raw.get("input_tokens"))),
        output_tokens=as_int(raw.get("completion_tokens", raw.get("output_tokens"))),
        cache_read_tokens=cached,
        cache_write_tokens=as_int(raw.get("cache_creation_input_tokens")),
        reasoning_tokens=reasoning,
    )


def _tool_calls(msg: dict[str, Any]) -> list[tuple[str | None, str | None, str | None]]:
    """(id, command, raw argument text) of each ``bash`` tool call of a message."""
    calls = []
    for call in msg.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        fn = call.get("function") or {}
        arguments = fn.get("arguments")
        raw = arguments if isinstance(arguments, str) else None
        if raw is not None:
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError:
                arguments = {}
        command = arguments.get("command") if isinstance(arguments, dict) else None
        call_id = call.get("id")
        calls.append(
            (
                str(call_id) if call_id else None,
                str(command) if command is not None else None,
                raw,
            )
        )
    return calls


def _actions(msg: dict[str, Any], content: str) -> list[tuple[str | None, str, str | None]]:
    """(tool_call_id, command, raw argument text) of each action in an assistant message.

    ``extra.actions`` (v2) wins; then ``tool_calls``; then exactly one fenced shell block.
    """
    extra = msg.get("extra")
    if not isinstance(extra, dict):
        extra = {}
    calls = _tool_calls(msg)
    raw_by_id = {call_id: raw for call_id, _, raw in calls if call_id}
    if isinstance(extra.get("actions"), list):
        out = []
        for action in extra["actions"]:
            if isinstance(action, dict) and "command" in action:
                call_id = action.get("tool_call_id")
                call_id = str(call_id) if call_id else None
                out.append((call_id, str(action["command"]), raw_by_id.get(call_id or "")))
        return out
    if calls:
        return [(call_id, command, raw) for call_id, command, raw in calls if command is not None]
    for pattern in ACTION_PATTERNS:
        found = pattern.findall(content)
        if found:
            return [(None, found[0].strip(), None)] if len(found) == 1 else []
    return []


def _responses_message(msg: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Text and function calls of a responses-API message (``"object": "response"``)."""
    texts, calls = [], []
    for item in msg.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts.append(text_of_content(item.get("content")))
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item.get("call_id") or item.get("id"),
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                }
            )
    return "\n".join(t for t in texts if t), calls


def parse_mini_trajectory(data: dict[str, Any]) -> ParsedStream:
    """Parse a mini-swe-agent trajectory (``mini -o traj.json``)."""
    out = ParsedStream()
    events = out.transcript
    if not isinstance(data, dict):
        events.append(TranscriptEvent(type="error", text="trajectory is not a JSON object"))
        return out
    info = data.get("info")
    if not isinstance(info, dict):
        info = {}
    messages = data.get("messages")
    if not isinstance(messages, list):
        messages = []
    pending: list[tuple[str, str]] = []  # (call id, command) awaiting an observation
    usage = Usage()
    t0: float | None = None
    exit_extra: dict[str, Any] = {}

    for index, msg in enumerate(messages):
        if not isinstance(msg, dict):
            events.append(TranscriptEvent(type="error", text=f"message {index}: not an object"))
            continue
        extra = msg.get("extra")
        if not isinstance(extra, dict):
            extra = {}
        t0, t = _message_time(extra, t0)
        role = msg.get("role")
        content = text_of_content(msg.get("content"))
        response = extra.get("response")
        if role != "assistant" and isinstance(response, dict) and "usage" in response:
            # mini 2.x keeps the response of a malformed reply on its format-error message
            usage = usage + mini_usage(response.get("usage"))
        role, content, msg = _as_chat_message(role, content, msg)

        if role == "system":
            events.append(TranscriptEvent(type="system", id=f"message{index}", text=content, t=t))
        elif role == "assistant":
            used, pending = _assistant_turn(msg, extra, content, index, t, events)
            usage = usage + used
        elif role == "tool" or (role == "user" and pending):
            call_id, command = _answered_call(role, msg, pending, index)
            events.append(_observation(call_id, command, content, extra, t))
        elif role == "user":
            events.append(TranscriptEvent(type="user", id=f"message{index}", text=content, t=t))
        elif role == "exit":
            exit_extra = extra
            note = f"exit {extra.get('exit_status')}: {content}"
            events.append(TranscriptEvent(type="info", id=f"message{index}", text=note, t=t))
        else:
            events.append(
                TranscriptEvent(type="info", id=f"message{index}", text=f"{role}: {content}", t=t)
            )

    _finish(out, info, exit_extra, usage)
    return out


def _message_time(extra: dict[str, Any], t0: float | None) -> tuple[float | None, float | None]:
    """(t0, t): the first timestamp seen, and this message's seconds since it (None when the
    message or the trajectory has no timestamp)."""
    stamp = as_float(extra.get("timestamp"))
    if t0 is None and stamp is not None:
        t0 = stamp
    t = round(stamp - t0, 3) if stamp is not None and t0 is not None else None
    return t0, t


def _assistant_turn(
    msg: dict[str, Any],
    extra: dict[str, Any],
    content: str,
    index: int,
    t: float | None,
    events: list[TranscriptEvent],
) -> tuple[Usage, list[tuple[str, str]]]:
    """An assistant message: its text and one tool call per action go to `events`; returns
    its usage and the (call id, command) pairs now awaiting an observation."""
    response = extra.get("response")
    usage = Usage()
    if isinstance(response, dict) and "usage" in response:
        usage = mini_usage(response.get("usage"))
    elif "usage" in msg:
        usage = mini_usage(msg.get("usage"))
    if content:
        events.append(TranscriptEvent(type="assistant", id=f"message{index}", text=content, t=t))
    pending = []
    for k, (tool_call_id, command, raw) in enumerate(_actions(msg, content)):
        call_id = str(tool_call_id) if tool_call_id else f"message{index}:action{k}"
        pending.append((call_id, command))
        events.append(_action_event(call_id, command, raw, t))
    return usage, pending


def _as_chat_message(
    role: Any, content: str, msg: dict[str, Any]
) -> tuple[Any, str, dict[str, Any]]:
    """(role, content, message) of a Responses-API item in a mini 2.x trajectory, as a chat
    message: a response is the assistant's, a function call's output a tool message."""
    if role is None and msg.get("object") == "response":
        content, calls = _responses_message(msg)
        return "assistant", content, {**msg, "tool_calls": calls}
    if role is None and msg.get("type") == "function_call_output":
        msg = {**msg, "tool_call_id": msg.get("call_id")}
        return "tool", text_of_content(msg.get("output")), msg
    return role, content, msg


def _action_event(call_id: str, command: str, raw: str | None, t: float | None) -> TranscriptEvent:
    """The tool call of one bash action."""
    return TranscriptEvent(
        type="tool_call",
        id=call_id,
        tool="bash",
        kind=classify_shell_command(command),
        arguments={"command": command},
        arguments_json=raw,
        call_id=call_id,
        t=t,
    )


def _answered_call(
    role: Any, msg: dict[str, Any], pending: list[tuple[str, str]], index: int
) -> tuple[str, str]:
    """(call id, command) an observation answers: the named tool call, else the oldest one
    still pending (taken off `pending`), else one named after the message."""
    if role == "tool" and msg.get("tool_call_id"):
        wanted = str(msg.get("tool_call_id"))
        match = next((p for p in pending if p[0] == wanted), (wanted, ""))
    elif pending:
        match = pending[0]
    else:
        match = (f"message{index}", "")
    if match in pending:
        pending.remove(match)
    return match


def _finish(
    out: ParsedStream, info: dict[str, Any], exit_extra: dict[str, Any], usage: Usage
) -> None:
    """Cost, turns, usage, the submission and how the run ended, from the trajectory's info."""
    stats = info.get("model_stats")
    if not isinstance(stats, dict):
        stats = {}
    out.cost_usd = as_float(stats.get("instance_cost"))
    if stats.get("api_calls") is not None:
        out.num_turns = as_int(stats.get("api_calls"))
    out.usage = usage
    exit_status = info.get("exit_status") or exit_extra.get("exit_status")
    submission = info.get("submission")
    if submission is None:
        submission = exit_extra.get("submission")
    out.final_text = submission if isinstance(submission, str) else None
    if exit_status == "Submitted":
        out.reported_success = True
    elif exit_status:
        out.reported_success = False
        detail = submission.strip() if isinstance(submission, str) else ""
        traceback = info.get("traceback")
        if not detail and isinstance(traceback, str) and traceback.strip():
            detail = traceback.strip().splitlines()[-1]
        out.error = f"{exit_status}: {detail}" if detail else str(exit_status)
        out.transcript.append(TranscriptEvent(type="error", text=out.error))


def _observation(
    call_id: str, command: str, content: str, extra: dict[str, Any], t: float | None
) -> TranscriptEvent:
    """The tool result of one observation message: its ``<output>`` part, with a span if a
    successful single-file read."""
    raw = extra.get("raw_output")
    observed = _json_observation(content)
    if observed is not None:  # mini 2.x: {"returncode": 0, "output": ...}
        returncode, text = observed
        is_output = True
    else:
        match = OUTPUT.search(content)
        text = match.group(1) if match else content
        code_match = RETURNCODE.search(content)
        returncode = int(code_match.group(1)) if code_match else extra.get("returncode")
        is_output = match is not None
    if isinstance(raw, str):  # mini 2.x keeps the command's exact output here
        text, is_output = raw, True
    if returncode is None:
        returncode = extra.get("returncode")
    span = None
    if is_output and returncode == 0 and command:
        found = shell_read_span(command, text)
        if found is not None:
            span, text = found
    return TranscriptEvent(
        type="tool_result",
        id=f"{call_id}:result",
        text=text,
        tool="bash",
        call_id=call_id,
        span=span,
        raw_bytes=len(raw.encode("utf-8")) if isinstance(raw, str) else None,
        t=t,
    )


def _json_observation(content: str) -> tuple[int | None, str] | None:
    """(returncode, output) of a JSON observation, else None."""
    if not content.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(content)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("output"), str):
        return None
    code = data.get("returncode")
    return (code if isinstance(code, int) else None), data["output"]
