"""Prompts of the BenchGuard LLM audit: system prompt, user prompts, repair prompt, output schema.

The wording is ours; the definitions (taxonomy, categorization priority, one-fix and split
tests, discoverability gate, severity, finding type, confidence tiers, six phases) follow the
BenchGuard paper. The taxonomy block is generated from `findings.TAXONOMY`, so the prompt and
the validator can never disagree.

Every artifact is shown with line numbers (`12| code`) so models can cite lines; the numbers
are those of the loaded file, also when a file is shortened to fit a context window (omitted
lines are replaced by a marker naming them), so citations stay checkable by `evidence.py`.

`PROMPT_TEMPLATES` maps a name to every text that shapes a request (the system prompt with the
taxonomy rendered in, the user templates, the repair templates, the markers and the output
schema), so a run manifest can hash them all.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from string import Template
from typing import Any, Literal

from metaeval.models.types import Message
from metaeval.protocols.audit.findings import (
    CATEGORIES,
    PAPER_SUBCATEGORIES,
    SEVERITY_ORDER,
    TAXONOMY,
)
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile

AuditProtocol = Literal["definition", "execution"]

AREA_TITLES: dict[str, str] = {
    "GT": "Reference (gold) solution: does it really do what the instruction asks?",
    "EVAL": "Evaluation: do the tests measure what the instruction asks and accept every valid "
    "answer?",
    "INST": "Instruction: is it complete, consistent with the other artifacts, and solvable?",
    "ENV": "Environment: can the task run in the sandbox as configured?",
}

CATEGORY_NAMES: dict[str, str] = {
    "GT": "gold solution",
    "EVAL": "evaluation",
    "INST": "instruction",
    "ENV": "environment",
}

# Output size limits. They keep a small model from rambling under constrained decoding; they
# are generation limits, not validation rules (a longer title from a frontier model is kept).
MAX_FINDINGS = 8
MAX_EVIDENCE = 3
MAX_TITLE_CHARS = 120
MAX_DESCRIPTION_CHARS = 600
MAX_RECOMMENDATION_CHARS = 400
MAX_SNIPPET_CHARS = 300
MAX_PATH_CHARS = 200


def taxonomy_block() -> str:
    """The taxonomy as prompt text: one line per subcategory, grouped by category."""
    lines = []
    for category, subs in TAXONOMY.items():
        lines.append(f"{category} ({CATEGORY_NAMES[category]}):")
        for code, definition in subs.items():
            lines.append(f"  - {code}: {definition}")
    return "\n".join(lines)


_EXAMPLE_FINDING = {
    "category": "INST",
    "subcategory": "INST-INCOMPLETE",
    "severity": "High",
    "finding_type": "Warning",
    "title": "<one line naming the defect>",
    "description": "<what is wrong, where, and how it changes scoring>",
    "evidence": [
        {
            "file": "<path exactly as shown, e.g. tests/test_outputs.py>",
            "line_start": 12,
            "line_end": 14,
            "snippet": "<text copied from those lines, without the line numbers>",
        }
    ],
    "recommendation": "<how the benchmark authors should fix the task>",
    "confidence": 0.6,
}

SYSTEM_TEMPLATE = """\
You are auditing one task of a benchmark for AI coding agents. A task is a bundle of artifacts \
that have to agree with each other: the instruction the agent receives, a reference ("gold") \
solution, evaluation code (tests) that scores what the agent produces, and the environment the \
agent and the tests run in (container image, dependencies, paths, limits). Find defects in the \
BENCHMARK TASK: places where an agent that correctly does what the instruction asks could still \
be scored as failing (or a wrong answer scored as passing), or where the task cannot be solved \
as posed. You are not grading an agent.

Cover four areas in a single pass:
- GT: $area_gt
- EVAL: $area_eval
- INST: $area_inst
- ENV: $area_env

DEFECT TAXONOMY (use exactly these codes; the category is the prefix of the subcategory)
$taxonomy

CHOOSING THE CATEGORY
- When a problem could be filed either as an instruction defect (INST-*) or as a gold-solution \
defect (GT-*), file it under INST-*. In most such cases the instruction left a choice open and \
the gold solution simply took one reading of it; the repair belongs in the instruction.
- Use GT-* only when the gold solution is wrong however the instruction is read: a programming \
mistake, an off-by-one, a wrong formula or metric, the wrong input file.
- Always pick the most specific subcategory that fits.

ONE FINDING PER ROOT CAUSE
- One-fix test (merge): if one change to the task would make two of your concerns disappear, \
they are the same defect. Report it once, under its most specific subcategory, and mention the \
other symptoms in its description.
- Split test (atomicity): ask "could concern A be fixed while concern B still remains?". If yes, \
they are separate defects and must be separate findings. A finding never bundles two problems \
that can be fixed independently.

DISCOVERABILITY
- Details an agent can find out for itself at run time (file names, column names, data layout, \
metadata present in the provided files) are not instruction defects.
- Missing information counts only when it is a semantic choice the agent cannot recover from \
its environment (method, parameter, threshold, covariate, tolerance, output convention) and the \
scoring depends on it.

SEVERITY (effect on whether solutions are scored correctly)
- Critical: the task cannot be solved, or is broken at its core.
- High: correct solutions can be scored as wrong (or wrong ones as correct).
- Medium: some valid approaches are affected, others are not.
- Low: a minor issue or a rare edge case.

FINDING TYPE
- Bug: concrete and checkable. A specific line contradicts the instruction, the algorithm is \
wrong, or the logic demonstrably fails.
- Warning: a concern that is not provably wrong (underspecified, fragile, a risky assumption). \
If you cannot show concrete harm to scoring, use Warning.

CONFIDENCE (your probability that the defect is real)
- 0.80 to 1.00 (Confirmed): a specific line directly contradicts a specific statement.
- 0.55 to 0.79 (Likely): a clear discrepancy that takes reasoning across artifacts or domain \
knowledge to see.
- 0.30 to 0.54 (Possible): a suspicious pattern that a domain expert should check.
- Below 0.30: do not report it.

OUTPUT
Reply with a JSON array and nothing else: no prose before or after it, no markdown fences. \
Each element is one finding, for example:
$example
Fields:
- category: one of $categories.
- subcategory: one of the taxonomy codes above.
- severity: one of $severities.
- finding_type: Bug or Warning.
- title: one line, at most $max_title characters.
- description: what is wrong, where, and why it matters for scoring; at most $max_description \
characters.
- evidence: 1 to $max_evidence citations, each with the file path exactly as shown in the task \
artifacts, the first and last line numbers as shown, and a short snippet copied verbatim from \
those lines (without the line numbers).
- recommendation: how the benchmark authors should fix the task.
- confidence: a number from 0 to 1.
Report at most $max_findings findings, most important first. If the task has no defects, reply \
with []. If your reply must be a JSON object, put the array under the key "findings".
"""


def _render_system() -> str:
    return Template(SYSTEM_TEMPLATE).substitute(
        area_gt=AREA_TITLES["GT"],
        area_eval=AREA_TITLES["EVAL"],
        area_inst=AREA_TITLES["INST"],
        area_env=AREA_TITLES["ENV"],
        taxonomy=taxonomy_block(),
        example=json.dumps([_EXAMPLE_FINDING], indent=1),
        categories=", ".join(CATEGORIES),
        severities=", ".join(SEVERITY_ORDER),
        max_title=MAX_TITLE_CHARS,
        max_description=MAX_DESCRIPTION_CHARS,
        max_evidence=MAX_EVIDENCE,
        max_findings=MAX_FINDINGS,
    )


SYSTEM_PROMPT = _render_system()

USER_TEMPLATE = """\
Audit the benchmark task below. Every file is shown with its line numbers at the start of each \
line ("12| code"); cite those numbers, and quote snippets without them.

# TASK
Task ID: $task_id
$task_meta

# INSTRUCTION (what the agent is told)
$instruction

# GOLD SOLUTION (reference implementation)
$solution

# EVALUATION (tests and scoring)
$tests

# ENVIRONMENT
$environment

# DATA DESCRIPTION
$data_description

# DOMAIN KNOWLEDGE
$domain_knowledge

# TASK CONFIGURATION AND OTHER FILES
$other_files

# BENCHMARK-SPECIFIC GUIDANCE (from the benchmark maintainers)
$hints
$agent_section
# HOW TO WORK
Go through the six phases in order. Phases 2 to 5 are analysis only: work through them (silently, \
if your reply is restricted to JSON) and do not write findings yet. Only phase 6 produces output.

Phase 1. Understand the task. What exactly must the agent produce (files, format, values, \
location)? How is it scored? Classify the runtime: does the agent work inside a container or a \
prepared workspace where it can inspect the data and files itself, or does it get nothing beyond \
the instruction? This decides what counts as discoverable in phase 4.$agent_phase1

Phase 2. Gold solution (analysis only). Read the gold solution line by line against the \
instruction. Right method and metric? Right inputs (files, columns, rows, scope)? Right output \
format and location? Note each concern separately.

Phase 3. Evaluation (analysis only). Read the tests line by line. Do they check what the \
instruction asks, not something else, not more and not less? Would they accept every valid \
output (equivalent formats, types, orderings, names)? Are numeric tolerances sensible? Do they \
expect identical results where results legitimately vary (randomness, parallelism, floating \
point, timing)? If a model judge scores the answer, is it tied to one implementation? Note each \
concern separately.

Phase 4. Instruction (analysis only). Look for missing requirements, contradictions (inside the \
instruction, or with the gold solution or the tests) and demands that cannot be met. Apply the \
discoverability gate to every possible omission: if the agent could learn the detail at run \
time from its environment, drop it; keep it only if it is a semantic choice the agent cannot \
infer and the scoring depends on it.

Phase 5. Environment (analysis only). Check dependencies and their versions, hard-coded paths \
against where files really are at run time, needs for network or external services, and time \
or resource limits.

Phase 6. Consolidate and answer. (a) One-fix test: merge concerns that one change would \
resolve. (b) Split test: split any finding that bundles independently fixable problems. \
(c) Drop findings that are only about details discoverable at run time. (d) Drop anything below \
confidence 0.30. (e) Reply with the JSON array only.
"""

AGENT_SECTION_TEMPLATE = """
# AGENT ATTEMPT (supporting evidence only, not ground truth)
The files below come from one agent's attempt at this task: its program, its evaluation result \
and its log. Treat them as one plausible reading of the task, never as a correct answer: the \
benchmark artifacts above stay the source of truth. Use the attempt only to expose hidden \
assumptions, ambiguous wording, tests tied to one particular implementation, or other benchmark \
defects that show when a real candidate solution meets the tests. Do not report the agent's own \
mistakes as benchmark defects.

$agent_files
"""

AGENT_PHASE1_NOTE = (
    " An agent attempt is included: read it as one possible interpretation of the task, not as "
    "the reference."
)

FILE_HEADER_TEMPLATE = "=== $path ($n_lines lines$status) ==="
FILE_FOOTER_TEMPLATE = "=== end of $path ==="
OMITTED_MARKER_TEMPLATE = "[... lines $first-$last omitted to fit the prompt ($count lines) ...]"
CLIPPED_LINE_TEMPLATE = " [... $count more characters on this line]"
EMPTY_SECTION = {
    "instruction": "(no instruction file was provided)",
    "solution": "(no gold solution was provided: skip the GT checks that need it)",
    "tests": "(no evaluation files were provided)",
    "environment": "(no environment files were provided)",
    "data_description": "(none provided)",
    "domain_knowledge": "(none provided)",
    "other_files": "(none)",
    "hints": "(none)",
    "agent_files": "(no agent artifacts were provided)",
}

REPAIR_TEMPLATE = """\
Your previous reply could not be used: $error
Reply again with ONLY the JSON array of findings described in the instructions: no prose, no \
markdown fences. If the task has no defects, reply with [].
"""

REPAIR_TRUNCATED_TEMPLATE = """\
Your previous reply was cut off at the output limit before the JSON was complete ($error). \
Reply again with ONLY the JSON array of findings, and keep it short: fewer findings (the most \
important first) and brief descriptions. If the task has no defects, reply with [].
"""


# ---------------------------------------------------------------------------------------------
# Output schema


def _string(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


EVIDENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file": _string(MAX_PATH_CHARS),
        "line_start": {"type": ["integer", "null"], "minimum": 1},
        "line_end": {"type": ["integer", "null"], "minimum": 1},
        "snippet": _string(MAX_SNIPPET_CHARS),
    },
    "required": ["file", "line_start", "line_end", "snippet"],
    "additionalProperties": False,
}

FINDING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": list(CATEGORIES)},
        "subcategory": {"type": "string", "enum": list(PAPER_SUBCATEGORIES)},
        "severity": {"type": "string", "enum": list(SEVERITY_ORDER)},
        "finding_type": {"type": "string", "enum": ["Bug", "Warning"]},
        "title": _string(MAX_TITLE_CHARS),
        "description": _string(MAX_DESCRIPTION_CHARS),
        "evidence": {
            "type": "array",
            "items": EVIDENCE_SCHEMA,
            "minItems": 0,
            "maxItems": MAX_EVIDENCE,
        },
        "recommendation": _string(MAX_RECOMMENDATION_CHARS),
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": [
        "category",
        "subcategory",
        "severity",
        "finding_type",
        "title",
        "description",
        "evidence",
        "recommendation",
        "confidence",
    ],
    "additionalProperties": False,
}

# The contract: a JSON array of findings (constrained decoders get exactly this).
FINDINGS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": FINDING_SCHEMA,
    "minItems": 0,
    "maxItems": MAX_FINDINGS,
}

# The same array wrapped in an object, for providers whose structured-output mode needs an
# object at the root. The parser accepts both shapes.
FINDINGS_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"findings": FINDINGS_SCHEMA},
    "required": ["findings"],
    "additionalProperties": False,
}


PROMPT_TEMPLATES: dict[str, str] = {
    "system": SYSTEM_PROMPT,
    "user": USER_TEMPLATE,
    "agent_section": AGENT_SECTION_TEMPLATE,
    "agent_phase1_note": AGENT_PHASE1_NOTE,
    "file_header": FILE_HEADER_TEMPLATE,
    "file_footer": FILE_FOOTER_TEMPLATE,
    "omitted_marker": OMITTED_MARKER_TEMPLATE,
    "clipped_line": CLIPPED_LINE_TEMPLATE,
    "empty_sections": json.dumps(EMPTY_SECTION, sort_keys=True),
    "repair": REPAIR_TEMPLATE,
    "repair_truncated": REPAIR_TRUNCATED_TEMPLATE,
    "output_schema": json.dumps(FINDINGS_SCHEMA, sort_keys=True),
    "output_schema_object": json.dumps(FINDINGS_OBJECT_SCHEMA, sort_keys=True),
}


def templates_digest() -> str:
    """sha256 over every template (name and text, sorted by name)."""
    digest = hashlib.sha256()
    for name in sorted(PROMPT_TEMPLATES):
        digest.update(name.encode() + b"\0" + PROMPT_TEMPLATES[name].encode() + b"\0")
    return "sha256:" + digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# Rendering


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
) -> list[Message]:
    """System and user messages for `protocol`. `file_budgets` caps the numbered body of the
    named files (chars); a description of every shortening is appended to `notes`."""
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
    return [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=user)]


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
