"""Deterministic static checks of a Harbor task (BenchGuard's non-LLM definition checks).

Each check is a small function `check(ctx: TaskContext) -> list[Finding]` registered in
`STATIC_CHECKS`; `run_static_checks` runs them all on one loaded task, sharing one parse of
its files (`TaskContext`). Every finding has source and protocol "static" and cites the exact
file, 1-based line and line text from the loaded files (task.toml lines may be read from
disk when the loader did not deliver task.toml).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from metaeval.protocols.audit.findings import Claim, Finding
from metaeval.protocols.audit.static.build import check_build
from metaeval.protocols.audit.static.config import check_task_config
from metaeval.protocols.audit.static.filenames import check_file_names
from metaeval.protocols.audit.static.fixtures import check_test_fixtures
from metaeval.protocols.audit.static.floats import check_float_equality
from metaeval.protocols.audit.static.imports import check_imports
from metaeval.protocols.audit.static.instruction_commands import check_instruction_commands
from metaeval.protocols.audit.static.links import check_links
from metaeval.protocols.audit.static.mounted import check_mounted_files
from metaeval.protocols.audit.static.network import check_test_network
from metaeval.protocols.audit.static.paths import check_absolute_paths
from metaeval.protocols.audit.static.reward import check_reward_written
from metaeval.protocols.audit.static.task_context import TaskContext
from metaeval.protocols.audit.static.vacuous_tests import check_vacuous_tests
from metaeval.protocols.audit.static.verifier_inputs import check_verifier_inputs
from metaeval.protocols.audit.task_view import LoadedTask


@dataclass(frozen=True)
class StaticCheck:
    """A registered static check and the kinds of claim its findings make (`absence`:
    something missing at run time, `assumed` until a run shows it; `intrinsic`: decided
    from the task's files)."""

    name: str
    description: str
    subcategories: tuple[str, ...]
    run: Callable[[TaskContext], list[Finding]]
    claims: tuple[Claim, ...] = ("intrinsic",)


STATIC_CHECKS: tuple[StaticCheck, ...] = (
    StaticCheck(
        "file-names",
        "File names in the instruction vs. those the solution and tests use",
        ("INST-CONTRADICT", "EVAL-MISMATCH"),
        check_file_names,
    ),
    StaticCheck(
        "absolute-paths",
        "Absolute paths in solution/tests that the environment never provides",
        ("ENV-PATH",),
        check_absolute_paths,
        ("absence",),
    ),
    StaticCheck(
        "mounted-files",
        "Files of /tests or /solution that the task's scripts read but the task does not ship",
        ("ENV-PATH",),
        check_mounted_files,
        ("absence",),
    ),
    StaticCheck(
        "test-fixtures",
        "Files the tests read from a directory the image copies, which nothing provides",
        ("ENV-PATH",),
        check_test_fixtures,
        ("absence",),
    ),
    StaticCheck(
        "python-imports",
        "Third-party imports in solution/tests that nothing installs",
        ("ENV-DEP",),
        check_imports,
        ("absence",),
    ),
    StaticCheck(
        "reward-written",
        "tests/test.sh writes /logs/verifier/reward.txt or reward.json",
        ("EVAL-MISMATCH",),
        check_reward_written,
    ),
    StaticCheck(
        "test-network",
        "Network use in tests/ while task.toml disables the verifier's network",
        ("ENV-RESOURCE",),
        check_test_network,
    ),
    StaticCheck(
        "float-equality",
        "Exact == / != on floats in Python tests",
        ("EVAL-TOLERANCE",),
        check_float_equality,
    ),
    StaticCheck(
        "task-config",
        "task.toml parse errors, keys Harbor ignores, invalid values, missing or empty files",
        ("ENV-RESOURCE", "ENV-DEP", "ENV-PATH", "EVAL-MISMATCH", "INST-INFEASIBLE", "GT-NO-ORACLE"),
        check_task_config,
    ),
    StaticCheck(
        "task-links",
        "Symlinks leading outside the task, FIFOs, sockets and device files",
        ("ENV-PATH",),
        check_links,
    ),
    StaticCheck(
        "build",
        "Merge-conflict markers, COPY/ADD sources outside or missing from the build context, "
        "RUN steps reading files the context lacks, "
        "local-only image names, compose files referencing missing files",
        ("ENV-PATH", "ENV-DEP", "EVAL-MISMATCH", "GT-LOGIC", "INST-CONTRADICT"),
        check_build,
        ("intrinsic", "absence"),  # a local-only image name is an absence claim
    ),
    StaticCheck(
        "vacuous-tests",
        "Assertions that run only if the output exists, inside a try that swallows them, "
        "or that check a number by containment",
        ("EVAL-COVERAGE",),
        check_vacuous_tests,
    ),
    StaticCheck(
        "verifier-inputs",
        "A solution reading /tests (uploaded only for the verifier), tests reading their "
        "reference from a path the agent can write",
        ("ENV-PATH", "EVAL-MISMATCH"),
        check_verifier_inputs,
    ),
    StaticCheck(
        "instruction-commands",
        "Files the instruction's own commands write where the tests demand another file",
        ("INST-CONTRADICT",),
        check_instruction_commands,
        ("absence",),  # the tested path may be in the image: no task file names it
    ),
)


def static_check_names() -> list[str]:
    return [check.name for check in STATIC_CHECKS]


@dataclass
class StaticRun:
    """Findings of one task plus which checks ran and which crashed (with the error)."""

    findings: list[Finding] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


def run_static_checks_report(
    task: LoadedTask, checks: Sequence[StaticCheck] | None = None
) -> StaticRun:
    """Run the checks on one task; a check that raises is recorded, the others still run."""
    ctx = TaskContext(task)
    result = StaticRun()
    for check in STATIC_CHECKS if checks is None else checks:
        try:
            found = check.run(ctx)
        except Exception as exc:  # noqa: BLE001 - one broken check must not stop the audit
            result.errors[check.name] = f"{type(exc).__name__}: {exc}"
            continue
        result.ran.append(check.name)
        result.findings.extend(found)
    return result


def run_static_checks(
    task: LoadedTask, checks: Sequence[StaticCheck] | None = None
) -> list[Finding]:
    """All static findings for one task, in registry order (deterministic)."""
    return run_static_checks_report(task, checks).findings


__all__ = [
    "STATIC_CHECKS",
    "StaticCheck",
    "StaticRun",
    "TaskContext",
    "run_static_checks",
    "run_static_checks_report",
    "static_check_names",
]
