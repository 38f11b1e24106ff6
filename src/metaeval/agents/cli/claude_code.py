"""Claude Code adapter: ``claude -p <prompt> --output-format stream-json --verbose``.

Stream format (JSON lines, documented in Claude Code's headless/SDK docs):

* ``{"type":"system","subtype":"init","session_id":...,"model":...,"tools":[...],"cwd":...}``
* ``{"type":"assistant","message":{"id":"msg_..","content":[blocks],"usage":{...}}}`` with
  blocks ``text`` / ``thinking`` / ``tool_use`` (``id``, ``name``, ``input``). One API message
  may arrive split over several events that share ``message.id``; its usage is counted once.
* ``{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":..,
  "content": str | [{"type":"text","text":..}], "is_error": bool}]},"tool_use_result":{...}}``.
  For Read, ``content`` is ``cat -n`` style ("     1\\t..." in older versions, "1\\t..." in
  newer ones, "1→..." in some); ``tool_use_result.file`` has ``filePath`` and ``startLine``.
* final ``{"type":"result","subtype":"success"|"error_max_turns"|"error_during_execution"|..,
  "is_error":..,"result":..,"usage":{input_tokens, output_tokens, cache_read_input_tokens,
  cache_creation_input_tokens},"total_cost_usd":..,"num_turns":..,"session_id":..}``.

Usage: the result event's ``modelUsage`` (per model: inputTokens, outputTokens,
cacheReadInputTokens, cacheCreationInputTokens), which counts every request of the run, the
session-title request included; else its ``usage`` (which omits that request); otherwise the
sum over distinct assistant message ids.

Claude Code 2.1 has no Grep/Glob/LS tools: it reads and searches through Bash. A Bash call is
classified by its command (`classify_shell_command`), and a single-file read command gets a
span from the result's ``tool_use_result.stdout``. `Usage.input_tokens` includes both cache categories (Anthropic's ``input_tokens``
excludes them), so ``input_tokens = input + cache_read + cache_creation``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from metaeval.agents.cli.base import CLIAdapter
from metaeval.agents.cli.stream import (
    ParsedStream,
    as_float,
    as_int,
    compact_json,
    iter_json_objects,
    short_hash,
    text_of_content,
)
from metaeval.agents.shell_commands import (
    classify_shell_command,
    shell_read_span,
    strip_line_numbers,
)
from metaeval.agents.types import Limits, Span, Task, ToolKind, TranscriptEvent
from metaeval.models.types import Usage

if TYPE_CHECKING:
    from metaeval.sandbox.workspace import Workspace

CLAUDE_TOOL_KINDS: dict[str, ToolKind] = {
    "Read": "read",
    "NotebookRead": "read",
    "LS": "read",
    "WebFetch": "read",
    "Grep": "search",
    "Glob": "search",
    "WebSearch": "search",
    "Write": "write",
    "Edit": "write",
    "MultiEdit": "write",
    "NotebookEdit": "write",
    "Bash": "exec",
    "BashOutput": "exec",
    "KillShell": "exec",
    "KillBash": "exec",
}
READ_TOOLS = frozenset({"Read"})


def claude_tool_kind(name: str, tool_input: dict[str, Any] | None = None) -> ToolKind:
    if name == "Bash" and tool_input and isinstance(tool_input.get("command"), str):
        return classify_shell_command(tool_input["command"])
    return CLAUDE_TOOL_KINDS.get(name, "other")


def model_usage_total(raw: dict[str, Any]) -> Usage:
    """Sum of a result event's ``modelUsage`` (camelCase per-model counts)."""
    total = Usage()
    for entry in raw.values():
        if isinstance(entry, dict):
            total = total + claude_usage(
                {
                    "input_tokens": entry.get("inputTokens"),
                    "output_tokens": entry.get("outputTokens"),
                    "cache_read_input_tokens": entry.get("cacheReadInputTokens"),
                    "cache_creation_input_tokens": entry.get("cacheCreationInputTokens"),
                }
            )
    return total


def _bash_result(text: str, tool_input: dict[str, Any], extra: Any) -> tuple[str, Span | None]:
    """Output and span of a Bash call: a single-file read gets a span over its stdout."""
    stdout = extra.get("stdout") if isinstance(extra, dict) else None
    command = tool_input.get("command")
    if not isinstance(command, str) or not isinstance(stdout, str):
        return text, None
    if isinstance(extra, dict) and extra.get("interrupted"):
        return text, None
    found = shell_read_span(command, stdout)
    if found is None:
        return text, None
    span, raw = found
    # The Bash tool trims the output's trailing newline; the lines it delivered are whole.
    return (raw if raw.endswith("\n") else raw + "\n"), span


def claude_usage(raw: dict[str, Any]) -> Usage:
    cache_read = as_int(raw.get("cache_read_input_tokens"))
    cache_write = as_int(raw.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=as_int(raw.get("input_tokens")) + cache_read + cache_write,
        output_tokens=as_int(raw.get("output_tokens")),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _read_result(text: str, tool_input: dict[str, Any], extra: Any) -> tuple[str, Span | None]:
    """Raw file text and span of a Read result; the text unchanged and no span if not numbered."""
    file_info = extra.get("file") if isinstance(extra, dict) else None
    file_info = file_info if isinstance(file_info, dict) else {}
    path = tool_input.get("file_path") or file_info.get("filePath")
    stripped = strip_line_numbers(text)
    if stripped is not None and path:
        start, body = stripped
        return body, Span(path=str(path), start_line=start)
    content = file_info.get("content")
    if isinstance(content, str) and path and content:
        return content, Span(path=str(path), start_line=as_int(file_info.get("startLine")) or 1)
    return text, None


def parse_claude_stream(lines: Iterable[str]) -> ParsedStream:
    """Parse ``claude -p --output-format stream-json --verbose`` output."""
    stream = _ClaudeStream()
    for lineno, obj, bad in iter_json_objects(lines):
        if bad is not None:
            stream.events.append(bad)
            continue
        assert obj is not None
        kind = obj.get("type")
        handler = stream.handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            text = f"line {lineno}: {kind}: {compact_json(obj)}"
            stream.events.append(TranscriptEvent(type="info", text=text))
        else:
            handler(obj, bool(obj.get("isReplay")))
    return stream.finish()


class _ClaudeStream:
    """The state of one stream being read: the transcript so far, the tool calls by id (a
    result is read knowing its call), and usage per message (a message may be repeated)."""

    def __init__(self) -> None:
        self.out = ParsedStream()
        self.events = self.out.transcript
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}  # tool_use id -> (name, input)
        self.message_usage: dict[str, Usage] = {}
        self.anonymous_usage = Usage()
        self.result_usage: Usage | None = None
        self.last_assistant_text: str | None = None
        self.saw_result = False
        self.handlers: dict[str, Callable[[dict[str, Any], bool], None]] = {
            "system": self.system,
            "assistant": self.assistant,
            "user": self.user,
            "result": self.result,
        }

    def system(self, obj: dict[str, Any], replayed: bool) -> None:
        subtype = obj.get("subtype")
        if subtype == "init":
            self.out.session_id = obj.get("session_id") or self.out.session_id
            text = f"init model={obj.get('model')} cwd={obj.get('cwd')}"
            self.events.append(TranscriptEvent(type="system", text=text))
        else:
            self.events.append(TranscriptEvent(type="info", text=f"system/{subtype}"))

    def assistant(self, obj: dict[str, Any], replayed: bool) -> None:
        message = obj.get("message") or {}
        msg_id = message.get("id") or obj.get("uuid")
        usage = message.get("usage")
        if isinstance(usage, dict) and usage:
            if msg_id:
                self.message_usage[msg_id] = claude_usage(usage)
            else:
                self.anonymous_usage = self.anonymous_usage + claude_usage(usage)
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content or []:
            if isinstance(block, dict):
                self.events.append(self._assistant_block(block, msg_id, replayed))

    def _assistant_block(
        self, block: dict[str, Any], msg_id: str | None, replayed: bool
    ) -> TranscriptEvent:
        btype = block.get("type")
        if btype == "text":
            text = block.get("text") or ""
            self.last_assistant_text = text
            bid = f"{msg_id}:text:{short_hash(text)}" if msg_id else None
            return TranscriptEvent(type="assistant", id=bid, text=text, replayed=replayed)
        if btype == "thinking":
            text = block.get("thinking") or ""
            bid = f"{msg_id}:thinking:{short_hash(text)}" if msg_id else None
            return TranscriptEvent(type="info", id=bid, text=text, replayed=replayed)
        if btype in ("tool_use", "server_tool_use"):
            name = block.get("name") or ""
            tool_input = block.get("input")
            tool_input = tool_input if isinstance(tool_input, dict) else {}
            call_id = block.get("id")
            if call_id:
                self.calls[call_id] = (name, tool_input)
            return TranscriptEvent(
                type="tool_call",
                id=call_id,
                tool=name,
                kind=claude_tool_kind(name, tool_input),
                arguments=tool_input,
                call_id=call_id,
                replayed=replayed,
            )
        return TranscriptEvent(type="info", text=f"assistant block {btype}")

    def user(self, obj: dict[str, Any], replayed: bool) -> None:
        message = obj.get("message") or {}
        content = message.get("content")
        if isinstance(content, str):
            self.events.append(
                TranscriptEvent(type="user", id=obj.get("uuid"), text=content, replayed=replayed)
            )
            return
        for block in content or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                self.events.append(self._tool_result(block, obj, replayed))
            elif block.get("type") == "text":
                text = block.get("text") or ""
                self.events.append(TranscriptEvent(type="user", text=text, replayed=replayed))

    def _tool_result(
        self, block: dict[str, Any], obj: dict[str, Any], replayed: bool
    ) -> TranscriptEvent:
        use_id = block.get("tool_use_id")
        text = text_of_content(block.get("content"))
        span = None
        name, tool_input = self.calls.get(use_id, ("", {})) if use_id else ("", {})
        if name in READ_TOOLS and not block.get("is_error"):
            text, span = _read_result(text, tool_input, obj.get("tool_use_result"))
        elif name == "Bash" and not block.get("is_error"):
            text, span = _bash_result(text, tool_input, obj.get("tool_use_result"))
        return TranscriptEvent(
            type="tool_result",
            id=f"{use_id}:result" if use_id else None,
            text=text,
            tool=name or None,
            call_id=use_id,
            span=span,
            replayed=replayed,
        )

    def result(self, obj: dict[str, Any], replayed: bool) -> None:
        out = self.out
        self.saw_result = True
        out.session_id = obj.get("session_id") or out.session_id
        out.cost_usd = as_float(obj.get("total_cost_usd", obj.get("cost_usd")))
        if obj.get("num_turns") is not None:
            out.num_turns = as_int(obj.get("num_turns"))
        usage = obj.get("usage")
        per_model = obj.get("modelUsage")
        if isinstance(per_model, dict) and per_model:
            self.result_usage = model_usage_total(per_model)
        elif isinstance(usage, dict) and usage:
            self.result_usage = claude_usage(usage)
        subtype = obj.get("subtype") or ""
        result_text = obj.get("result")
        if isinstance(result_text, str):
            out.final_text = result_text
        if subtype == "success" and not obj.get("is_error"):
            out.reported_success = True
            out.error = None
            return
        out.reported_success = False
        details = obj.get("errors")
        detail = "; ".join(str(d) for d in details) if isinstance(details, list) else ""
        if not detail and isinstance(result_text, str) and obj.get("is_error"):
            detail = result_text
        label = subtype if subtype and subtype != "success" else "error"
        out.error = f"{label}: {detail}" if detail else label
        self.events.append(TranscriptEvent(type="error", text=out.error))

    def finish(self) -> ParsedStream:
        """The parsed stream: usage from the result event, else summed per message."""
        out = self.out
        if self.result_usage is not None:
            out.usage = self.result_usage
        else:
            total = self.anonymous_usage
            for usage in self.message_usage.values():
                total = total + usage
            out.usage = total
        if not self.saw_result:
            out.final_text = self.last_assistant_text  # cut-off stream: the last thing it said
        return out


class ClaudeCodeAdapter(CLIAdapter):
    """Claude Code in print mode, streaming JSON events.

    Permission mode: ``bypassPermissions`` when the task allows writing (the workspace sandbox
    is the safety boundary), else ``default``, under which print mode denies every tool that
    would need a prompt (edits, Bash) while reads and searches run. Override with
    `permission_mode`. ``IS_SANDBOX=1`` tells it the sandbox is there, without which it
    refuses ``bypassPermissions`` when the uid is 0. On a gateway it gets
    ``ANTHROPIC_BASE_URL`` and a placeholder ``ANTHROPIC_API_KEY``.
    """

    name: ClassVar[str] = "claude-code"
    default_binary: ClassVar[str] = "claude"
    product: ClassVar[str] = "Claude Code"
    credential_env: ClassVar[tuple[str, ...]] = (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_MODEL",
    )
    quiet_env: ClassVar[dict[str, str]] = {
        "IS_SANDBOX": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }

    def __init__(
        self,
        model: str | None = None,
        binary: str = "claude",
        extra_args: Iterable[str] = (),
        permission_mode: str | None = None,
        home: Path | None = None,
        gateway: Any = None,
        **settings: Any,
    ):
        super().__init__(
            model=model,
            binary=binary,
            extra_args=tuple(extra_args),
            home=home,
            gateway=gateway,
            **settings,
        )
        self.permission_mode = permission_mode

    # Claude Code 2.1's `--effort <level>` (its help lists these levels)
    efforts: ClassVar[tuple[str, ...]] = ("low", "medium", "high", "xhigh", "max")

    def effort_args(self) -> list[str]:
        return ["--effort", self.effort] if self.effort else []

    def endpoint_env(self, base_url: str | None, api_key: str | None) -> dict[str, str]:
        env = {"ANTHROPIC_BASE_URL": base_url} if base_url else {}
        return env | ({"ANTHROPIC_API_KEY": api_key} if api_key else {})

    def gateway_env(self, base_url: str, home: Path, api_key: str) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": api_key}  # x-api-key

    def build_argv(self, task: Task, workspace: Workspace, limits: Limits) -> list[str]:
        mode = self.permission_mode or ("bypassPermissions" if task.allow_write else "default")
        argv = [
            self.binary,
            "-p",
            task.instruction,
            "--output-format",
            "stream-json",
            "--verbose",
            "--max-turns",
            str(limits.max_steps),
        ]
        if self.model:
            argv += ["--model", self.model]
        argv += ["--permission-mode", mode]
        if self.allowed_tools is not None:  # the built-in tools it may use at all
            argv += ["--tools", ",".join(self.allowed_tools)]
        return argv + self.extra_args

    def parse_output(self, stdout: str, task: Task, workspace: Workspace) -> ParsedStream:
        return parse_claude_stream(stdout.splitlines())
