"""Check 7: task.toml and the required files.

Subcategory choices (the taxonomy has no "configuration" subcategory, so each problem goes to
the one whose fix it needs):

- **Malformed or unreadable task.toml** (`task.config_error`) -> ENV-RESOURCE, Critical, Bug, 0.9. task.toml
  is the runtime configuration: timeouts, cpus, memory, storage, GPUs, network. When it does
  not parse, Harbor cannot load the task (or an auditor falls back to defaults), so the
  resources the task was designed for are not applied. ENV-RESOURCE ("the task needs network,
  external services or exceeds time limits") is the subcategory about those runtime limits;
  ENV-DEP is about packages and ENV-PATH about file locations, neither of which is at stake.
- **Unknown or misplaced keys** (`task.unknown_keys`) -> one ENV-RESOURCE finding, Warning,
  citing each key's line in task.toml. Harbor drops such keys silently, so the setting the
  author meant (a timeout, a memory limit, `allow_internet` under `[agent]`) is not applied
  and the task runs with the default. Medium when a dropped key is a runtime setting Harbor
  knows in another table (misplaced: `agent.allow_internet`, a top-level `timeout_sec`) or a
  near-miss spelling of one (`memory_gb`), confidence 0.8; Low otherwise, 0.6.
- **Invalid values** (`toml_values.value_problems`: a known key whose value has the wrong type
  or lies outside its range, e.g. `timeout_sec = "sixty"`, `nan` or `-5`, `memory_mb = "2G"`,
  `cpus = [1, 2]`, `allow_internet = "yes"`) -> one ENV-RESOURCE finding per key, High, Bug,
  0.9, naming the key and the value and citing its line: the runtime limit the author meant
  is not what any harness applies.
- **Empty instruction.md** -> INST-INFEASIBLE, Critical, Bug, 0.95, as for a missing one.
- **Missing files** (`task.missing_files`):
  - `instruction.md` -> INST-INFEASIBLE, Critical, Bug, 0.9: with no instruction the task
    cannot be solved as written;
  - `tests/test.sh` (or `tests/`) -> EVAL-MISMATCH, Critical, Bug, 0.9: nothing evaluates the
    agent, so the reward cannot reflect the specification;
  - the solution (`solution/...`) -> GT-NO-ORACLE, Low, Warning, 0.5: nothing is wrong
    with what agents see, but there is no ground truth to run, so feasibility was never
    demonstrated (a missing oracle, not an infeasible task);
  - `environment/Dockerfile` (and no `docker_image`) -> ENV-DEP, High, Bug, 0.8: no image
    defines the dependencies the task runs with;
  - `task.toml` -> ENV-RESOURCE, Medium, Warning, 0.7: runtime limits fall back to defaults;
  - anything else -> ENV-PATH, Medium, Warning, 0.6: a file the runtime expects is not at
    its path. Missing agent results (`agent_results/<task>/`, execution tier) are skipped:
    they are not part of the benchmark.

  A missing file has no line to quote: its evidence names the file without line numbers.
"""

from __future__ import annotations

import difflib
import re

from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.static.finding_builder import evidence_line, make_finding, plural
from metaeval.protocols.audit.static.missing_files import missing_file_findings
from metaeval.protocols.audit.static.task_context import TaskContext
from metaeval.protocols.audit.static.toml_lines import toml_key_lines, toml_line_for
from metaeval.tasks.toml_schema import ENVIRONMENT_KEYS
from metaeval.tasks.toml_values import value_problems

LISTED_KEYS = 20
"""At most this many dropped keys are named in the finding's text (the count says the rest)."""
MAX_VALUE_FINDINGS = 20
FUZZY_KEYS = 200

# Runtime settings Harbor reads somewhere; seeing one of these in the wrong place matters.
_RUNTIME_KEYS = frozenset(
    {
        "timeout_sec",
        "build_timeout_sec",
        "cpus",
        "memory",
        "memory_mb",
        "storage",
        "storage_mb",
        "gpus",
        "gpu_types",
        "allow_internet",
        "network_mode",
        "allowed_hosts",
        "docker_image",
        "workdir",
        "env",
        "user",
    }
)
_LINE_COL = re.compile(r"line (\d+)")


def _toml_evidence(ctx: TaskContext, line: int | None) -> list[Evidence]:
    if line and ctx.toml_lines and line <= len(ctx.toml_lines):
        return [evidence_line(ctx, "task.toml", line)]
    return [Evidence(file="task.toml")]


def _config_error(ctx: TaskContext) -> list[Finding]:
    error = ctx.task.config_error
    if not error or "task.toml" in ctx.task.missing_files:  # a missing file is reported below
        return []
    match = _LINE_COL.search(error)
    line = int(match.group(1)) if match else None
    return [
        make_finding(
            ctx,
            subcategory="ENV-RESOURCE",
            severity="Critical",
            finding_type="Bug",
            title="task.toml could not be loaded",
            description=(
                f"task.toml could not be read as TOML ({error}). Harbor cannot load the task's runtime "
                "configuration (timeouts, cpus, memory, network), so the task either fails to "
                "start or runs with defaults it was not designed for; every agent's result "
                "then reflects the broken configuration, not its work."
            ),
            recommendation=(
                'Fix the TOML syntax (check it with `python -c "import tomllib; '
                "tomllib.load(open('task.toml', 'rb'))\"`)."
            ),
            confidence=0.9,
            evidence=_toml_evidence(ctx, line),
        )
    ]


def _known_elsewhere(key: str) -> bool:
    """A dropped key whose last part is (or nearly is) a runtime setting."""
    last = re.sub(r"\[\d+\]", "", key).rsplit(".", 1)[-1]
    if last in _RUNTIME_KEYS:
        return True
    known = set(_RUNTIME_KEYS) | set(ENVIRONMENT_KEYS)
    return bool(difflib.get_close_matches(last, known, n=1, cutoff=0.75))


def _any_runtime_key(keys: list[str]) -> bool:
    """Whether some dropped key is a runtime setting: exact names are looked up for every key,
    near-miss spellings (difflib, slow) for the first FUZZY_KEYS keys only, so a file with
    100,000 junk keys stays fast."""
    lasts = {re.sub(r"\[\d+\]", "", k).rsplit(".", 1)[-1] for k in keys}
    if lasts & _RUNTIME_KEYS:
        return True
    return any(_known_elsewhere(k) for k in keys[:FUZZY_KEYS])


def _unknown_keys(ctx: TaskContext) -> list[Finding]:
    keys = list(ctx.task.unknown_keys)
    if not keys:
        return []
    key_lines = toml_key_lines(ctx.toml_lines)
    evidence: list[Evidence] = []
    located: list[str] = []
    for key in keys:
        line = toml_line_for(key_lines, key)
        located.append(f"`{key}`" + (f" (line {line})" if line else ""))
        if line and len(evidence) < 8:
            evidence.append(evidence_line(ctx, "task.toml", line))
    if not evidence:
        evidence = [Evidence(file="task.toml")]
    shown = located[:LISTED_KEYS]
    if len(located) > LISTED_KEYS:
        shown.append(f"and {len(located) - LISTED_KEYS} more")
    evidence = evidence[:8]
    runtime = _any_runtime_key(keys)
    hint = ""
    if any(
        re.sub(r"\[\d+\]", "", k).endswith("allow_internet") and not k.startswith("environment.")
        for k in keys
    ):
        hint = " `allow_internet` is read only under `[environment]` (or use `network_mode`)."
    return [
        make_finding(
            ctx,
            subcategory="ENV-RESOURCE",
            severity="Medium" if runtime else "Low",
            finding_type="Warning",
            title=f"task.toml has {plural(len(keys), 'key')} Harbor ignores",
            description=(
                f"Harbor does not read {', '.join(shown)}: its task models drop unknown "
                "keys without a warning, so the setting the author intended is not applied "
                "and the task runs with Harbor's default"
                + (
                    " (for runtime settings such as timeouts, resources or network this changes "
                    "what agents can do within the task)."
                    if runtime
                    else "."
                )
                + hint
            ),
            recommendation=(
                "Move each setting to the table Harbor reads it from ([agent], [verifier], "
                "[environment]; free-form data goes under [metadata]) or delete it."
            ),
            confidence=0.8 if runtime else 0.6,
            evidence=evidence,
        )
    ]


def _bad_values(ctx: TaskContext) -> list[Finding]:
    """One ENV-RESOURCE finding per task.toml value of the wrong type or out of range."""
    problems = value_problems(ctx.task.config)
    if not problems:
        return []
    key_lines = toml_key_lines(ctx.toml_lines)
    findings: list[Finding] = []
    for problem in problems[:MAX_VALUE_FINDINGS]:
        line = toml_line_for(key_lines, problem.key)
        findings.append(
            make_finding(
                ctx,
                subcategory="ENV-RESOURCE",
                severity="High",
                finding_type="Bug",
                title=f"task.toml sets {problem.key} to an invalid value",
                description=(
                    f"`{problem.key} = {problem.shown}` is not valid: Harbor expects "
                    f"{problem.expected}. Harbor rejects the task or runs it with a limit the "
                    "author did not intend, and other runners read the value differently, so "
                    "results depend on the harness rather than on the agent."
                ),
                recommendation=f"Set `{problem.key}` to {problem.expected}, or remove it.",
                confidence=0.9,
                evidence=_toml_evidence(ctx, line),
            )
        )
    if len(problems) > MAX_VALUE_FINDINGS:
        rest = ", ".join(str(p) for p in problems[MAX_VALUE_FINDINGS : MAX_VALUE_FINDINGS + 20])
        findings[
            -1
        ].description += f" {len(problems) - MAX_VALUE_FINDINGS} more invalid values: {rest}."
    return findings


def _empty_instruction(ctx: TaskContext) -> list[Finding]:
    instruction = ctx.task.file("instruction.md")
    if instruction is None or instruction.text.strip():
        return []
    return [
        make_finding(
            ctx,
            subcategory="INST-INFEASIBLE",
            severity="Critical",
            finding_type="Bug",
            title="instruction.md is empty",
            description=(
                "instruction.md holds no text, so agents are told nothing about what to do: "
                "the task cannot be solved as written and its results measure nothing."
            ),
            recommendation="Write the full task specification into instruction.md.",
            confidence=0.95,
            evidence=[Evidence(file="instruction.md")],
        )
    ]


def _unreadable_instruction(ctx: TaskContext) -> list[Finding]:
    """instruction.md present but not loaded as text (binary, not UTF-8, unreadable); a link
    leaving the task has its own finding (links.py)."""
    reasons = [
        entry.split(": ", 1)[1]
        for entry in ctx.task.skipped_files
        if entry.startswith("instruction.md: ") and "outside the task" not in entry
    ]
    if not reasons:
        return []
    return [
        make_finding(
            ctx,
            subcategory="INST-INFEASIBLE",
            severity="Critical",
            finding_type="Bug",
            title="instruction.md is not readable text",
            description=(
                f"instruction.md could not be read as UTF-8 text ({reasons[0]}), so agents are "
                "given no usable task description: the task cannot be solved as written and "
                "its results measure nothing."
            ),
            recommendation="Write the task specification into instruction.md as UTF-8 text.",
            confidence=0.9,
            evidence=[Evidence(file="instruction.md")],
        )
    ]


def check_task_config(ctx: TaskContext) -> list[Finding]:
    return (
        _config_error(ctx)
        + _unknown_keys(ctx)
        + _bad_values(ctx)
        + missing_file_findings(ctx)
        + _empty_instruction(ctx)
        + _unreadable_instruction(ctx)
    )
