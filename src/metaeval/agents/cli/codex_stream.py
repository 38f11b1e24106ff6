"""Reading ``codex exec --json`` output into a `ParsedStream`.

Stream format (JSON lines; documented in openai/codex ``docs/exec.md`` and defined in
``codex-rs/exec/src/exec_events.rs``):

* ``{"type":"thread.started","thread_id":..}``, ``{"type":"turn.started"}``
* ``{"type":"item.started"|"item.updated"|"item.completed","item":{"id":"item_N","type":..}}``
  with item types ``agent_message`` (text), ``reasoning`` (text), ``command_execution``
  (command, aggregated_output, exit_code, status), ``file_change`` (changes [{path, kind}],
  status), ``mcp_tool_call`` (server, tool, arguments, result {content}, error {message},
  status), ``web_search`` (query), ``todo_list`` (items), ``error`` (message). Early releases
  named the tag ``item_type`` and the message type ``assistant_message``; both are accepted.
* ``{"type":"turn.completed","usage":{"input_tokens","cached_input_tokens","output_tokens"}}``,
  ``{"type":"turn.failed","error":{"message":..}}``, ``{"type":"error","message":..}``.

The ``turn.completed`` usage is the thread's running total (codex reports its total token
usage there), so the last one is taken, not the sum. ``input_tokens`` already includes the
cached ones. A top-level ``error`` alone is not fatal (codex reports stream retries that way);
the run failed if a turn failed, or if errors came and no turn completed.

The older ``{"id":..,"msg":{"type":"exec_command_begin",..}}`` event format (exec_command_begin/
end, patch_apply_begin/end, mcp_tool_call_begin/end, agent_message, agent_reasoning,
token_count, task_complete, error) is parsed too.

Codex reads files through the shell, so each command is classified by what it runs (see
`metaeval.agents.shell_commands.classify_shell_command`): ``cat``/``sed -n``/``nl``/``ls``... are
read, ``rg``/``grep``/``find`` are search, everything else exec; successful single-file reads
get a span.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from metaeval.agents.cli.stream import (
    ParsedStream,
    as_int,
    compact_json,
    iter_json_objects,
    text_of_content,
)
from metaeval.agents.shell_commands import classify_shell_command, shell_read_span, unwrap_shell
from metaeval.agents.types import TranscriptEvent
from metaeval.models.types import Usage


def codex_usage(raw: dict[str, Any]) -> Usage:
    reasoning = as_int(raw.get("reasoning_output_tokens"))
    return Usage(
        input_tokens=as_int(raw.get("input_tokens")),
        output_tokens=as_int(raw.get("output_tokens")),
        cache_read_tokens=as_int(raw.get("cached_input_tokens")),
        cache_write_tokens=as_int(raw.get("cache_write_input_tokens")),
        reasoning_tokens=reasoning,
    )


def _command_text(command: Any) -> str:
    if isinstance(command, list):
        return unwrap_shell([str(c) for c in command])
    return unwrap_shell(str(command or ""))


class _CodexState:
    def __init__(self) -> None:
        self.out = ParsedStream()
        self.called: set[str] = set()  # call ids whose tool_call was emitted
        self.commands: dict[str, str] = {}  # call id -> command script
        self.turn_completed = False
        self.turn_failed: str | None = None
        self.last_error: str | None = None
        self.last_usage: Usage | None = None

    @property
    def events(self) -> list[TranscriptEvent]:
        return self.out.transcript

    # -- shared emitters -----------------------------------------------------------------

    def command_call(self, call_id: str, command: Any) -> None:
        if call_id in self.called:
            return
        script = _command_text(command)
        self.called.add(call_id)
        self.commands[call_id] = script
        self.events.append(
            TranscriptEvent(
                type="tool_call",
                id=call_id,
                tool="shell",
                kind=classify_shell_command(script),
                arguments={"command": script},
                call_id=call_id,
            )
        )

    def command_result(self, call_id: str, output: str, exit_code: Any) -> None:
        script = self.commands.get(call_id, "")
        span = None
        text = output
        if exit_code in (0, None) and script:
            found = shell_read_span(script, output)
            if found is not None:
                span, text = found
        self.events.append(
            TranscriptEvent(
                type="tool_result",
                id=f"{call_id}:result",
                text=text,
                tool="shell",
                call_id=call_id,
                span=span,
            )
        )

    def call(self, call_id: str, tool: str, kind: Any, arguments: dict[str, Any]) -> None:
        if call_id in self.called:
            return
        self.called.add(call_id)
        self.events.append(
            TranscriptEvent(
                type="tool_call",
                id=call_id,
                tool=tool,
                kind=kind,
                arguments=arguments,
                call_id=call_id,
            )
        )

    def result(self, call_id: str, tool: str, text: str) -> None:
        self.events.append(
            TranscriptEvent(
                type="tool_result", id=f"{call_id}:result", text=text, tool=tool, call_id=call_id
            )
        )

    def message(self, text: str, item_id: str | None = None) -> None:
        self.out.final_text = text
        self.events.append(TranscriptEvent(type="assistant", id=item_id, text=text))

    def error(self, message: str) -> None:
        self.last_error = message
        self.events.append(TranscriptEvent(type="error", text=message))

    # -- current format ------------------------------------------------------------------

    def item(self, phase: str, item: dict[str, Any]) -> None:
        item_id = str(item.get("id") or "")
        itype = item.get("type") or item.get("item_type")
        completed = phase == "item.completed"
        if itype in ("agent_message", "assistant_message"):
            if completed:
                self.message(item.get("text") or "", item_id or None)
        elif itype == "reasoning":
            if completed:
                self.events.append(
                    TranscriptEvent(type="info", id=item_id or None, text=item.get("text") or "")
                )
        elif itype == "command_execution":
            self.command_call(item_id, item.get("command"))
            if completed:
                self.command_result(
                    item_id, item.get("aggregated_output") or "", item.get("exit_code")
                )
        elif itype == "file_change":
            if completed:
                self.file_change(item_id, item)
        elif itype == "mcp_tool_call":
            self.mcp_tool_call(item_id, item, completed)
        elif itype == "web_search":
            if completed:
                self.call(item_id, "web_search", "search", {"query": item.get("query") or ""})
        elif itype == "todo_list":
            if completed:
                self.events.append(
                    TranscriptEvent(
                        type="info", id=item_id or None, text=compact_json(item.get("items"))
                    )
                )
        elif itype == "error":
            if completed:
                self.events.append(TranscriptEvent(type="error", text=item.get("message") or ""))
        elif completed or phase == "item.started":
            self.events.append(TranscriptEvent(type="info", text=f"{phase} {itype}"))

    def file_change(self, item_id: str, item: dict[str, Any]) -> None:
        """A completed ``file_change`` item: an apply_patch call with an empty result."""
        changes = item.get("changes") or []
        self.call(item_id, "apply_patch", "write", {"changes": changes})
        paths = ", ".join(
            f"{c.get('kind')} {c.get('path')}" for c in changes if isinstance(c, dict)
        )
        # codex writes no output for a patch: the status line is the adapter's own
        # summary, so it goes to an info event and the result stays empty (no bytes
        # were retrieved).
        self.result(item_id, "apply_patch", "")
        self.events.append(TranscriptEvent(type="info", text=f"{item.get('status')}: {paths}"))

    def mcp_tool_call(self, item_id: str, item: dict[str, Any], completed: bool) -> None:
        """An ``mcp_tool_call`` item: the call, and once completed its result or error."""
        tool = f"{item.get('server')}.{item.get('tool')}"
        arguments = item.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        self.call(item_id, tool, "other", arguments)
        if completed:
            error = item.get("error")
            result = item.get("result")
            if isinstance(error, dict) and error.get("message"):
                text = str(error["message"])
            elif isinstance(result, dict):
                text = text_of_content(result.get("content"))
            else:
                text = ""
            self.result(item_id, tool, text)

    # -- legacy format -------------------------------------------------------------------

    def legacy(self, msg: dict[str, Any]) -> None:
        mtype = msg.get("type")
        call_id = str(msg.get("call_id") or "")
        if mtype == "session_configured":
            self.out.session_id = msg.get("session_id") or self.out.session_id
            self.events.append(TranscriptEvent(type="system", text=f"model={msg.get('model')}"))
        elif mtype == "agent_message":
            self.message(msg.get("message") or "")
        elif mtype == "agent_reasoning":
            self.events.append(TranscriptEvent(type="info", text=msg.get("text") or ""))
        elif mtype == "exec_command_begin":
            self.command_call(call_id, msg.get("command"))
        elif mtype == "exec_command_end":
            self.command_call(call_id, msg.get("command") or "")
            output = msg.get("aggregated_output")
            if output is None:
                output = (msg.get("stdout") or "") + (msg.get("stderr") or "")
            self.command_result(call_id, output, msg.get("exit_code"))
        elif mtype == "patch_apply_begin":
            self.call(call_id, "apply_patch", "write", {"changes": msg.get("changes") or {}})
        elif mtype == "patch_apply_end":
            self.call(call_id, "apply_patch", "write", {})
            text = (msg.get("stdout") or "") + (msg.get("stderr") or "")
            self.result(call_id, "apply_patch", text)
        elif mtype == "mcp_tool_call_begin":
            inv = msg.get("invocation") or {}
            args = inv.get("arguments")
            tool = f"{inv.get('server')}.{inv.get('tool')}"
            self.call(call_id, tool, "other", args if isinstance(args, dict) else {})
        elif mtype == "mcp_tool_call_end":
            self.legacy_mcp_end(call_id, msg)
        elif mtype == "web_search_end":
            self.call(call_id, "web_search", "search", {"query": msg.get("query") or ""})
        elif mtype == "token_count":
            self.legacy_token_count(msg)
        elif mtype == "task_complete":
            self.turn_completed = True
            last = msg.get("last_agent_message")
            if isinstance(last, str):
                self.out.final_text = last
        elif mtype in ("error", "stream_error"):
            self.error(msg.get("message") or "error")
        elif mtype in (
            "agent_message_delta",
            "agent_reasoning_delta",
            "agent_reasoning_raw_content_delta",
            "exec_command_output_delta",
            "agent_reasoning_section_break",
        ):
            return  # streaming fragments of events that also arrive whole
        else:
            self.events.append(TranscriptEvent(type="info", text=f"{mtype}: {compact_json(msg)}"))

    def legacy_mcp_end(self, call_id: str, msg: dict[str, Any]) -> None:
        """An ``mcp_tool_call_end`` message: the call and its ``Ok`` content or ``Err``."""
        inv = msg.get("invocation") or {}
        tool = f"{inv.get('server')}.{inv.get('tool')}"
        result = msg.get("result") or {}
        if isinstance(result, dict) and "Ok" in result:
            text = text_of_content((result.get("Ok") or {}).get("content"))
        elif isinstance(result, dict) and "Err" in result:
            text = str(result.get("Err"))
        else:
            text = text_of_content(result)
        self.call(call_id, tool, "other", {})
        self.result(call_id, tool, text)

    def legacy_token_count(self, msg: dict[str, Any]) -> None:
        """A ``token_count`` message: the running total (``info.total_token_usage``, or the
        message's own fields in early releases)."""
        info = msg.get("info")
        if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
            self.last_usage = codex_usage(info["total_token_usage"])
        elif "input_tokens" in msg:
            self.last_usage = codex_usage(msg)


def parse_codex_stream(lines: Iterable[str]) -> ParsedStream:
    """Parse ``codex exec --json`` output (current thread/item format, or the older msg one)."""
    state = _CodexState()
    out = state.out
    for lineno, obj, bad in iter_json_objects(lines):
        if bad is not None:
            out.transcript.append(bad)
            continue
        assert obj is not None
        if isinstance(obj.get("msg"), dict):
            state.legacy(obj["msg"])
            continue
        etype = obj.get("type")
        if etype == "thread.started":
            out.session_id = obj.get("thread_id") or out.session_id
            out.transcript.append(
                TranscriptEvent(type="system", text=f"thread {obj.get('thread_id')}")
            )
        elif etype == "turn.started":
            continue
        elif etype in ("item.started", "item.updated", "item.completed"):
            item = obj.get("item")
            if isinstance(item, dict):
                state.item(etype, item)
        elif etype == "turn.completed":
            state.turn_completed = True
            usage = obj.get("usage")
            if isinstance(usage, dict):
                state.last_usage = codex_usage(usage)
        elif etype == "turn.failed":
            error = obj.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            state.turn_failed = str(message or "turn failed")
            out.transcript.append(TranscriptEvent(type="error", text=state.turn_failed))
        elif etype == "error":
            state.error(str(obj.get("message") or "error"))
        elif "prompt" in obj and len(obj) == 1:
            out.transcript.append(TranscriptEvent(type="user", text=str(obj["prompt"])))
        else:
            out.transcript.append(
                TranscriptEvent(type="info", text=f"line {lineno}: {compact_json(obj)}")
            )
    if state.last_usage is not None:
        out.usage = state.last_usage
    if state.turn_failed is not None:
        out.reported_success = False
        out.error = state.turn_failed
    elif state.turn_completed:
        out.reported_success = True
    elif state.last_error is not None:
        out.reported_success = False
        out.error = state.last_error
    return out
