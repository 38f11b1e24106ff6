"""Python source facts shared by the checks: a parsed source (file or shell heredoc), a fast
walk over its nodes, its string literals, and line lookup."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property


@dataclass
class PySource:
    """A parsed Python source: a .py file, or a Python heredoc inside a shell script.

    `nodes` (every AST node, breadth first) and `strings` are computed once and shared by
    all checks, so each source is walked a single time.
    """

    file: str
    role: str
    tree: ast.Module
    line_offset: int  # file line = AST line + line_offset
    text: str = ""
    writes: str = ""  # a heredoc written out to this path (`cat > /app/mod.py <<EOF`), not run

    def file_line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 1) + self.line_offset

    def file_end_line(self, node: ast.AST) -> int:
        return (getattr(node, "end_lineno", 0) or getattr(node, "lineno", 1)) + self.line_offset

    @cached_property
    def nodes(self) -> list[ast.AST]:
        return all_nodes(self.tree)

    @cached_property
    def calls(self) -> list[ast.Call]:
        return [n for n in self.nodes if type(n) is ast.Call]

    @cached_property
    def _string_table(self) -> list[tuple[ast.AST, str, bool]]:
        return list(_strings(self.nodes))

    @cached_property
    def names(self) -> dict[str, ast.AST]:
        """`name = value` assignments of the module and of each function (the last one
        wins): enough to follow a path through a variable within one source."""
        names = simple_assignments(self.tree.body)
        for node in self.nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.update(simple_assignments(node.body))
        return names

    def strings(self, fstring_parts: bool = False) -> list[tuple[ast.AST, str]]:
        """String literals in code; see `string_constants`."""
        return [(n, v) for n, v, part in self._string_table if fstring_parts or not part]


_SKIP_FIELDS = frozenset({"ctx", "type_ignores"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def all_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node below `tree` (breadth first), without expression contexts: a faster
    `list(ast.walk(tree))`."""
    out = [tree]
    index = 0
    node_type = ast.AST
    while index < len(out):
        node = out[index]
        index += 1
        kind = type(node)
        fields = _FIELDS.get(kind)
        if fields is None:
            fields = _FIELDS[kind] = tuple(f for f in kind._fields if f not in _SKIP_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, node_type):
                        out.append(item)
            elif isinstance(value, node_type):
                out.append(value)
    return out


def parse_python(lines: list[str]) -> ast.Module | None:
    """Parse the lines as joined with `\\n` so AST line numbers index `lines` exactly."""
    try:
        return ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def string_constants(tree: ast.AST, fstring_parts: bool = False) -> list[tuple[ast.AST, str]]:
    """String literals in code, docstrings skipped.

    An f-string gives its literal prefix (up to the first placeholder) followed by `\x00`,
    which marks "continues with a runtime value"; with `fstring_parts` it also gives each
    literal part on its own. Literal parts are never given as plain strings: `f"{d}/x"`
    does not contain the absolute path `/x`. (Checks use the cached `PySource.strings`.)
    """
    return [(n, v) for n, v, part in _strings(all_nodes(tree)) if fstring_parts or not part]


def _strings(nodes: list[ast.AST]) -> Iterator[tuple[ast.AST, str, bool]]:
    """(node, value, is_fstring_part) for the string literals among `nodes`."""
    skip: set[int] = set()
    for node in nodes:
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if (
                body
                and type(body[0]) is ast.Expr
                and type(body[0].value) is ast.Constant
                and isinstance(body[0].value.value, str)
            ):
                skip.add(id(body[0].value))
        elif type(node) is ast.JoinedStr:
            skip |= {id(v) for v in node.values}
    for node in nodes:
        if type(node) is ast.JoinedStr:
            values = node.values
            prefix = []
            for value in values:
                if type(value) is ast.Constant and isinstance(value.value, str):
                    prefix.append(value.value)
                else:
                    break
            if prefix and len(prefix) < len(values):
                yield node, "".join(prefix) + "\x00", False
            elif prefix:  # an f-string without placeholders is a plain string
                yield node, "".join(prefix), False
                continue
            for value in values:
                if type(value) is ast.Constant and isinstance(value.value, str):
                    yield value, value.value, True
        elif type(node) is ast.Constant and isinstance(node.value, str) and id(node) not in skip:
            yield node, node.value, False


def simple_assignments(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """Simple `name = value` assignments of one body (the last one wins)."""
    names: dict[str, ast.AST] = {}
    for statement in body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                names[target.id] = statement.value
        elif (
            isinstance(statement, ast.AnnAssign)
            and statement.value is not None
            and isinstance(statement.target, ast.Name)
        ):
            names[statement.target.id] = statement.value
    return names


def path_text(node: ast.AST, names: dict[str, ast.AST], depth: int = 0) -> str:
    """A comparable text for a path expression, names followed through `names`."""
    if depth > 8:
        return ast.unparse(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return path_text(names[node.id], names, depth + 1)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("Path", "PurePath", "PosixPath", "str", "abspath", "realpath") and node.args:
            return path_text(node.args[0], names, depth + 1)
        if name == "join" and node.args:
            return "/".join(path_text(a, names, depth + 1) for a in node.args)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left = path_text(node.left, names, depth + 1)
        return f"{left}/{path_text(node.right, names, depth + 1)}"
    return ast.unparse(node)


def locate(lines: list[str], first: int, last: int, needle: str) -> int:
    """The first line in [first, last] (1-based) that contains `needle`, else `first`."""
    if needle:
        for number in range(max(first, 1), min(last, len(lines)) + 1):
            if needle in lines[number - 1]:
                return number
    return first
