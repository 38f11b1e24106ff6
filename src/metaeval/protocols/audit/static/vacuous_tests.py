"""Tests that do not test: assertions that a missing or wrong output cannot fail.

Read from the Python test code (`tests/` files and Python heredocs of its scripts), one
finding per kind and file:

- **guarded**: every assertion of a test function sits under `if exists(X):` (`os.path.exists`,
  `isfile`, `Path.exists`/`is_file`) with no `else` that fails, or after `if not exists(X):
  return` / `pytest.skip(...)`. Without the output the test passes. Not judged when any other
  code of the tests uses X outside such a guard (another test asserting that X exists, a
  fixture loading it): then the suite still fails without X; nor when X is an input the
  environment ships (the guard is always true). X is compared after following
  names through assignments in the function and the module (`p = os.path.join(D, "out")`,
  `Path(D) / "out"`).
- **swallowed**: an `assert` inside `try:` whose handler catches AssertionError (or
  Exception, BaseException, everything) and then only passes, prints, continues or returns:
  the failure never reaches the test runner.
- **membership**: `assert "42" in output` (or `output.startswith("42")`) where the expected
  answer is a number literal: a wrong answer that contains those digits (`142`, `420`) passes.

Guarded and swallowed assertions are EVAL-COVERAGE Bugs at Medium (confidence 0.7),
`self-contained`: the test file shows them. A number checked by membership is a Low Warning
(0.45): some outputs are free text where containment is the intended check.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.finding_builder import (
    dedupe_evidence,
    evidence_line,
    make_finding,
    plural,
)
from metaeval.protocols.audit.static.python_source import (
    PySource,
    path_text,
    simple_assignments,
)
from metaeval.protocols.audit.static.task_context import TaskContext

_EXISTS_CALLS = frozenset({"exists", "isfile", "isdir", "is_file", "is_dir", "lexists"})
_SWALLOWED_TYPES = frozenset({"AssertionError", "Exception", "BaseException"})
_QUIET_CALLS = frozenset({"print", "debug", "info", "warning", "warn", "log", "write"})
_FAIL_CALLS = frozenset({"fail", "exit", "_exit", "abort"})


@dataclass
class _Hit:
    kind: str  # guarded | swallowed | membership
    line: int
    subject: str


def check_vacuous_tests(ctx: TaskContext) -> list[Finding]:
    sources = [s for s in ctx.python_sources if s.role == "tests" and not s.writes]
    unguarded: set[str] = set()
    hits: dict[str, list[_Hit]] = {}
    guarded: list[tuple[str, _Hit]] = []
    any_guard = any(_has_existence_test(s) for s in sources)  # most tests have none
    for source in sources:
        if any_guard:
            used, guards = _guard_hits(source)
            unguarded |= used
            guarded += [(source.file, hit) for hit in guards]
        for hit in _other_hits(source):
            hits.setdefault(source.file, []).append(hit)
    shipped = {f.path.rsplit("/", 1)[-1] for f in ctx.role_files("environment")}
    for path, hit in guarded:
        # a guard on an input the environment ships is always true: the assertions run
        if hit.subject not in unguarded and hit.subject.rsplit("/", 1)[-1] not in shipped:
            hits.setdefault(path, []).append(hit)
    findings: list[Finding] = []
    for path, found in hits.items():
        for kind in ("guarded", "swallowed", "membership"):
            of_kind = [h for h in found if h.kind == kind]
            if of_kind:
                findings.append(_finding(ctx, path, kind, of_kind))
    return findings


def _has_existence_test(source: PySource) -> bool:
    for node in source.nodes:
        if type(node) is ast.If:
            test = node.test
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test = test.operand
            if isinstance(test, ast.Call) and _call_name(test) in _EXISTS_CALLS:
                return True
    return False


def _guard_hits(source: PySource) -> tuple[set[str], list[_Hit]]:
    """Path keys the source uses outside existence guards, and its test functions whose
    every assertion is guarded."""
    module_names = simple_assignments(source.tree.body)
    unguarded: set[str] = set()
    hits: list[_Hit] = []
    for function in source.nodes:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = {**module_names, **simple_assignments(function.body)}
        keys, guards = _guard_facts(function, names)
        unguarded |= keys
        if function.name.startswith("test") and guards is not None:
            hits += [_Hit("guarded", source.file_line(node), key) for node, key in guards]
    module_level = [s for s in source.tree.body if not isinstance(s, _DEFS)]
    return unguarded | _used_keys(module_level, module_names), hits


def _other_hits(source: PySource) -> Iterator[_Hit]:
    for node in source.nodes:
        if isinstance(node, ast.Try) and _swallows(node):
            yield _Hit("swallowed", source.file_line(node), "")
        elif isinstance(node, ast.Assert):
            number = _number_membership(node.test)
            if number is not None:
                yield _Hit("membership", source.file_line(node), number)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


# -- following a path through names ------------------------------------------------------------


def _call_name(node: ast.AST) -> str:
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _exists_subject(test: ast.AST, names: dict[str, ast.AST]) -> tuple[str, bool] | None:
    """(path key, negated) when `test` is `exists(X)` or `not exists(X)`."""
    negated = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        negated, test = True, test.operand
    if not isinstance(test, ast.Call) or _call_name(test) not in _EXISTS_CALLS:
        return None
    func = test.func
    if test.args:
        subject: ast.AST = test.args[0]
    elif isinstance(func, ast.Attribute):
        subject = func.value  # Path(X).exists()
    else:
        return None
    return path_text(subject, names), negated


# -- guarded assertions ------------------------------------------------------------------------


def _fails(body: list[ast.stmt]) -> bool:
    """True when a branch can fail the test (an assert, a raise, pytest.fail, sys.exit)."""
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Assert, ast.Raise)):
                return True
            if isinstance(node, ast.Call) and _call_name(node) in _FAIL_CALLS:
                return True
    return False


def _exits_quietly(body: list[ast.stmt]) -> bool:
    """A branch that leaves the test without failing: `return` or `pytest.skip(...)`."""
    last = body[-1] if body else None
    if isinstance(last, ast.Return):
        return True
    return (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and _call_name(last.value) == "skip"
    )


def _guard_facts(
    function: ast.FunctionDef | ast.AsyncFunctionDef, names: dict[str, ast.AST]
) -> tuple[set[str], list[tuple[ast.AST, str]] | None]:
    """Path keys the function uses outside existence guards, and its guards when every
    assertion of the function lies under one (None otherwise)."""
    guards: list[tuple[ast.AST, str]] = []
    skip: set[int] = set()
    body = function.body
    for index, statement in enumerate(body):
        if not isinstance(statement, ast.If):
            continue
        subject = _exists_subject(statement.test, names)
        if subject is None:
            continue
        key, negated = subject
        if not negated and _fails(statement.body) and not _fails(statement.orelse):
            guarded = statement.body
        elif negated and _exits_quietly(statement.body) and not _fails(statement.body):
            guarded = body[index + 1 :]
            if not _fails(guarded):
                break
        else:
            continue
        guards.append((statement, key))
        skip |= {id(n) for s in guarded for n in ast.walk(s)}
        skip |= {id(n) for n in ast.walk(statement.test)}
        if negated:
            break
    free_asserts = 0
    used: set[str] = set()
    for node in ast.walk(function):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Assert):
            free_asserts += 1
        elif isinstance(node, ast.Call):
            used |= _call_keys(node, names)
    return used, (guards if guards and free_asserts == 0 else None)


def _call_keys(node: ast.Call, names: dict[str, ast.AST]) -> set[str]:
    """Path keys of a call's arguments and of the object a method is called on."""
    parts = list(node.args)
    if isinstance(node.func, ast.Attribute):
        parts.append(node.func.value)
    return {path_text(p, names) for p in parts if isinstance(p, _PATHLIKE)}


_PATHLIKE = (ast.Name, ast.Attribute, ast.Constant, ast.Call, ast.BinOp, ast.Subscript)


def _used_keys(statements: list[ast.stmt], names: dict[str, ast.AST]) -> set[str]:
    """Path keys of every call among `statements` (module-level code)."""
    keys: set[str] = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                keys |= _call_keys(node, names)
    return keys


# -- swallowed failures ------------------------------------------------------------------------


def _catches_failures(handler: ast.ExceptHandler) -> bool:
    kind = handler.type
    if kind is None:
        return True
    kinds = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return any(isinstance(k, ast.Name) and k.id in _SWALLOWED_TYPES for k in kinds)


def _quiet(body: list[ast.stmt]) -> bool:
    """A handler body that records nothing a runner sees: pass, continue, print, return."""
    for statement in body:
        if isinstance(statement, (ast.Pass, ast.Continue)):
            continue
        if isinstance(statement, ast.Return) and (
            statement.value is None
            or (isinstance(statement.value, ast.Constant) and statement.value.value is None)
        ):
            continue
        if isinstance(statement, ast.Expr) and (
            isinstance(statement.value, ast.Constant)
            or (
                isinstance(statement.value, ast.Call)
                and _call_name(statement.value) in _QUIET_CALLS
            )
        ):
            continue
        return False
    return True


def _swallows(node: ast.Try) -> bool:
    if not any(isinstance(n, ast.Assert) for s in node.body for n in ast.walk(s)):
        return False
    return any(_catches_failures(h) and _quiet(h.body) for h in node.handlers)


# -- membership for equality -------------------------------------------------------------------


def _number_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value.strip()
        if text and text.lstrip("-").replace(".", "", 1).isdigit():
            return text
    if isinstance(node, ast.Call) and _call_name(node) == "str" and node.args:
        inner = node.args[0]
        number = isinstance(inner, ast.Constant) and type(inner.value) in (int, float)
        if number:
            return str(inner.value)  # type: ignore[attr-defined]
    return None


def _number_membership(test: ast.AST) -> str | None:
    """The number when `test` is `"42" in x` or `x.startswith("42")`."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.In)
        and not isinstance(test.comparators[0], (ast.List, ast.Tuple, ast.Set, ast.Dict))
    ):
        return _number_text(test.left)
    if isinstance(test, ast.Call) and _call_name(test) == "startswith" and test.args:
        return _number_text(test.args[0])
    return None


# -- findings ----------------------------------------------------------------------------------


def _finding(ctx: TaskContext, path: str, kind: str, hits: list[_Hit]) -> Finding:
    lines = ", ".join(str(h.line) for h in hits)
    evidence = dedupe_evidence(evidence_line(ctx, path, h.line) for h in hits)
    if kind == "guarded":
        subjects = ", ".join(dict.fromkeys(f"`{h.subject}`" for h in hits))
        return make_finding(
            ctx,
            subcategory="EVAL-COVERAGE",
            severity="Medium",
            finding_type="Bug",
            title=f"Assertions in {path} run only when the output exists",
            description=(
                f"{path} checks {subjects} only under an existence test (line(s) {lines}), "
                "and no other code of the tests uses it unguarded, so an agent that writes "
                "nothing passes these tests."
            ),
            recommendation="Assert that the output exists, then check its content.",
            confidence=0.7,
            evidence=evidence,
        )
    if kind == "swallowed":
        return make_finding(
            ctx,
            subcategory="EVAL-COVERAGE",
            severity="Medium",
            finding_type="Bug",
            title=f"A `try` in {path} swallows failed assertions",
            description=(
                f"{path} wraps assertions in `try` (line(s) {lines}) and its handler catches "
                "the AssertionError without failing, so those checks can never fail."
            ),
            recommendation="Let assertion errors propagate (catch only the errors you expect).",
            confidence=0.7,
            evidence=evidence,
        )
    numbers = ", ".join(dict.fromkeys(f"`{h.subject}`" for h in hits))
    return make_finding(
        ctx,
        subcategory="EVAL-COVERAGE",
        severity="Low",
        finding_type="Warning",
        title=f"{path} checks a number by containment ({plural(len(hits), 'assertion')})",
        description=(
            f"{path} checks {numbers} with `in`/`startswith` (line(s) {lines}): any output "
            "containing those digits, such as a longer wrong number, passes."
        ),
        recommendation="Parse the value and compare it for equality (with a tolerance).",
        confidence=0.45,
        evidence=evidence,
    )
