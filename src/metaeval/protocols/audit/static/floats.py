"""Check 6: exact equality on floating-point values in the Python tests.

Fires on `==` / `!=` (and unittest's `assertEqual` / `assertNotEqual`) in `tests/` Python
code when one operand is plainly a float:

- a float literal (`0.1`, `-2.5`, `3.0`), infinities excepted (comparing with `inf` is exact);
- a `float(...)` conversion (again except `float("inf")` and friends);
- a true division `a / b`;
- `round(...)` only counts together with a float literal on the other side (which fires
  already), and is named in the description.

Not reported: anything compared through `pytest.approx(...)`, `math.isclose`, `numpy.isclose`
/ `allclose` (these are calls, not `==`), `abs(a - b) < eps` (not an equality), comparisons
with a string, `None` or a bool, and floor division.

A correct agent whose arithmetic differs in the last bit (another summation order, numpy vs
pure Python, printing with more digits) fails an exact comparison: EVAL-TOLERANCE, Warning,
Medium. Confidence 0.7 when a non-integral literal is involved (such values are rarely exact),
0.6 otherwise. One finding per test file, citing every comparison.
"""

from __future__ import annotations

import ast
import math
import re

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.finding_builder import (
    dedupe_evidence,
    evidence_line,
    make_finding,
    plural,
)
from metaeval.protocols.audit.static.python_source import PySource
from metaeval.protocols.audit.static.task_context import TaskContext

_INF_STRINGS = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan"}
_EQUALITY_METHODS = {"assertEqual", "assertEquals", "assertNotEqual", "assertNotEquals"}


def _float_literal(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _float_literal(node.operand)
        return -value if value is not None and isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Constant) and isinstance(node.value, float):
        return None if math.isinf(node.value) else node.value
    return None


def _call_name(node: ast.AST) -> str:
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _is_tolerant(node: ast.AST) -> bool:
    return _call_name(node) in ("approx", "isclose", "allclose", "assert_allclose")


def _kind(node: ast.AST) -> str | None:
    """Why an operand is a float, or None."""
    if _float_literal(node) is not None:
        return "float literal"
    name = _call_name(node)
    if name == "float" and isinstance(node, ast.Call):  # a name only calls have
        arg = node.args[0] if node.args else None
        if (
            isinstance(arg, ast.Constant)
            and isinstance(arg.value, str)
            and arg.value.strip().lower() in _INF_STRINGS
        ):
            return None
        return "float() conversion"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return "division result"
    return None


def _non_float_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, (str, bytes, bool))
    )


def _pair_reason(left: ast.AST, right: ast.AST) -> tuple[str, float] | None:
    """(reason, confidence) when `left == right` compares floats exactly."""
    if _is_tolerant(left) or _is_tolerant(right):
        return None
    if _non_float_constant(left) or _non_float_constant(right):
        return None
    kinds = [k for k in (_kind(left), _kind(right)) if k]
    if not kinds:
        return None
    literal = next(
        (v for v in (_float_literal(left), _float_literal(right)) if v is not None), None
    )
    if "round" in (_call_name(left), _call_name(right)) and literal is not None:
        kinds.append("round() result compared to a float literal")
    confidence = 0.7 if literal is not None and not float(literal).is_integer() else 0.6
    return ", ".join(dict.fromkeys(kinds)), confidence


_DECIMAL = re.compile(r"(?<![\w.])-?\d+(?:\.\d+(?:[eE][-+]?\d+)?|[eE][-+]?\d+)(?![\w.])")
_CODE_SUFFIXES = (".py", ".sh", ".bash")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*[-*\d])")
_OUTPUT_WORDS = re.compile(r"\b(?:output|result|expect|answer|return|print|should be)", re.I)


def _given_values(ctx: TaskContext) -> set[float]:
    """Decimal numbers the task hands over as input: in data files (environment/ files but
    the Dockerfile, non-code files under tests/) and in instruction sentences that do not
    talk about the output (`set the threshold to 0.75`, not `the expected output is 3.5`).
    A test that expects one of these back expects a value passed through, which is exact by
    design."""
    values: set[float] = set()
    texts: list[str] = []
    for f in ctx.task.files:
        name = f.path.rsplit("/", 1)[-1]
        if f.role == "instruction" or f.path == "instruction.md":
            texts += [
                sentence
                for sentence in _SENTENCE.split(f.text)
                if not _OUTPUT_WORDS.search(sentence)
            ]
        elif (f.role == "environment" and not name.startswith("Dockerfile")) or (
            f.role == "tests" and not f.path.endswith(_CODE_SUFFIXES)
        ):
            texts.append(f.text)
    for text in texts:
        for token in _DECIMAL.findall(text):
            try:
                values.add(float(token))
            except ValueError:
                continue
    return values


def _passed_literal(left: ast.AST, right: ast.AST) -> float | None:
    """The float literal of `x == 0.75` when the other side is a plain value (a name, an
    item, an attribute, a call that reads), not arithmetic or a conversion."""
    for literal_side, other in ((left, right), (right, left)):
        value = _float_literal(literal_side)
        if value is None:
            continue
        if isinstance(other, (ast.Name, ast.Subscript, ast.Attribute)) or (
            isinstance(other, ast.Call) and _call_name(other) not in ("float", "round", "sum")
        ):
            return value
    return None


class _GivenValues:
    """The task's given values (`_given_values`), read the first time a comparison asks."""

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx
        self.values: set[float] | None = None

    def __contains__(self, value: float) -> bool:
        if self.values is None:
            self.values = _given_values(self.ctx)
        return value in self.values


def check_float_equality(ctx: TaskContext) -> list[Finding]:
    given = _GivenValues(ctx)
    per_file: dict[str, list[tuple[int, str, float]]] = {}
    for source in ctx.python_sources:
        if source.role != "tests":
            continue
        per_file.setdefault(source.file, []).extend(_exact_comparisons(source, given))
    return [_float_finding(ctx, path, hits) for path, hits in per_file.items() if hits]


def _compared_pairs(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """The operand pairs an AST node compares for equality (`==`, `!=`, `assertEqual`)."""
    pairs: list[tuple[ast.AST, ast.AST]] = []
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        for index, op in enumerate(node.ops):
            if isinstance(op, (ast.Eq, ast.NotEq)):
                pairs.append((operands[index], operands[index + 1]))
    elif (
        isinstance(node, ast.Call) and _call_name(node) in _EQUALITY_METHODS and len(node.args) >= 2
    ):
        pairs.append((node.args[0], node.args[1]))
    return pairs


def _exact_comparisons(source: PySource, given: _GivenValues) -> list[tuple[int, str, float]]:
    """(line, reason, confidence) of each exact float comparison in one test source."""
    hits: list[tuple[int, str, float]] = []
    assigned: set[float] | None = None  # read the first time a comparison asks
    for node in source.nodes:
        for left, right in _compared_pairs(node):
            verdict = _pair_reason(left, right)
            if verdict is None:
                continue
            literal = _passed_literal(left, right)
            if literal is not None and assigned is None:
                assigned = _assigned_constants(source)
            if literal is not None and (
                literal in given or literal in (0.0, 1.0) or literal in (assigned or set())
            ):
                # A constant the task hands over or the test itself assigns, or an all/none
                # ratio (n/n and 0/n are exact): passed through, exact by design.
                continue
            anchor = right if _kind(right) else left
            hits.append((source.file_line(anchor), verdict[0], verdict[1]))
    return hits


def _assigned_constants(source: PySource) -> set[float]:
    """Float literals the source stores as values (`score = 0.5`, `{"score": 1.0}`,
    `f(x=0.5)`, `return 0.5`): comparing with one of them compares a constant it set."""
    values: list[ast.AST | None] = []
    for node in source.nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return)):
            values.append(node.value)
        elif isinstance(node, ast.Dict):
            values += node.values
        elif isinstance(node, ast.keyword):
            values.append(node.value)
    found = (_float_literal(v) for v in values if v is not None)
    return {v for v in found if v is not None}


def _float_finding(ctx: TaskContext, path: str, hits: list[tuple[int, str, float]]) -> Finding:
    hits.sort()
    evidence = dedupe_evidence((evidence_line(ctx, path, line) for line, _, _ in hits), 10)
    lines_text = ", ".join(str(line) for line in dict.fromkeys(line for line, _, _ in hits))
    reasons = "; ".join(dict.fromkeys(reason for _, reason, _ in hits))
    count = len(dict.fromkeys(line for line, _, _ in hits))
    return make_finding(
        ctx,
        subcategory="EVAL-TOLERANCE",
        severity="Medium",
        finding_type="Warning",
        title=f"Exact float equality in {path} ({plural(count, 'comparison')})",
        description=(
            f"{path} compares floating-point values with `==`/`!=` on line(s) "
            f"{lines_text} ({reasons}). Floating-point results depend on the order of "
            "operations and the library used, so a correct agent whose value differs "
            "in the last digits fails the check while the reference happens to match."
        ),
        recommendation=(
            "Compare with a tolerance suited to the quantity: `pytest.approx(expected, "
            "rel=1e-6)`, `math.isclose(actual, expected, rel_tol=1e-6)` or "
            "`abs(actual - expected) <= tol`, and state the tolerance in the instruction "
            "if it is tight."
        ),
        confidence=max(c for _, _, c in hits),
        evidence=evidence,
    )
