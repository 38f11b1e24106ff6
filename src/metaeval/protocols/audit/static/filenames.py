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
from dataclasses import dataclass, field

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.finding_builder import evidence_line, make_finding
from metaeval.protocols.audit.static.python_source import locate
from metaeval.protocols.audit.static.task_context import TaskContext

EXTENSIONS = [
    "csv",
    "tsv",
    "json",
    "jsonl",
    "ndjson",
    "txt",
    "log",
    "xml",
    "yaml",
    "yml",
    "toml",
    "ini",
    "cfg",
    "conf",
    "parquet",
    "feather",
    "arrow",
    "xlsx",
    "xls",
    "ods",
    "h5",
    "hdf5",
    "npy",
    "npz",
    "pkl",
    "pickle",
    "joblib",
    "pt",
    "pth",
    "ckpt",
    "onnx",
    "safetensors",
    "png",
    "jpg",
    "jpeg",
    "gif",
    "bmp",
    "svg",
    "pdf",
    "html",
    "htm",
    "md",
    "rst",
    "py",
    "sh",
    "r",
    "ipynb",
    "sql",
    "db",
    "sqlite",
    "sqlite3",
    "zip",
    "gz",
    "tgz",
    "bz2",
    "xz",
    "fa",
    "fasta",
    "fastq",
    "fq",
    "bam",
    "sam",
    "vcf",
    "bed",
    "gff",
    "gtf",
    "pdb",
    "cif",
    "mol",
    "mol2",
    "sdf",
    "smi",
    "nc",
    "tif",
    "tiff",
    "wav",
    "mp3",
    "mp4",
    "c",
    "cc",
    "cpp",
    "h",
    "hpp",
    "rs",
    "go",
    "js",
    "ts",
    "java",
    "rb",
    "php",
    "dat",
    "bin",
    "out",
    "mat",
    "dta",
    "sav",
    "rds",
    "rdata",
]
_EXT_GROUP = "|".join(sorted(EXTENSIONS, key=len, reverse=True))
_FILE = re.compile(
    rf"(?<![\w@$%{{}}.-])(/?(?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXT_GROUP}))(?![\w-])",
    re.I,
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+|\b[\w.+-]+@[\w-]+\.[\w.]+", re.I)
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


WELL_KNOWN = frozenset(
    n.lower()
    for n in [
        "requirements.txt",
        "requirements-dev.txt",
        "test.sh",
        "solve.sh",
        "run-tests.sh",
        "run_tests.sh",
        "setup.py",
        "setup.cfg",
        "pyproject.toml",
        "conftest.py",
        "Dockerfile",
        "docker-compose.yaml",
        "docker-compose.yml",
        "package.json",
        "package-lock.json",
        "task.toml",
        "instruction.md",
        "README.md",
        "Makefile",
        "__init__.py",
        "__main__.py",
        "reward.txt",
        "reward.json",
        "ctrf.json",
        "pytest.ini",
        "tox.ini",
        "uv.lock",
        "poetry.lock",
        "environment.yml",
        "environment.yaml",
        "test-stdout.txt",
        ".gitignore",
        "domain_knowledge.md",
        "data_description.md",
        "benchguard_hints.yaml",
    ]
)
_IGNORED_DIRS = (
    "/tests/",
    "tests/",
    "/solution/",
    "solution/",
    "/logs/",
    "/tmp/",
    "/usr/",
    "/etc/",
    "/proc/",
    "/dev/",
    "/sys/",
    "/bin/",
    "/lib/",
    "/var/",
    "/oracle/",
)


@dataclass
class Mentions:
    """Base name -> where it is mentioned, in order of first mention."""

    where: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)  # (file, line, full)

    def add(self, token: str, file: str, line: int) -> None:
        self.where.setdefault(token.rsplit("/", 1)[-1], []).append((file, line, token))

    def names(self) -> list[str]:
        return list(self.where)

    def has(self, name: str) -> bool:
        return name in self.where

    def first(self, name: str) -> tuple[str, int, str]:
        return self.where[name][0]


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


# Words that look like file names but are not files the task works with: a traceback's
# frames (`File "/usr/lib/.../base.py", line 283`), Python modules in import statements
# (`from django.db import models`).
_NOT_FILES = re.compile(r'File "[^"\n]+", line \d+|\b(?:from|import)\s+[\w.]+')
_PATCHED = re.compile(r"^(?:'?diff --git a/\S+ b/|\+\+\+ b/)(\S+)", re.M)
_READ_IN_SUBSTITUTION = re.compile(r"\$\((?:[^()]|\([^()]*\))*\)")


def _substitutions(text: str) -> str:
    """The text of every `$(...)` in a command: what a verifier reads inside a test."""
    return " ".join(m.group(0)[2:-1] for m in _READ_IN_SUBSTITUTION.finditer(text))


class _Collector:
    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx
        self.own = {
            p.rsplit("/", 1)[-1].lower() for p in ctx.files if p.startswith(("tests/", "solution/"))
        }

    def keep(self, token: str) -> bool:
        low = token.lower()
        if low.startswith(_IGNORED_DIRS) or "/tests/" in low or "/logs/verifier" in low:
            return False
        base = low.rsplit("/", 1)[-1]
        return base not in WELL_KNOWN and base not in self.own

    def text(self, mentions: Mentions, path: str, lines: list[str], first: int = 1) -> None:
        for offset, line in enumerate(lines):
            if "." not in line:
                continue
            clean = _NOT_FILES.sub(lambda m: " " * len(m.group(0)), _URL.sub(" ", line))
            for match in _FILE.finditer(clean):
                if self.keep(match.group(1)):
                    mentions.add(match.group(1), path, first + offset)

    def role(self, role: str) -> Mentions:
        mentions = Mentions()
        ctx = self.ctx
        for source in ctx.python_sources:
            if source.role != role:
                continue
            lines = ctx.lines(source.file)
            for node, value in source.strings(fstring_parts=True):
                if "." not in value:
                    continue
                for match in _FILE.finditer(_URL.sub(" ", value.replace("\x00", ""))):
                    token = match.group(1)
                    if not self.keep(token):
                        continue
                    first = source.file_line(node)
                    line = locate(
                        lines, first, source.file_end_line(node), token.rsplit("/", 1)[-1]
                    )
                    mentions.add(token, source.file, line)
        for path, script in ctx.shell_scripts.items():
            if ctx.files[path].role != role:
                continue
            lines = ctx.lines(path)
            for command in script.commands:
                if "." not in command.text:
                    continue
                # resolved words: `${1:-data.csv}` is data.csv, `2>/dev/null` is no file;
                # then redirects inside `[ "$(tr -d ' ' < /app/x.txt)" = 6 ]`, which a
                # shell verifier reads its answer with, as the redirect targets say them
                redirects = " ".join(t for simple in command.simple for _, t in simple.redirects)
                seen: set[str] = set()
                for text in (command.resolved, redirects, _substitutions(command.text)):
                    for match in _FILE.finditer(_NOT_FILES.sub(" ", _URL.sub(" ", text))):
                        token = match.group(1)
                        if token in seen or not self.keep(token):
                            continue
                        seen.add(token)
                        base = token.rsplit("/", 1)[-1]
                        mentions.add(token, path, locate(lines, command.line, command.end, base))
        # What the role's own scripts write (`cat > parser.py <<EOF`, `> out.log`) is
        # theirs, not a file they read from the agent.
        written = {
            target.rsplit("/", 1)[-1]
            for path, script in ctx.shell_scripts.items()
            if ctx.files[path].role == role
            for target in [d.target for d in script.heredocs]
            + [t for c in script.commands for sc in c.simple for op, t in sc.redirects if ">" in op]
            if target
        }
        for path, script in ctx.shell_scripts.items():  # restored or patched by the tests
            if ctx.files[path].role != role:
                continue
            for command in script.commands:
                for sc in command.simple:
                    if sc.words[:1] == ["git"] and sc.words[1:2] in (["checkout"], ["restore"]):
                        written |= {w.rsplit("/", 1)[-1] for w in sc.words[2:] if "." in w}
            written |= {m.rsplit("/", 1)[-1] for m in _PATCHED.findall(ctx.files[path].text)}
        for name in written & set(mentions.where):
            del mentions.where[name]
        # Sort by (file order, line) so "first mention" is stable.
        order = {p: i for i, p in enumerate(ctx.files)}
        for name in mentions.where:
            mentions.where[name].sort(key=lambda m: (order.get(m[0], 0), m[1]))
        return mentions


def check_file_names(ctx: TaskContext) -> list[Finding]:
    instruction = ctx.instruction
    if instruction is None:
        return []
    collector = _Collector(ctx)
    instr = Mentions()
    collector.text(instr, instruction.path, ctx.lines(instruction.path))
    if not instr.where:
        return []
    solution = collector.role("solution")
    tests = collector.role("tests")
    env_names: set[str] = set()
    for f in ctx.role_files("environment"):
        env_names.add(f.path.rsplit("/", 1)[-1])
        env = Mentions()
        collector.text(env, f.path, ctx.lines(f.path))
        env_names |= set(env.where)
    for source in ctx.docker.copy_sources:
        env_names.add(source.rstrip("/").rsplit("/", 1)[-1])

    findings: list[Finding] = []
    reported: set[tuple[str, str]] = set()

    # INST-CONTRADICT: instruction vs. solution.
    for name in instr.names():
        if solution.has(name) or tests.has(name) or name in env_names or not solution.where:
            continue
        candidates = [
            (similarity(name, other), other)
            for other in solution.names()
            if _ext(other) == _ext(name) and not instr.has(other) and other != name
        ]
        candidates = [c for c in candidates if c[0] >= 0.6]
        if not candidates:
            continue
        score, other = max(candidates)
        reported.add((name, other))
        i_file, i_line, _ = instr.first(name)
        s_file, s_line, s_token = solution.first(other)
        shipped = other in env_names
        findings.append(
            make_finding(
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
        )

    # EVAL-MISMATCH: instruction output file vs. the file the tests read.
    if tests.where:
        outputs = [
            n
            for n in instr.names()
            if is_output_mention(ctx.lines(instr.first(n)[0]), instr.first(n)[1], instr.first(n)[2])
        ]
        tests_read_an_output = any(tests.has(n) for n in outputs)
        for name in instr.names():
            if tests.has(name) or name in env_names:
                continue
            if any(pair[0] == name for pair in reported):
                continue  # already an instruction/solution contradiction
            i_file, i_line, i_token = instr.first(name)
            output_line = name in outputs
            unmentioned = [
                other for other in tests.names() if not instr.has(other) and other not in env_names
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
                continue
            score, other = max(candidates)
            if (name, other) in reported:
                continue
            reported.add((name, other))
            t_file, t_line, t_token = tests.first(other)
            writes_instructed, writes_tested = solution.has(name), solution.has(other)
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
                confidence = 0.65 if score >= 0.6 and output_line else 0.55
                note = ""
            if cross_ext:
                confidence = min(confidence, 0.6)
            findings.append(
                make_finding(
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
            )
    return findings
