"""Check 1: file names the instruction gives vs. the ones the solution and tests use.

File names are words with a known data/code extension (`sales.csv`, `/app/result.json`,
`out/report.md`), in backticks or plain text. They are taken from the instruction, from the
solution (Python string literals, shell command words, Python heredocs) and from the tests
the same way, and compared by base name. Not counted: files under `tests/`, `/tests/`,
`solution/`, `/logs/`, `/tmp/` and system directories; names of the task's own files in
tests/ and solution/ (fixtures, helpers); well-known names (requirements.txt, test.sh,
solve.sh, Dockerfile, ...); URLs.

Two patterns are reported:

- INST-CONTRADICT: the instruction names a file X that neither the solution, the tests nor the
  environment use, while the solution uses a similar file Y (same extension, a shared name
  word, a common prefix or a close spelling) that the instruction never mentions, e.g.
  instruction `sales.csv`, solution `sales_2023.csv`. An agent following the instruction
  looks for (or writes) the wrong file. Bug, High, confidence 0.6 (0.75 when the environment
  ships Y).
- EVAL-MISMATCH: the instruction names an output file W (the nearest verb before it is an
  output verb such as "write ... to", or the names are similar) that the tests never read and the environment does not provide, while the
  tests read a file Z of the same extension that the instruction never mentions, e.g.
  instruction `results.json`, tests `output.json`. When the tests read none of the
  instructed outputs, a file of another extension counts too (instruction `result.json`,
  tests `output.txt`). An agent that writes exactly what it was told fails. Bug, High,
  confidence 0.55-0.65 (at most 0.6 across extensions), 0.75 when the solution writes W but
  not Z (the reference itself would fail).

A pair already reported as INST-CONTRADICT is not reported again as EVAL-MISMATCH (one fix,
the instruction, resolves both).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.filename_mentions import MentionCollector, Mentions
from metaeval.protocols.audit.static.filename_vocabulary import EXTENSIONS
from metaeval.protocols.audit.static.finding_builder import evidence_line, make_finding
from metaeval.protocols.audit.static.task_context import TaskContext

_VERB = re.compile(
    r"\b(?P<out>write|writes|written|save|saves|saved|output|outputs|produce|produces|create|"
    r"creates|generate|generates|store|stores|export|exports|emit|emits|dump|dumps|result|"
    r"results|report|into)\b|\b(?:read|reads|load|loads|open|opens|parse|parses|given|input|"
    r"inputs|from|use|uses|using|contains|provided|located|in)\b",
    re.I,
)


def is_output_mention(lines: list[str], line: int, token: str) -> bool:
    """Whether the nearest verb before the file name (within ~120 characters, possibly on the
    previous lines of the same paragraph) is an output verb."""
    text = lines[line - 1]
    position = text.find(token)
    if position < 0:
        return False
    before = text[:position]
    for previous in reversed(lines[max(0, line - 3) : line - 1]):
        if not previous.strip():
            break
        before = previous + " " + before
    last = None
    for match in _VERB.finditer(before[-120:]):
        last = match
    return last is not None and last.group("out") is not None


def _ext(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower()


def _stem(name: str) -> str:
    stem = name.lower()
    while "." in stem:
        head, _, tail = stem.rpartition(".")
        if tail in EXTENSIONS or tail in ("tar",):
            stem = head
        else:
            break
    return stem


def similarity(a: str, b: str) -> float:
    """0..1; >= 0.6 when two names plausibly denote the same file."""
    sa, sb = _stem(a), _stem(b)
    if sa == sb:
        return 1.0
    ratio = difflib.SequenceMatcher(None, sa, sb).ratio()
    words_a = {w for w in re.findall(r"[a-z]+", sa) if len(w) >= 3}
    words_b = {w for w in re.findall(r"[a-z]+", sb) if len(w) >= 3}
    if words_a & words_b or sa.startswith(sb) or sb.startswith(sa):
        return max(ratio, 0.7)
    return ratio


@dataclass
class _Mentioned:
    """The file names each side of the task mentions."""

    instruction: Mentions
    solution: Mentions
    tests: Mentions
    environment: set[str]  # base names the environment ships or mentions


def check_file_names(ctx: TaskContext) -> list[Finding]:
    instruction = ctx.instruction
    if instruction is None:
        return []
    collector = MentionCollector(ctx)
    instr = Mentions()
    collector.text(instr, instruction.path, ctx.lines(instruction.path))
    if not instr.where:
        return []
    seen = _Mentioned(
        instr,
        collector.role("solution"),
        collector.role("tests"),
        _environment_names(ctx, collector),
    )
    reported: set[tuple[str, str]] = set()
    findings = _contradictions(ctx, seen, reported)
    if seen.tests.where:
        findings += _eval_mismatches(ctx, seen, reported)
    return findings


def _environment_names(ctx: TaskContext, collector: MentionCollector) -> set[str]:
    """Base names of environment/ files, the file names they mention, and COPY sources."""
    env_names: set[str] = set()
    for f in ctx.role_files("environment"):
        env_names.add(f.path.rsplit("/", 1)[-1])
        env = Mentions()
        collector.text(env, f.path, ctx.lines(f.path))
        env_names |= set(env.where)
    for source in ctx.docker.copy_sources:
        env_names.add(source.rstrip("/").rsplit("/", 1)[-1])
    return env_names


# -- INST-CONTRADICT: instruction vs. solution ----------------------------------------------


def _contradictions(
    ctx: TaskContext, seen: _Mentioned, reported: set[tuple[str, str]]
) -> list[Finding]:
    findings: list[Finding] = []
    for name in seen.instruction.names():
        other = _solution_instead(seen, name)
        if other is None:
            continue
        reported.add((name, other))
        findings.append(_contradiction_finding(ctx, seen, name, other))
    return findings


def _solution_instead(seen: _Mentioned, name: str) -> str | None:
    """The similar file the solution uses instead of the instructed `name`, if any."""
    instr, solution = seen.instruction, seen.solution
    if solution.has(name) or seen.tests.has(name) or name in seen.environment or not solution.where:
        return None
    candidates = [
        (similarity(name, other), other)
        for other in solution.names()
        if _ext(other) == _ext(name) and not instr.has(other) and other != name
    ]
    candidates = [c for c in candidates if c[0] >= 0.6]
    if not candidates:
        return None
    _, other = max(candidates)
    return other


def _contradiction_finding(ctx: TaskContext, seen: _Mentioned, name: str, other: str) -> Finding:
    i_file, i_line, _ = seen.instruction.first(name)
    s_file, s_line, s_token = seen.solution.first(other)
    shipped = other in seen.environment
    return make_finding(
        ctx,
        subcategory="INST-CONTRADICT",
        severity="High",
        finding_type="Bug",
        title=f"Instruction names `{name}` but the solution uses `{other}`",
        description=(
            f"The instruction refers to `{name}`, which the reference solution never "
            f"uses; the solution uses `{s_token}` instead, a similar file the "
            "instruction never mentions"
            + (" (and the environment ships it)" if shipped else "")
            + ". An agent that follows the instruction works with a file that is not "
            "the one the task was built and validated with, so a faithful agent is "
            "judged wrong (or cannot find its input)."
        ),
        recommendation=(
            f"Make the instruction and the solution agree on one file name (name "
            f"`{other}` in the instruction, or use `{name}` in the solution and the "
            "environment)."
        ),
        confidence=0.75 if shipped else 0.6,
        evidence=[
            evidence_line(ctx, i_file, i_line),
            evidence_line(ctx, s_file, s_line),
        ],
    )


# -- EVAL-MISMATCH: instruction output file vs. the file the tests read ---------------------


@dataclass
class _Mismatch:
    """An instructed file `name` the tests never read, and the file `other` they read."""

    name: str
    other: str
    score: float
    output_line: bool  # the instruction names `name` as an output
    cross_ext: bool  # `other` has another extension


def _eval_mismatches(
    ctx: TaskContext, seen: _Mentioned, reported: set[tuple[str, str]]
) -> list[Finding]:
    instr, tests = seen.instruction, seen.tests
    outputs = [
        n
        for n in instr.names()
        if is_output_mention(ctx.lines(instr.first(n)[0]), instr.first(n)[1], instr.first(n)[2])
    ]
    tests_read_an_output = any(tests.has(n) for n in outputs)
    findings: list[Finding] = []
    for name in instr.names():
        if tests.has(name) or name in seen.environment:
            continue
        if any(pair[0] == name for pair in reported):
            continue  # already an instruction/solution contradiction
        mismatch = _tested_instead(seen, name, name in outputs, tests_read_an_output)
        if mismatch is None or (name, mismatch.other) in reported:
            continue
        reported.add((name, mismatch.other))
        findings.append(_mismatch_finding(ctx, seen, mismatch))
    return findings


def _tested_instead(
    seen: _Mentioned, name: str, output_line: bool, tests_read_an_output: bool
) -> _Mismatch | None:
    """The file the tests read in place of the instructed `name`, if there is one."""
    unmentioned = [
        other
        for other in seen.tests.names()
        if not seen.instruction.has(other) and other not in seen.environment
    ]
    candidates = []
    for other in unmentioned:
        if _ext(other) != _ext(name):
            continue
        score = similarity(name, other)
        if score >= 0.6 or output_line:
            candidates.append((score, other))
    cross_ext = False
    if not candidates and output_line and not tests_read_an_output:
        # The tests check none of the instructed outputs but read another file.
        candidates = [(similarity(name, other), other) for other in unmentioned]
        cross_ext = bool(candidates)
    if not candidates:
        return None
    score, other = max(candidates)
    return _Mismatch(name, other, score, output_line, cross_ext)


def _mismatch_confidence(seen: _Mentioned, mismatch: _Mismatch) -> tuple[float, str]:
    """Confidence, and a note on what the reference solution writes."""
    writes_instructed = seen.solution.has(mismatch.name)
    writes_tested = seen.solution.has(mismatch.other)
    if writes_instructed and not writes_tested:
        confidence = 0.75
        note = " (the reference solution writes the instructed file, so it fails too)"
    elif writes_instructed and writes_tested:
        confidence = 0.65
        note = (
            " (the reference solution writes both files, so the oracle passes and "
            "hides the mismatch)"
        )
    else:
        confidence = 0.65 if mismatch.score >= 0.6 and mismatch.output_line else 0.55
        note = ""
    if mismatch.cross_ext:
        confidence = min(confidence, 0.6)
    return confidence, note


def _mismatch_finding(ctx: TaskContext, seen: _Mentioned, mismatch: _Mismatch) -> Finding:
    name, other = mismatch.name, mismatch.other
    i_file, i_line, _ = seen.instruction.first(name)
    t_file, t_line, t_token = seen.tests.first(other)
    confidence, note = _mismatch_confidence(seen, mismatch)
    return make_finding(
        ctx,
        subcategory="EVAL-MISMATCH",
        severity="High",
        finding_type="Bug",
        title=f"Tests read `{other}` but the instruction asks for `{name}`",
        description=(
            f"The instruction tells the agent to produce `{name}`, but the tests "
            f"never look at it; they read `{t_token}`, which the instruction never "
            f"mentions{note}. An agent that writes exactly the file it was asked "
            "for is marked as failing."
        ),
        recommendation=(
            f"Have the tests read `{name}` (or change the instruction to `{other}`), "
            "so the specification and the evaluator check the same file."
        ),
        confidence=confidence,
        evidence=[
            evidence_line(ctx, i_file, i_line),
            evidence_line(ctx, t_file, t_line),
        ],
    )
