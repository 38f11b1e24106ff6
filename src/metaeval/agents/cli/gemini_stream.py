"""Reading Gemini CLI's output: its ``stream-json`` lines (and the ``json`` object) into a
`ParsedStream`, and tool results the stream leaves empty filled from what the gateway saw.

Stream format (JSON lines; defined in google-gemini/gemini-cli
``packages/core/src/output/types.ts``, documented in ``docs/cli/headless.md``):

* ``{"type":"init","session_id":..,"model":..,"timestamp":..}``
* ``{"type":"message","role":"user"|"assistant","content":..,"delta":true?}``; assistant text
  arrives in delta chunks, joined here into one assistant event per run of chunks.
* ``{"type":"tool_use","tool_name":..,"tool_id":..,"parameters":{..}}``
* ``{"type":"tool_result","tool_id":..,"status":"success"|"error","output":..,
  "error":{"type","message"}}``
* ``{"type":"error","severity":"warning"|"error","message":..}``
* ``{"type":"result","status":"success"|"error","error":{..},"stats":{"total_tokens",
  "input_tokens","output_tokens","cached","input","duration_ms","tool_calls"}}``

Limitation: a ``tool_result``'s ``output`` is the tool's *display* string (gemini-cli emits
``resultDisplay``), not the content given to the model; for ``read_file`` it is usually empty.
So retrieval effort of ``read_file`` is undercounted by design of the stream. For
``run_shell_command`` the display is the command's output (trailing newline trimmed), so a
single-file read command gets a span like the other CLIs' shell reads.

Usage from stream stats: ``input_tokens`` is the prompt count (cached included; ``cached`` is
its cached part); ``output_tokens`` counts candidates only, so reasoning tokens are inferred as
``total_tokens - input_tokens - output_tokens`` (Gemini's total also holds thoughts) and added
to the output. The non-streaming ``--output-format json`` object (``response``,
``stats.models.<name>.tokens`` {prompt, candidates, cached, thoughts, tool, total}, ``error``)
is parsed by `parse_gemini_json`, which reads thoughts directly. Gemini CLI 0.61's stream
result holds ``stats.models.<name>`` with the flat fields (``input_tokens``,
``output_tokens``, ``cached``, ...) instead; both shapes are read.

``run_shell_command`` is classified by its command, like the other CLIs' shell tools.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from metaeval.agents.cli.stream import ParsedStream, as_int, compact_json, iter_json_objects
from metaeval.agents.shell_commands import classify_shell_command, shell_read_span
from metaeval.agents.types import Span, ToolKind, TranscriptEvent
from metaeval.models.types import Usage

GEMINI_TOOL_KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "read_many_files": "read",
    "list_directory": "read",
    "ls": "read",
    "web_fetch": "read",
    "search_file_content": "search",
    "grep": "search",
    "grep_search": "search",
    "glob": "search",
    "google_web_search": "search",
    "write_file": "write",
    "replace": "write",
    "edit": "write",
    "run_shell_command": "exec",
}


def gemini_tool_kind(name: str, params: dict[str, Any] | None = None) -> ToolKind:
    if name == "run_shell_command" and params and isinstance(params.get("command"), str):
        return classify_shell_command(params["command"])
    return GEMINI_TOOL_KINDS.get(name, "other")


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def stream_stats_usage(stats: dict[str, Any]) -> Usage:
    prompt = as_int(stats.get("input_tokens"))
    candidates = as_int(stats.get("output_tokens"))
    total = as_int(stats.get("total_tokens"))
    reasoning = max(0, total - prompt - candidates)
    return Usage(
        input_tokens=prompt,
        output_tokens=candidates + reasoning,
        cache_read_tokens=as_int(stats.get("cached")),
        reasoning_tokens=reasoning,
    )


def models_usage(stats: dict[str, Any]) -> Usage:
    total = Usage()
    models = stats.get("models")
    if not isinstance(models, dict):
        return total
    for metrics in models.values():
        if not isinstance(metrics, dict):
            continue
        tokens = metrics.get("tokens")
        if not isinstance(tokens, dict):
            if "input_tokens" in metrics or "output_tokens" in metrics:
                total = total + stream_stats_usage(metrics)  # 0.61: flat per-model fields
            continue
        thoughts = as_int(tokens.get("thoughts"))
        total = total + Usage(
            input_tokens=as_int(tokens.get("prompt")) + as_int(tokens.get("tool")),
            output_tokens=as_int(tokens.get("candidates")) + thoughts,
            cache_read_tokens=as_int(tokens.get("cached")),
            reasoning_tokens=thoughts,
        )
    return total


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message") or ""
        etype = error.get("type")
        return f"{etype}: {message}" if etype else str(message)
    return str(error)


def parse_gemini_json(data: dict[str, Any]) -> ParsedStream:
    """Parse the single object of ``gemini -p ... --output-format json``."""
    out = ParsedStream(session_id=data.get("session_id"))
    stats = data.get("stats")
    if isinstance(stats, dict):
        out.usage = models_usage(stats)
    response = data.get("response")
    if isinstance(response, str):
        out.final_text = response
        out.transcript.append(TranscriptEvent(type="assistant", text=response))
    error = data.get("error")
    if error:
        out.error = _error_text(error)
        out.reported_success = False
        out.transcript.append(TranscriptEvent(type="error", text=out.error))
    else:
        out.reported_success = isinstance(response, str)
    return out


def parse_gemini_stream(lines: Iterable[str]) -> ParsedStream:
    """Parse ``gemini --output-format stream-json`` output (or the ``json`` format's object)."""
    lines = list(lines)
    joined = "\n".join(lines).strip()
    if joined.startswith("{"):
        try:
            whole = json.loads(joined)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, dict) and "type" not in whole:
            return parse_gemini_json(whole)

    stream = _GeminiStream()
    for lineno, obj, bad in iter_json_objects(lines):
        if bad is not None:
            stream.flush()
            stream.events.append(bad)
            continue
        assert obj is not None
        stream.read(lineno, obj)
    stream.flush()
    stream.out.final_text = stream.last_assistant
    return stream.out


class _GeminiStream:
    """The state of one stream being read: the transcript so far, assistant deltas not yet
    joined into one message, and each tool call's name and shell command by id."""

    def __init__(self) -> None:
        self.out = ParsedStream()
        self.events = self.out.transcript
        self.tools: dict[str, str] = {}
        self.commands: dict[str, str] = {}  # tool id -> shell command of run_shell_command
        self.pending: list[str] = []  # assistant delta chunks not yet flushed
        self.pending_t: float | None = None
        self.t0: float | None = None
        self.last_assistant: str | None = None
        self.handlers: dict[str, Callable[[dict[str, Any], float | None], None]] = {
            "init": self.init,
            "message": self.user_message,
            "tool_use": self.tool_use,
            "tool_result": self.tool_result,
            "error": self.error,
            "result": self.result,
        }

    def rel(self, ts: float | None) -> float | None:
        return None if ts is None or self.t0 is None else round(ts - self.t0, 3)

    def flush(self) -> None:
        if self.pending:
            text = "".join(self.pending)
            self.last_assistant = text
            self.events.append(
                TranscriptEvent(type="assistant", text=text, t=self.rel(self.pending_t))
            )
        self.pending = []
        self.pending_t = None

    def read(self, lineno: int, obj: dict[str, Any]) -> None:
        etype = obj.get("type")
        ts = _timestamp(obj.get("timestamp"))
        if self.t0 is None and ts is not None:
            self.t0 = ts
        if etype == "message" and obj.get("role") == "assistant":
            if not obj.get("delta"):
                self.flush()
            if not self.pending:
                self.pending_t = ts
            self.pending.append(str(obj.get("content") or ""))
            if not obj.get("delta"):
                self.flush()
            return
        self.flush()
        handler = self.handlers.get(etype) if isinstance(etype, str) else None
        if handler is None:
            text = f"line {lineno}: {etype}: {compact_json(obj)}"
            self.events.append(TranscriptEvent(type="info", text=text))
        else:
            handler(obj, ts)

    def init(self, obj: dict[str, Any], ts: float | None) -> None:
        self.out.session_id = obj.get("session_id") or self.out.session_id
        text = f"init model={obj.get('model')}"
        self.events.append(TranscriptEvent(type="system", text=text, t=self.rel(ts)))

    def user_message(self, obj: dict[str, Any], ts: float | None) -> None:
        text = str(obj.get("content") or "")
        self.events.append(TranscriptEvent(type="user", text=text, t=self.rel(ts)))

    def tool_use(self, obj: dict[str, Any], ts: float | None) -> None:
        name = str(obj.get("tool_name") or "")
        tool_id = obj.get("tool_id")
        params = obj.get("parameters")
        params = params if isinstance(params, dict) else {}
        if tool_id:
            self.tools[tool_id] = name
            if name == "run_shell_command" and isinstance(params.get("command"), str):
                self.commands[tool_id] = params["command"]
        self.events.append(
            TranscriptEvent(
                type="tool_call",
                id=tool_id,
                tool=name,
                kind=gemini_tool_kind(name, params),
                arguments=params,
                call_id=tool_id,
                t=self.rel(ts),
            )
        )

    def tool_result(self, obj: dict[str, Any], ts: float | None) -> None:
        tool_id = obj.get("tool_id")
        output = obj.get("output")
        text = output if isinstance(output, str) else ""
        span = None
        if obj.get("status") == "error" and obj.get("error"):
            message = _error_text(obj.get("error"))
            text = f"{text}\n{message}" if text else message
        elif obj.get("status") == "success" and tool_id in self.commands:
            found = shell_read_span(self.commands[tool_id], text)
            if found is not None:
                span, raw = found
                # the shown output lost the trailing newline; its lines are whole
                text = raw if raw.endswith("\n") else raw + "\n"
        self.events.append(
            TranscriptEvent(
                type="tool_result",
                id=f"{tool_id}:result" if tool_id else None,
                text=text,
                tool=self.tools.get(tool_id or ""),
                call_id=tool_id,
                span=span,
                t=self.rel(ts),
            )
        )

    def error(self, obj: dict[str, Any], ts: float | None) -> None:
        message = str(obj.get("message") or "")
        if obj.get("severity") == "warning":
            self.events.append(
                TranscriptEvent(type="info", text=f"warning: {message}", t=self.rel(ts))
            )
        else:
            self.out.error = message
            self.events.append(TranscriptEvent(type="error", text=message, t=self.rel(ts)))

    def result(self, obj: dict[str, Any], ts: float | None) -> None:
        out = self.out
        stats = obj.get("stats")
        if isinstance(stats, dict):
            out.usage = models_usage(stats) if "models" in stats else stream_stats_usage(stats)
        if obj.get("status") == "success":
            out.reported_success = True
            out.error = None
        else:
            out.reported_success = False
            error = obj.get("error")
            out.error = _error_text(error) if error else out.error or "gemini reported error"
            self.events.append(TranscriptEvent(type="error", text=out.error, t=self.rel(ts)))


def _delivered_for(tool_id: str, delivered: dict[str, str]) -> str | None:
    if tool_id in delivered:
        return delivered[tool_id]
    tail = tool_id.rsplit("__", 1)[-1]  # the stream's ids are "<tool>__<call id>"
    return delivered.get(tail)


def fill_gemini_results(
    transcript: list[TranscriptEvent], delivered: dict[str, str]
) -> list[TranscriptEvent]:
    """Gemini tool results with empty stream output, filled from `delivered` (call id -> the
    functionResponse output the model received)."""
    calls = {e.call_id: e for e in transcript if e.type == "tool_call" and e.call_id}
    out = []
    for event in transcript:
        if event.type == "tool_result" and not event.text and event.call_id:
            text = _delivered_for(event.call_id, delivered)
            if text:
                call = calls.get(event.call_id)
                span = None
                args = call.arguments if call is not None else {}
                whole_file = not any(args.get(k) for k in ("offset", "limit", "start_line"))
                if call is not None and call.tool == "read_file" and whole_file:
                    path = args.get("file_path") or args.get("absolute_path")
                    if isinstance(path, str) and path:
                        span = Span(path=path, start_line=1)
                event = event.model_copy(update={"text": text, "span": span})
        out.append(event)
    return out
