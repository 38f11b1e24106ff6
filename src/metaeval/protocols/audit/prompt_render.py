"""Rendering a loaded task into the audit's messages: numbered files, grouped by role, fitted
to per-file budgets, with the system prompt that `AnswerOptions` asks for (texts in
`prompts.py`)."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from string import Template
from typing import Any

from metaeval.models.types import Message
from metaeval.protocols.audit.output_schema import DEFAULT_ANSWER, AnswerOptions
from metaeval.protocols.audit.prompts import (
    AGENT_PHASE1_NOTE,
    AGENT_SECTION_TEMPLATE,
    CLIPPED_LINE_TEMPLATE,
    EMPTY_SECTION,
    FILE_FOOTER_TEMPLATE,
    FILE_HEADER_TEMPLATE,
    JSON_ONLY_PHASE6,
    OMITTED_MARKER_TEMPLATE,
    REASONING_PHASE6,
    REPAIR_TEMPLATE,
    REPAIR_TRUNCATED_TEMPLATE,
    USER_TEMPLATE,
    AuditProtocol,
    system_prompt,
)
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile


@dataclass(frozen=True)
class RenderedFile:
    """One file as shown in a prompt: the text block and, when shortened, what was left out."""

    path: str
    block: str
    body_chars: int  # length of the numbered body (what a budget limits)
    shortened: str | None = None  # human-readable note when lines were omitted or clipped


def number_lines(text: str, budget: int | None = None) -> tuple[str, str | None]:
    """`text` with right-aligned 1-based line numbers; shortened to `budget` chars if given.

    Shortening keeps a head (about two thirds of the budget) and a tail, replacing the middle
    with a marker naming the omitted line range; single lines longer than a quarter of the
    budget (at least 80 characters) are clipped first. Line numbers are always the original
    ones. Returns (body, note) where note describes the shortening or is None.
    """
    lines = text.splitlines()
    width = len(str(max(len(lines), 1)))
    numbered = [f"{i:>{width}}| {line}" for i, line in enumerate(lines, 1)]
    full = "\n".join(numbered)
    if budget is None or len(full) <= budget:
        return full, None

    max_line = max(80, budget // 4)
    clipped = 0
    shown: list[str] = []
    for i, line in enumerate(lines, 1):
        if len(line) > max_line:
            clipped += 1
            extra = Template(CLIPPED_LINE_TEMPLATE).substitute(count=len(line) - max_line)
            line = line[:max_line] + extra
        shown.append(f"{i:>{width}}| {line}")
    body = "\n".join(shown)
    if len(body) <= budget:
        return body, f"{clipped} long line(s) clipped"

    # Head and tail within the budget (the marker takes about 70 characters).
    room = max(0, budget - 70)
    head: list[str] = []
    used = 0
    for line in shown:
        if used + len(line) + 1 > room * 2 // 3 and head:
            break
        head.append(line)
        used += len(line) + 1
    tail: list[str] = []
    for line in reversed(shown[len(head) :]):
        if used + len(line) + 1 > room:
            break
        tail.append(line)
        used += len(line) + 1
    tail.reverse()
    first, last = len(head) + 1, len(lines) - len(tail)
    marker = Template(OMITTED_MARKER_TEMPLATE).substitute(
        first=first, last=last, count=last - first + 1
    )
    body = "\n".join([*head, marker, *tail])
    note = f"lines {first}-{last} of {len(lines)} omitted"
    if clipped:
        note += f", {clipped} long line(s) clipped"
    return body, note


def render_file(file: TaskFile, budget: int | None = None) -> RenderedFile:
    """A file as a prompt block: header (path, line count), numbered body, footer."""
    body, note = number_lines(file.text, budget)
    status = ""
    if file.truncated:
        status = f"; shortened by the loader: {file.raw_bytes} bytes on disk"
    if note:
        status += f"; {note} here"
    header = Template(FILE_HEADER_TEMPLATE).substitute(
        path=file.path, n_lines=len(file.lines), status=status
    )
    footer = Template(FILE_FOOTER_TEMPLATE).substitute(path=file.path)
    return RenderedFile(file.path, f"{header}\n{body}\n{footer}", len(body), note)


def _basename(path: str) -> str:
    return posixpath.basename(path).lower()


def group_files(task: LoadedTask) -> dict[str, list[TaskFile]]:
    """Task files by prompt section (instruction, solution, tests, environment, data
    description, domain knowledge, other files, agent files), in the loader's order."""
    groups: dict[str, list[TaskFile]] = {
        key: []
        for key in (
            "instruction",
            "solution",
            "tests",
            "environment",
            "data_description",
            "domain_knowledge",
            "other_files",
            "agent_files",
        )
    }
    for f in task.files:
        if f.role == "instruction":
            groups["instruction"].append(f)
        elif f.role == "solution":
            groups["solution"].append(f)
        elif f.role == "tests":
            groups["tests"].append(f)
        elif f.role == "environment":
            groups["environment"].append(f)
        elif f.role == "docs":
            key = "domain_knowledge" if "domain_knowledge" in _basename(f.path) else None
            groups[key or "data_description"].append(f)
        elif f.role == "agent":
            groups["agent_files"].append(f)
        else:
            groups["other_files"].append(f)
    return groups


def prompt_files(task: LoadedTask, protocol: AuditProtocol) -> list[TaskFile]:
    """The files a protocol's prompt shows (agent files only in the execution protocol)."""
    return [f for f in task.files if protocol == "execution" or f.role != "agent"]


def _flatten(prefix: str, value: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _flatten(f"{prefix}.{key}" if prefix else str(key), sub)
    else:
        yield prefix, value


def _task_meta(task: LoadedTask) -> str:
    lines = []
    meta = task.config.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    for label, keys in (
        ("Domain", ("domain", "category")),
        ("Expected output", ("expected_output",)),
        ("Benchmark", ("benchmark_source",)),
    ):
        value = next((meta[k] for k in keys if meta.get(k) not in (None, "")), None)
        if value is not None:
            lines.append(f"{label}: {value}")
    if task.config and task.file("task.toml") is None:
        lines.append("Configuration (task.toml):")
        for i, (key, value) in enumerate(_flatten("", task.config)):
            if i >= 40:
                lines.append("  ... (more keys not shown)")
                break
            lines.append(f"  {key} = {json.dumps(value, default=str)[:200]}")
    if task.config_error:
        lines.append(f"task.toml could not be parsed: {task.config_error}")
    if task.missing_files:
        lines.append("Missing files: " + "; ".join(task.missing_files))
    if task.skipped_files:
        lines.append("Files not shown (binary or unreadable): " + "; ".join(task.skipped_files))
    if task.cuts:
        lines.append("Shortened by the loader: " + "; ".join(task.cuts))
    return "\n".join(lines) if lines else "(no further metadata)"


def render_messages(
    task: LoadedTask,
    protocol: AuditProtocol,
    *,
    file_budgets: dict[str, int] | None = None,
    notes: list[str] | None = None,
    answer: AnswerOptions = DEFAULT_ANSWER,
) -> list[Message]:
    """System and user messages for `protocol`. `file_budgets` caps the numbered body of the
    named files (chars); a description of every shortening is appended to `notes`. `answer`
    shapes the answer asked for (see `system_prompt`)."""
    if protocol not in ("definition", "execution"):
        raise ValueError(f"unknown audit protocol {protocol!r}")
    budgets = file_budgets or {}
    groups = group_files(task)
    sections: dict[str, str] = {}
    for key, files in groups.items():
        blocks = []
        for f in files:
            rendered = render_file(f, budgets.get(f.path))
            if rendered.shortened and notes is not None:
                notes.append(f"{f.path}: {rendered.shortened} in the prompt")
            blocks.append(rendered.block)
        sections[key] = "\n\n".join(blocks) if blocks else EMPTY_SECTION[key]
    agent_section = ""
    agent_phase1 = ""
    if protocol == "execution":
        agent_section = Template(AGENT_SECTION_TEMPLATE).substitute(
            agent_files=sections["agent_files"]
        )
        agent_phase1 = AGENT_PHASE1_NOTE
    user = Template(USER_TEMPLATE).substitute(
        task_id=task.task_id,
        task_meta=_task_meta(task),
        instruction=sections["instruction"],
        solution=sections["solution"],
        tests=sections["tests"],
        environment=sections["environment"],
        data_description=sections["data_description"],
        domain_knowledge=sections["domain_knowledge"],
        other_files=sections["other_files"],
        hints=task.hints.strip() or EMPTY_SECTION["hints"],
        agent_section=agent_section,
        agent_phase1=agent_phase1,
    )
    if answer.reasoning:
        user = user.replace(JSON_ONLY_PHASE6, REASONING_PHASE6)
    system = system_prompt(answer)
    return [Message(role="system", content=system), Message(role="user", content=user)]


def render_definition_prompt(
    task: LoadedTask, *, file_budgets: dict[str, int] | None = None
) -> list[Message]:
    """The definition-level audit prompt: all task artifacts, no agent attempt."""
    return render_messages(task, "definition", file_budgets=file_budgets)


def render_execution_prompt(
    task: LoadedTask, *, file_budgets: dict[str, int] | None = None
) -> list[Message]:
    """The execution-level audit prompt: the definition prompt plus the agent's attempt
    (role=agent files) as supporting evidence."""
    return render_messages(task, "execution", file_budgets=file_budgets)


def render_repair(error: str, *, truncated: bool = False) -> str:
    """The follow-up message asking for only the JSON array after an unusable reply."""
    template = REPAIR_TRUNCATED_TEMPLATE if truncated else REPAIR_TEMPLATE
    return Template(template).substitute(error=error)


def prompt_chars(messages: list[Message]) -> int:
    return sum(len(m.content) for m in messages)
