"""Check 3: Python imports in the solution or tests that nothing installs.

An import of a top-level module (parsed with `ast`, including Python heredocs in shell
scripts) is fine when the module is:

- in the standard library (`sys.stdlib_module_names`), or pip/setuptools;
- local to the task: a `.py` file or package directory anywhere in the task, a `name.py`
  mentioned in any task file (the instruction asks the agent to create `/app/calc.py`, the
  solution writes it), a "module `calc`" named in the instruction, a COPY source of the
  Dockerfile;
- installed by the environment: `environment/requirements*.txt`, `pip install` / `uv add` /
  `conda install` / `apt-get install python3-*` in the Dockerfile (following `-r` files),
  `environment/pyproject.toml` dependencies, a base image known to ship it;
- installed by the same phase's scripts: `tests/` scripts (`pip install`, `uvx --with`,
  `uv run --with`) for the tests, `solution/` scripts for the solution. Packages only the
  reference solution installs do not count for the tests: an agent does not run solve.sh.

Distribution names map to import names (scikit-learn -> sklearn, pyyaml -> yaml, pillow ->
PIL, opencv-python -> cv2, beautifulsoup4 -> bs4, ...) and bring their usual dependencies
(pandas -> numpy, ...). Imports guarded by `try/except ImportError`, `pytest.importorskip`
and `if TYPE_CHECKING:` are optional and skipped; relative imports are local.

With no environment at all (no Dockerfile, no requirements, no `docker_image`) the runtime is
the plain host Python, so every third-party import is reported.

A test module that cannot import fails for every agent (ENV-DEP, Bug, Critical); a solution
that cannot import means the reference was never run as shipped (ENV-DEP, Bug, Medium).
Confidence 0.7, lower (0.4-0.45, Warning) when a custom base image or a prebuilt
`docker_image` may ship the package, when the Dockerfile installs a project or requirements
file whose contents are not loaded (`pip install -e .`, `uv sync`, `-r` of an unseen file),
or when test.sh installs a local package whose name this check cannot see.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.finding_builder import (
    dedupe_evidence,
    evidence_line,
    make_finding,
)
from metaeval.protocols.audit.static.installs import requirement_name
from metaeval.protocols.audit.static.packages import ALWAYS_IMPORTABLE, import_names
from metaeval.protocols.audit.static.paths import UNKNOWN_IMAGE_CONFIDENCE
from metaeval.protocols.audit.static.python_source import PySource
from metaeval.protocols.audit.static.task_context import TaskContext, skipped_path

STDLIB = frozenset(sys.stdlib_module_names) | {"__future__", "__main__"}
_PY_NAME = re.compile(r"(?<![\w.-])([A-Za-z_]\w*)\.py\b")
_NAMED_MODULE = re.compile(
    r"(?:module|package)\s+`?([A-Za-z_]\w*)`?|`([A-Za-z_]\w*)`\s+(?:module|package)", re.I
)
# What the instruction asks the agent to build, create or install is the agent's to provide:
# "a python package called `x`", "install x system-wide", "build x from source", a code
# sample that imports it, a package directory it names (`/workspace/mathops/`).
_ASKED_MODULE = (
    re.compile(
        r"(?:package|module|library|extension|binding|wrapper|crate|tool)s?\s+"
        r"(?:called|named|titled)\s+[`'\"]?([A-Za-z_][\w.-]*)",
        re.I,
    ),
    re.compile(
        r"\b(?:install|build|compile|create|implement|write|package|develop|make)(?:s|es|ed|ing)?"
        r"\s+(?:(?:the|a|an|your|its|own|new|python|rust|c|c\+\+|cython|local)\s+){0,3}"
        r"(?:(?:package|module|library|extension|wheel|tool)\s+)?`([A-Za-z_][\w.-]*)`",
        re.I,
    ),
    re.compile(
        r"\b(?:install|build|compile)(?:s|ed|ing)?\s+[`'\"]?([A-Za-z_][\w.-]*)[`'\"]?\s+"
        r"(?:from\s+(?:source|scratch|the\s+\S+)|system-wide|globally|in\s+editable|as\s+a)",
        re.I,
    ),
    re.compile(r"^\s*(?:>>>\s*)?(?:import|from)\s+([A-Za-z_]\w*)", re.M),
    re.compile(r"[`'\"](?:/[\w.-]+)*/([A-Za-z_]\w*)/?[`'\"]"),
)
_EXTENSION = re.compile(
    r"\b(?:Extension|Pybind11Extension|CppExtension|CUDAExtension|RustExtension)\(\s*"
    r"(?:name\s*=\s*)?[\"']([\w.]+)[\"']|\bcythonize\(\s*\[?\s*[\"']([\w./]+?)\.pyx"
)
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass
class ImportSite:
    file: str
    line: int
    role: str
    module: str  # as written, e.g. "sklearn.linear_model"


def _guards_import(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for name in names:
        if isinstance(name, ast.Name) and name.id in _IMPORT_ERRORS:
            return True
        if isinstance(name, ast.Attribute) and name.attr in _IMPORT_ERRORS:
            return True
    return False


def _imports(source: PySource) -> list[ImportSite]:
    """Unguarded absolute imports of a module, in source order."""
    sites: list[ImportSite] = []

    def visit(statements: list[ast.stmt], guarded: bool) -> None:
        for stmt in statements:
            if isinstance(stmt, ast.Import):
                if not guarded:
                    for alias in stmt.names:
                        sites.append(
                            ImportSite(source.file, source.file_line(stmt), source.role, alias.name)
                        )
            elif isinstance(stmt, ast.ImportFrom):
                if not guarded and stmt.level == 0 and stmt.module:
                    sites.append(
                        ImportSite(source.file, source.file_line(stmt), source.role, stmt.module)
                    )
            elif isinstance(stmt, (ast.Try, ast.TryStar)):
                protected = guarded or any(_guards_import(h) for h in stmt.handlers)
                visit(stmt.body, protected)
                for handler in stmt.handlers:  # `except ImportError: import y`: a fallback
                    visit(handler.body, guarded or _guards_import(handler))
                visit(stmt.orelse, guarded)
                visit(stmt.finalbody, guarded)
            elif isinstance(stmt, ast.If):
                test = (
                    ast.unparse(stmt.test)
                    if isinstance(stmt.test, (ast.Name, ast.Attribute))
                    else ""
                )
                visit(stmt.body, guarded or test.endswith("TYPE_CHECKING"))
                visit(stmt.orelse, guarded)
            elif isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    visit(case.body, guarded)
            elif hasattr(stmt, "body"):  # def, class, for, while, with
                visit(stmt.body, guarded)
                visit(getattr(stmt, "orelse", []), guarded)
            elif not guarded and dynamic:
                _dynamic(stmt)

    def _dynamic(stmt: ast.stmt) -> None:
        """`importlib.import_module("x")` / `__import__("x")` with a literal name."""
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in ("import_module", "__import__"):
                    sites.append(
                        ImportSite(
                            source.file, source.file_line(node), source.role, node.args[0].value
                        )
                    )

    dynamic = "import_module" in source.text or "__import__" in source.text
    visit(source.tree.body, False)
    return sites


_PEP723 = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


def pep723_dependencies(text: str) -> list[str]:
    """Distribution names of a script's inline metadata block (PEP 723, `# /// script`)."""
    if "# /// script" not in text:
        return []
    for match in _PEP723.finditer(text if text.endswith("\n") else text + "\n"):
        if match.group("type") != "script":
            continue
        body = "".join(
            line[2:] if line.startswith("# ") else line[1:]
            for line in match.group("content").splitlines(keepends=True)
        )
        try:
            data = tomllib.loads(body)
        except tomllib.TOMLDecodeError:
            return []
        deps = data.get("dependencies")
        if not isinstance(deps, list):
            return []
        return [n for d in deps if isinstance(d, str) and (n := requirement_name(d))]
    return []


_RUNS = re.compile(
    r"\b(?:python3?|pytest|runpy|run_path|exec|import_module|spec_from_file_location)\b"
)
_TEST_MODULE = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test|conftest)\.py$")


def _run_test_files(ctx: TaskContext) -> set[str]:
    """The .py files under tests/ that something imports or runs: pytest's own modules
    (test_*.py, *_test.py, conftest.py) and files a tests/ script or module names. The rest
    (an expected `solution.py` compared as text) is data: its imports are never executed."""
    tests = ctx.role_files("tests")
    run: set[str] = set()
    for f in tests:
        if not f.path.endswith(".py"):
            continue
        if _TEST_MODULE.search(f.path):
            run.add(f.path)
            continue
        name = f.path.rsplit("/", 1)[-1]
        imported = re.compile(rf"\b(?:import|from)\s+{re.escape(name[:-3])}\b")
        for other in tests:
            if other.path == f.path or name[:-3] not in other.text:
                continue
            if not other.path.endswith(".py"):  # a tests/ script names it: it runs it
                if name in other.text or imported.search(other.text):
                    run.add(f.path)
            elif imported.search(other.text) or any(
                name in line and _RUNS.search(line) for line in other.text.splitlines()
            ):
                run.add(f.path)
    return run


def instructed_modules(text: str) -> set[str]:
    """Lower-cased module names the instruction asks the agent to provide (see _ASKED_MODULE)."""
    names: set[str] = set()
    for match in _NAMED_MODULE.finditer(text):
        names.add((match.group(1) or match.group(2)).lower())
    for pattern in _ASKED_MODULE:
        for match in pattern.finditer(text):
            name = match.group(1).rstrip(".-").lower()
            names |= {name, name.replace("-", "_"), name.split(".", 1)[0]}
    return names


def local_modules(ctx: TaskContext) -> set[str]:
    """Lower-cased names importable because the task itself provides (or asks for) them."""
    names: set[str] = set()
    for path in list(ctx.files) + [skipped_path(s) for s in ctx.task.skipped_files]:
        parts = path.split("/")
        if parts[-1].endswith((".py", ".pyi", ".so", ".pyd", ".pyx")):
            names.add(parts[-1].split(".", 1)[0].lower())
            names |= {p.lower() for p in parts[:-1]}
    for f in ctx.task.files:
        if ".py" in f.text:
            names |= {m.lower() for m in _PY_NAME.findall(f.text)}
    if ctx.instruction is not None:
        names |= instructed_modules(ctx.instruction.text)
    for f in ctx.task.files:  # C extensions built at run time: `Extension("pkg.fast", ...)`
        if "Extension" in f.text or "cythonize" in f.text:
            for match in _EXTENSION.finditer(f.text):
                parts = (match.group(1) or match.group(2)).lower().replace("/", ".").split(".")
                names |= {parts[0], parts[-1]}
    for source in ctx.docker.copy_sources:
        base = source.rstrip("/").rsplit("/", 1)[-1]
        if base and base not in (".", "*"):
            names.add(base.split(".", 1)[0].lower())
    return names


def check_imports(ctx: TaskContext) -> list[Finding]:
    run = _run_test_files(ctx)
    sources = [
        s
        for s in ctx.python_sources
        if s.role == "solution" or not s.file.endswith(".py") or s.file in run
    ]
    if not sources:
        return []
    local = local_modules(ctx)
    env = ctx.environment_imports
    by_role = {"tests": ctx.role_imports("tests"), "solution": ctx.role_imports("solution")}
    env = env | {n.replace("_", "") for n in env}
    role = {k: v | {n.replace("_", "") for n in v} for k, v in by_role.items()}
    missing: dict[str, list[ImportSite]] = {}
    for source in sources:
        inline = set()  # PEP 723: `# /// script` dependencies, installed by `uv run`
        for dist in pep723_dependencies(source.text):
            inline |= import_names(dist)
        for site in _imports(source):
            top = site.module.split(".", 1)[0]
            low = top.lower()
            if top in STDLIB or low in local or low in ALWAYS_IMPORTABLE:
                continue
            squashed = low.replace("_", "")  # `mobile_sam` from the MobileSAM repository
            # A module the solution only writes out runs when the verifier imports it,
            # with what tests/ installs.
            phases = (role["tests"], role["solution"]) if source.writes else (role[site.role],)
            if any(low in names or squashed in names for names in (env, *phases, inline)):
                continue
            missing.setdefault(top, []).append(site)
    if not missing:
        return []

    tests_local_install = any(i.local for _, _, i in ctx.script_installs("tests"))
    unseen_image: str | None = None  # what this check could not look into, if anything
    if not ctx.has_environment:
        runtime = "The task defines no environment (no Dockerfile, requirements or docker_image), so it runs on the plain host Python"
        base_confidence, sure = 0.7, True
    elif not ctx.docker.present and ctx.docker_image:
        runtime = f"The task runs in the prebuilt image `{ctx.docker_image}`"
        unseen_image = f"the image `{ctx.docker_image}` could not be inspected"
        base_confidence, sure = UNKNOWN_IMAGE_CONFIDENCE, False
    elif ctx.environment_is_opaque:
        runtime = (
            "The Dockerfile installs a project or requirements file whose package list is not "
            "visible here (a local install, `uv sync`, an unloaded requirements file)"
        )
        unseen_image = "the package list of what the Dockerfile installs could not be read"
        base_confidence, sure = 0.45, False
    elif ctx.unknown_base_image:
        runtime = f"The Dockerfile builds on `{ctx.unknown_base_image}`"
        unseen_image = f"the base image `{ctx.unknown_base_image}` could not be inspected"
        base_confidence, sure = UNKNOWN_IMAGE_CONFIDENCE, False
    elif ctx.unresolved_environment_dists:
        shown = ", ".join(f"`{d}`" for d in ctx.unresolved_environment_dists[:3])
        runtime = f"The environment installs {shown}, whose dependencies are not known here"
        unseen_image = f"the dependencies of {shown} could not be read; one may provide it"
        base_confidence, sure = UNKNOWN_IMAGE_CONFIDENCE, False
    else:
        runtime = "Neither the environment (Dockerfile, requirements) nor the phase's own scripts install it"
        base_confidence, sure = 0.7, True

    findings: list[Finding] = []
    for module, sites in missing.items():
        in_tests = any(s.role == "tests" for s in sites)
        only_solution_installs = in_tests and module.lower() in by_role["solution"]
        confidence = base_confidence
        unseen = f"{unseen_image}; `{module}` may come with it" if unseen_image else None
        if in_tests and tests_local_install:
            confidence = min(confidence, 0.45)
            unseen = unseen or (
                "tests/ installs a local package whose contents could not be read; "
                f"it may provide `{module}`"
            )
        if only_solution_installs and sure:
            confidence = 0.75
        files = list(dict.fromkeys(s.file for s in sites))
        where = ", ".join(files)
        if only_solution_installs:
            reason = (
                "Only the reference solution installs it (solution/ scripts), so the tests "
                "pass with the oracle but fail for an agent that did not happen to install the "
                "same package"
            )
        else:
            reason = runtime + "."
        if in_tests:
            impact = (
                "The test module fails at import time, so every agent, correct or not, gets "
                "a failing (or missing) reward."
            )
        else:
            impact = (
                "The reference solution cannot run as shipped, so the task was never shown "
                "to be solvable in its environment, and agents that choose the same library "
                "hit the same wall."
            )
        findings.append(
            make_finding(
                ctx,
                subcategory="ENV-DEP",
                severity=(
                    "Low"
                    if confidence <= UNKNOWN_IMAGE_CONFIDENCE
                    else ("Critical" if in_tests else "Medium")
                ),
                finding_type="Bug" if confidence >= 0.55 else "Warning",
                title=(
                    f"{'Tests import' if in_tests else 'Solution imports'} `{module}`, which the "
                    "environment does not install"
                ),
                description=(
                    f"{where} {'imports' if len(files) == 1 else 'import'} `{module}`, a "
                    f"third-party module. {reason} {impact}"
                ),
                recommendation=(
                    f"Install the package that provides `{module}` in the environment "
                    "(environment/requirements.txt or a `pip install` in environment/Dockerfile)"
                    + (", or in tests/test.sh before the tests run" if in_tests else "")
                    + "; pin its version."
                ),
                confidence=confidence,
                evidence=dedupe_evidence(evidence_line(ctx, s.file, s.line) for s in sites),
                unseen=unseen,
            )
        )
    return findings
