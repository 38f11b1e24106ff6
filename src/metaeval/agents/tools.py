"""The toolloop agent's tools: list_dir, read_file, grep, bash, write_file, submit.

Every tool works inside one `metaeval.sandbox.environment.Environment`. Output longer than
the step's byte budget is cut at a line boundary; the caller records both the raw and the
delivered size.

list_dir, grep and read_file ask the environment for its files (`Environment.list_dir`,
`grep`, `read_head`): a workspace reads its host directory, never following a link out of it
nor opening a FIFO or device; an environment without one (a task's container) runs `ls` and
`grep -E` there (a POSIX extended regular expression, not Python's) and reads through its own
`read_file` (`metaeval.sandbox.file_views`). No file is read beyond MAX_FILE_BYTES.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metaeval.agents.types import Span, ToolKind
from metaeval.errors import MetaevalError
from metaeval.models.types import ToolSpec
from metaeval.sandbox.environment import Environment
from metaeval.sandbox.file_views import MAX_VIEW_BYTES
from metaeval.sandbox.process import require_started

MAX_READ_LINES = 400
MAX_GREP_HITS = 200
MAX_FILE_BYTES = MAX_VIEW_BYTES
"""read_file reads at most this much of a file; grep skips longer files."""
MAX_LEFT_OUT = 10


@dataclass
class ToolOutput:
    """What a tool returns to the loop: delivered text, its raw size, an optional file span."""

    text: str
    raw_bytes: int
    span: Span | None = None
    submitted: str | None = None
    note: str = ""  # harness framing for the model (e.g. "file continues"), not artifact bytes

    @property
    def for_model(self) -> str:
        """The message content the model receives."""
        return self.text + self.note


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


TOOL_KINDS: dict[str, ToolKind] = {
    "list_dir": "read",
    "read_file": "read",
    "grep": "search",
    "bash": "exec",
    "write_file": "write",
    "submit": "submit",
}


def tool_specs(
    allow_write: bool,
    answer_schema: dict[str, Any] | None = None,
    menu: Sequence[str] | None = None,
) -> list[ToolSpec]:
    """Specs of the tools offered for one task; write_file only when the task allows writing;
    with a `menu` (an allow-list of tool names) only those tools and submit."""
    path = {"type": "string", "description": "path relative to the workspace root"}
    specs = [
        ToolSpec(
            name="list_dir",
            description="List files and folders under a directory.",
            parameters=_obj({"path": path}, ["path"]),
        ),
        ToolSpec(
            name="read_file",
            description="Read lines of a text file. offset is the first line (1-based).",
            parameters=_obj(
                {"path": path, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
                ["path"],
            ),
        ),
        ToolSpec(
            name="grep",
            description="Search files under a directory for a regular expression.",
            parameters=_obj({"pattern": {"type": "string"}, "path": path}, ["pattern"]),
        ),
        ToolSpec(
            name="bash",
            description="Run a shell command in the sandboxed workspace (no network).",
            parameters=_obj({"command": {"type": "string"}}, ["command"]),
        ),
    ]
    if allow_write:
        specs.append(
            ToolSpec(
                name="write_file",
                description="Create or overwrite a file with the given content.",
                parameters=_obj({"path": path, "content": {"type": "string"}}, ["path", "content"]),
            )
        )
    answer = answer_schema or {"type": "string"}
    specs.append(
        ToolSpec(
            name="submit",
            description="Finish the task and hand in the final answer.",
            parameters=_obj({"answer": answer}, ["answer"]),
        )
    )
    if menu is not None:
        specs = [s for s in specs if s.name in menu or s.name == "submit"]
    return specs


def _cut_lines(text: str, budget: int) -> str:
    """Keep whole lines from the start while they fit in `budget` bytes."""
    if len(text.encode("utf-8")) <= budget:
        return text
    kept: list[str] = []
    used = 0
    for line in text.splitlines(keepends=True):
        size = len(line.encode("utf-8"))
        if used + size > budget:
            break
        kept.append(line)
        used += size
    return "".join(kept)


def _plain(text: str, budget: int) -> ToolOutput:
    raw = len(text.encode("utf-8"))
    delivered = _cut_lines(text, budget)
    if len(delivered) < len(text):
        omitted = raw - len(delivered.encode("utf-8"))
        delivered += f"[output shortened: {omitted} of {raw} bytes omitted]\n"
    return ToolOutput(text=delivered, raw_bytes=raw)


def list_dir(env: Environment, args: dict[str, Any], budget: int) -> ToolOutput:
    lines = env.list_dir(str(args.get("path") or "."))
    return _plain("\n".join(lines) + "\n", budget)


def read_file(env: Environment, args: dict[str, Any], budget: int) -> ToolOutput:
    head = env.read_head(str(args.get("path", "")), MAX_FILE_BYTES)
    lines = head.data.decode("utf-8", errors="replace").splitlines(keepends=True)
    offset = max(1, int(args.get("offset") or 1))
    limit = max(1, min(int(args.get("limit") or MAX_READ_LINES), MAX_READ_LINES))
    chunk = "".join(lines[offset - 1 : offset - 1 + limit])
    delivered = _cut_lines(chunk, budget)
    shown = delivered.count("\n") if delivered.endswith("\n") else len(delivered.splitlines())
    note = ""
    if head.longer:
        note = (
            f"[file is larger than {MAX_FILE_BYTES} bytes: only its first {len(lines)} lines "
            f"are readable here; shown {offset}-{offset + shown - 1}; use bash for the rest]\n"
        )
    elif offset - 1 + shown < len(lines):
        note = f"[file has {len(lines)} lines; shown {offset}-{offset + shown - 1}; use offset]\n"
    span = Span(path=head.path, start_line=offset)
    return ToolOutput(text=delivered, raw_bytes=len(chunk.encode("utf-8")), span=span, note=note)


def grep(env: Environment, args: dict[str, Any], budget: int) -> ToolOutput:
    found = env.grep(str(args.get("pattern", "")), str(args.get("path") or "."), MAX_GREP_HITS)
    hits = found.hits
    output = _plain("\n".join(hits) + "\n" if hits else "(no matches)\n", budget)
    if found.left_out:
        output.note = f"[not searched: {'; '.join(found.left_out[:MAX_LEFT_OUT])}"
        more = len(found.left_out) - MAX_LEFT_OUT
        output.note += f"; and {more} more]\n" if more > 0 else "]\n"
    return output


def bash(env: Environment, args: dict[str, Any], budget: int, timeout_s: float) -> ToolOutput:
    result = require_started(env.exec(str(args.get("command", "")), timeout_s=timeout_s))
    status = "timed out" if result.timed_out else f"exit code {result.returncode}"
    return _plain(f"[{status}]\n{result.stdout}{result.stderr}", budget)


def write_file(env: Environment, args: dict[str, Any]) -> ToolOutput:
    rel = str(args.get("path", ""))
    content = str(args.get("content", ""))
    env.write_file(rel, content.encode("utf-8"))
    text = f"wrote {len(content.encode('utf-8'))} bytes to {rel}\n"
    return ToolOutput(text=text, raw_bytes=len(text))


def run_tool(
    ws: Environment,
    name: str,
    args: dict[str, Any],
    budget: int,
    timeout_s: float,
    allow_write: bool,
) -> ToolOutput:
    """Execute one tool call; raises MetaevalError for a bad call (reported back to the model)."""
    if name == "list_dir":
        return list_dir(ws, args, budget)
    if name == "read_file":
        return read_file(ws, args, budget)
    if name == "grep":
        return grep(ws, args, budget)
    if name == "bash":
        return bash(ws, args, budget, timeout_s)
    if name == "write_file" and allow_write:
        return write_file(ws, args)
    if name == "submit":
        answer = args.get("answer", "")
        # Structured answers (e.g. find_answers.json) are handed back as JSON, never as a repr.
        text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        return ToolOutput(text="submitted\n", raw_bytes=10, submitted=text)
    raise MetaevalError(f"unknown tool: {name}")
