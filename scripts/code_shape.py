#!/usr/bin/env python3
"""Check the shape of the source tree: module and folder sizes, import cycles, layer breaks.

Usage: ``python scripts/code_shape.py [SRC_ROOT] [--details]`` (default ``src/metaeval``).
It prints a table and exits 1 when the shape is broken: a module over ``MAX_MODULE_LINES``
lines, a folder over ``MAX_FOLDER_MODULES`` modules (unless listed in ``FOLDERS_TO_SPLIT``),
an import cycle or a layer break. Functions over ``LONG_FUNCTION`` lines are listed for
review, never a failure; no limit sits near a module's usual size, so nothing is gained by
squeezing a file under a line: a module is split along its ideas, a folder when it holds
more than one idea.

Everything comes from the files themselves: line counts, an AST walk for function
lengths, and an import graph between files built from every ``import`` statement,
module-level or inside a function ("lazy"). Imports under ``if TYPE_CHECKING:`` never
run and are left out. A cycle is a strongly connected component of more than one file
(Tarjan). A layer break is an import from a lower layer to a higher one in ``LAYERS``
below, or from one protocol (or ``demo``) into another.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "metaeval"

# Layers, lowest first. A module's layer is the first entry whose prefix matches its dotted
# name (below the package); a module may import its own layer or any layer below. "base"
# holds leaf helpers every layer uses (errors, exit codes, safe file reads, the CPU gate that
# model calls and the executor share); `cli_options` are the options every protocol CLI shares.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "__init__",
            "exit_codes",
            "errors",
            "safe_text",
            "console",
            "cpu_gate",
            "engine.cpu_gate",
            "tasks.safe_files",
            "tasks.safe_json",
            "records.nofollow",
            "config_files",
            "examples",
            "scaffold_files",
        ),
    ),
    ("models", ("models", "transient")),
    ("sandbox", ("sandbox",)),
    ("records", ("records",)),
    ("loopback", ("loopback",)),
    ("tasks", ("tasks",)),
    ("gateway", ("gateway",)),
    ("agents", ("agents",)),
    ("engine", ("engine", "executor", "executor_ray", "progress")),
    ("report", ("report",)),
    ("cli_options", ("cli_options",)),
    ("protocols", ("protocols",)),
    ("demo", ("demo",)),
    ("view", ("view",)),
    ("cli", ("cli", "cli_help", "schemas", "doctor")),
]

MAX_MODULE_LINES = 700  # a module over this fails
MAX_FOLDER_MODULES = 20  # a folder's own modules (`__init__.py` and subpackages not counted)
LONG_FUNCTION = 60  # a function over this is listed for review, not failed

# Folders over MAX_FOLDER_MODULES when the folder rule came in (issue 42), paths under the
# source root: the rule skips them until each is split into packages along its ideas (as
# protocols/buildfind was: release/, report/, views/, tables/, pack/, rows/, artifact/).
# This list is the debt: it only shrinks; a listed folder back within the limit is reported
# so its entry is removed; a folder not listed here fails as soon as it grows past the limit.
FOLDERS_TO_SPLIT: tuple[str, ...] = (
    "protocols/audit",
    "protocols/audit/static",
    "protocols/improve",
)


@dataclass
class Module:
    """One source file: its dotted name, path, size and the files it imports."""

    name: str
    path: Path
    lines: int
    imports: set[str] = field(default_factory=set)
    long_functions: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Shape:
    """What breaks the rules (each list empty when the tree keeps them) and what is listed."""

    huge: list[Module]  # modules over MAX_MODULE_LINES lines
    crowded: list[tuple[str, int]]  # folders over MAX_FOLDER_MODULES, not in FOLDERS_TO_SPLIT
    to_split: list[tuple[str, int]]  # folders in FOLDERS_TO_SPLIT, with their module count
    cycles: list[list[str]]
    breaks: list[tuple[str, str]]
    long_functions: list[tuple[str, str, int]]  # (module, function, lines): for review
    undeclared: list[str]  # modules no layer claims: listed, not judged

    @property
    def broken(self) -> bool:
        """True when a rule is broken (long functions and undeclared modules never break it)."""
        return bool(self.huge or self.crowded or self.cycles or self.breaks)


def dotted(root: Path, path: Path) -> str:
    """``src/metaeval/a/b.py`` -> ``metaeval.a.b``; a package's ``__init__`` is the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_runtime(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` except the bodies of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _walk_runtime(other)
            continue
        yield child
        yield from _walk_runtime(child)


def _imported_names(module: str, is_package: bool, tree: ast.AST) -> Iterator[tuple[str, str]]:
    """(module, name) per imported name: `import a.b` gives ("a.b", ""), `from a import b`
    gives ("a", "b"), where b may be a submodule or a name defined in a."""
    for node in _walk_runtime(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ""
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                keep = len(base) - node.level + (1 if is_package else 0)
                prefix = ".".join(base[:keep])
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            for alias in node.names:
                yield target, alias.name


def _long_functions(tree: ast.AST) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > LONG_FUNCTION:
                found.append((node.name, length))
    return found


def scan(root: Path) -> dict[str, Module]:
    """Read every ``.py`` file under ``root`` into a :class:`Module` with resolved imports."""
    modules: dict[str, Module] = {}
    trees: dict[str, ast.AST] = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = dotted(root, path)
        tree = ast.parse(text, filename=str(path))
        modules[name] = Module(
            name, path, len(text.splitlines()), long_functions=_long_functions(tree)
        )
        trees[name] = tree
    for name, module in modules.items():
        is_package = module.path.name == "__init__.py"
        for target, attr in _imported_names(name, is_package, trees[name]):
            # `from pkg import sub` loads the file sub; `from pkg import name` reads pkg.
            if attr and f"{target}.{attr}" in modules:
                target = f"{target}.{attr}"
            if target in modules and target != name:
                module.imports.add(target)
    return modules


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components with more than one file (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(modules):
        if start in index:
            continue
        work = [(start, iter(sorted(modules[start].imports)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(modules[nxt].imports))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def layer_of(name: str) -> tuple[int, str]:
    """(rank, label) of a dotted module name per ``LAYERS``; protocols carry their own name."""
    inner = name.split(".", 1)[1] if "." in name else "__init__"
    for rank, (label, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if inner == prefix or inner.startswith(prefix + "."):
                if label == "protocols":
                    parts = inner.split(".")
                    return rank, "protocols." + (parts[1] if len(parts) > 1 else "")
                return rank, label
    return -1, "undeclared"


def layer_breaks(modules: dict[str, Module]) -> list[tuple[str, str]]:
    """Imports from a lower layer to a higher one, or across protocols, or into demo."""
    found = []
    for name, module in modules.items():
        rank, label = layer_of(name)
        for target in module.imports:
            target_rank, target_label = layer_of(target)
            if rank < 0 or target_rank < 0:
                continue  # listed apart: a module no layer claims
            across = (
                label.startswith("protocols.")
                and target_label.startswith("protocols.")
                and label != target_label
                and target_label != "protocols."
            )
            into_demo = target_label == "demo" and label.startswith("protocols")
            if target_rank > rank or across or into_demo:
                found.append((name, target))
    return sorted(found)


def folder_sizes(root: Path, modules: dict[str, Module]) -> dict[str, int]:
    """Modules per folder, the folder as a path under ``root`` ("." for the root itself);
    a package's ``__init__.py`` is the folder, not one of its modules."""
    sizes: dict[str, int] = {}
    for module in modules.values():
        folder = module.path.parent.relative_to(root).as_posix()
        sizes.setdefault(folder, 0)
        if module.path.name != "__init__.py":
            sizes[folder] += 1
    return sizes


def check(root: Path, modules: dict[str, Module], to_split: tuple[str, ...] | None = None) -> Shape:
    """Judge ``modules`` (read from ``root``); ``to_split`` defaults to `FOLDERS_TO_SPLIT`."""
    to_split = FOLDERS_TO_SPLIT if to_split is None else to_split
    sizes = folder_sizes(root, modules)
    return Shape(
        huge=sorted(
            (m for m in modules.values() if m.lines > MAX_MODULE_LINES), key=lambda m: -m.lines
        ),
        crowded=sorted(
            (folder, n)
            for folder, n in sizes.items()
            if n > MAX_FOLDER_MODULES and folder not in to_split
        ),
        to_split=[(folder, sizes.get(folder, 0)) for folder in to_split],
        cycles=cycles(modules),
        breaks=layer_breaks(modules),
        long_functions=sorted(
            ((m.name, f, n) for m in modules.values() for f, n in m.long_functions),
            key=lambda x: (-x[2], x[0], x[1]),
        ),
        undeclared=sorted(name for name in modules if layer_of(name)[0] < 0),
    )


def main(argv: list[str]) -> int:
    """Print the table, the functions to review and (with ``--details``) every offender;
    1 when a rule is broken, else 0."""
    details = "--details" in argv
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0] if args else "src/metaeval").resolve()
    modules = scan(root)
    shape = check(root, modules)
    total = sum(m.lines for m in modules.values())
    largest = max((m.lines for m in modules.values()), default=0)
    print(f"| measure | {root.name} ({len(modules)} files, {total} lines) |")
    print("| --- | --- |")
    print(f"| modules over {MAX_MODULE_LINES} lines (largest: {largest}) | {len(shape.huge)} |")
    print(
        f"| folders over {MAX_FOLDER_MODULES} modules, not listed to split | {len(shape.crowded)} |"
    )
    print(f"| folders listed to split (FOLDERS_TO_SPLIT) | {len(shape.to_split)} |")
    print(f"| import cycles between files (lazy imports included) | {len(shape.cycles)} |")
    print(f"| imports running down-to-up | {len(shape.breaks)} |")
    print(f"| functions over {LONG_FUNCTION} lines (for review) | {len(shape.long_functions)} |")
    if shape.undeclared:
        print(f"| modules in no declared layer (add them to LAYERS) | {len(shape.undeclared)} |")
    print("\nfolders listed to split")
    for folder, n in shape.to_split:
        note = "" if n > MAX_FOLDER_MODULES else "  (within the limit now: remove it from the list)"
        print(f"  {n:5d} {folder}{note}")
    print(
        f"\nfunctions over {LONG_FUNCTION} lines, for review (split one where it holds two ideas)"
    )
    for mod, fn, n in shape.long_functions:
        print(f"  {n:5d} {mod}.{fn}")
    if details or shape.broken:
        _offenders(root, shape)
    if shape.broken:
        print("\nthe shape is broken: see the lists above")
    return 1 if shape.broken else 0


def _offenders(root: Path, shape: Shape) -> None:
    print(f"\nmodules over {MAX_MODULE_LINES} lines")
    for m in shape.huge:
        print(f"  {m.lines:5d} {m.path.relative_to(root.parent)}")
    print(f"\nfolders over {MAX_FOLDER_MODULES} modules, not listed to split")
    for folder, n in shape.crowded:
        print(f"  {n:5d} {folder}")
    print("\ncycles")
    for comp in shape.cycles:
        print("  " + " <-> ".join(comp))
    print("\nlayer breaks")
    for src, dst in shape.breaks:
        print(f"  {src} -> {dst}")
    print("\nmodules in no declared layer")
    for name in shape.undeclared:
        print(f"  {name}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
