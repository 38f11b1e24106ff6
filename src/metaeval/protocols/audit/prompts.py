"""Texts of the BenchGuard LLM audit's prompts: system prompt, user prompts, repair prompts.

The wording is ours; the definitions (taxonomy, categorization priority, one-fix and split
tests, discoverability gate, severity, finding type, confidence tiers, six phases) follow the
BenchGuard paper. The taxonomy block is generated from `findings.TAXONOMY`, so the prompt and
the validator can never disagree.

Every artifact is shown with line numbers (`12| code`) so models can cite lines; the numbers
are those of the loaded file, also when a file is shortened to fit a context window (omitted
lines are replaced by a marker naming them), so citations stay checkable by `evidence.py`
(rendering: `prompt_render.py`; the output schema: `output_schema.py`).

`PROMPT_TEMPLATES` maps a name to every text that shapes a request (the system prompt with the
taxonomy rendered in, the user templates, the repair templates, the markers and the output
schema), so a run manifest can hash them all.
"""

from __future__ import annotations

import functools
import hashlib
import json
from string import Template
from typing import Literal

from metaeval.protocols.audit.findings import (
    CATEGORIES,
    SEVERITY_ORDER,
    TAXONOMY,
)
from metaeval.protocols.audit.output_schema import (
    DEFAULT_ANSWER,
    FINDINGS_OBJECT_SCHEMA,
    FINDINGS_SCHEMA,
    MAX_TITLE_CHARS,
    AnswerOptions,
)

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


REASONING_OUTPUT = """\
Reasoning first: before the JSON, write out phases 1 to 5 of HOW TO WORK briefly, as notes \
under the headings "Phase 1" to "Phase 5". Then end your reply with the findings as one JSON \
array in a ```json fenced block; write nothing after that block."""
JSON_ONLY_OUTPUT = "Reply with a JSON array and nothing else: no prose before or after it, no \
markdown fences."
JSON_ONLY_PHASE6 = "(e) Reply with the JSON array only."
REASONING_PHASE6 = "(e) End your reply with the JSON array in a ```json fenced block."


@functools.cache
def system_prompt(answer: AnswerOptions = DEFAULT_ANSWER) -> str:
    """The system prompt for `answer`'s caps; with `answer.reasoning`, the model writes its
    analysis out before the JSON (the paper's phases) instead of answering with JSON only."""
    text = Template(SYSTEM_TEMPLATE).substitute(
        area_gt=AREA_TITLES["GT"],
        area_eval=AREA_TITLES["EVAL"],
        area_inst=AREA_TITLES["INST"],
        area_env=AREA_TITLES["ENV"],
        taxonomy=taxonomy_block(),
        example=json.dumps([_EXAMPLE_FINDING], indent=1),
        categories=", ".join(CATEGORIES),
        severities=", ".join(SEVERITY_ORDER),
        max_title=MAX_TITLE_CHARS,
        max_description=answer.max_description,
        max_evidence=answer.max_evidence,
        max_findings=answer.max_findings,
    )
    return text.replace(JSON_ONLY_OUTPUT, REASONING_OUTPUT) if answer.reasoning else text


SYSTEM_PROMPT = system_prompt()

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
