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

import re
import sys
from dataclasses import dataclass

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.finding_builder import (
    dedupe_evidence,
    evidence_line,
    make_finding,
)
from metaeval.protocols.audit.static.import_sites import (
    ImportSite,
    import_sites,
    pep723_dependencies,
)
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


@dataclass
class _Runtime:
    """What the task runs on, as far as this check can see it."""

    text: str  # the sentence the finding gives as the reason
    confidence: float
    sure: bool  # everything the runtime installs is visible here
    unseen: str | None  # what could not be looked into, if anything


def check_imports(ctx: TaskContext) -> list[Finding]:
    run = _run_test_files(ctx)
    sources = [
        s
        for s in ctx.python_sources
        if s.role == "solution" or not s.file.endswith(".py") or s.file in run
    ]
    if not sources:
        return []
    by_role = {"tests": ctx.role_imports("tests"), "solution": ctx.role_imports("solution")}
    missing = _missing_imports(ctx, sources, by_role)
    if not missing:
        return []
    tests_local_install = any(i.local for _, _, i in ctx.script_installs("tests"))
    runtime = _runtime(ctx)
    return [
        _import_finding(ctx, module, sites, runtime, by_role["solution"], tests_local_install)
        for module, sites in missing.items()
    ]


def _missing_imports(
    ctx: TaskContext, sources: list[PySource], by_role: dict[str, set[str]]
) -> dict[str, list[ImportSite]]:
    """Third-party modules nothing installs for the phase that imports them, with their sites."""
    local = local_modules(ctx)
    env = ctx.environment_imports
    env = env | {n.replace("_", "") for n in env}
    role = {k: v | {n.replace("_", "") for n in v} for k, v in by_role.items()}
    missing: dict[str, list[ImportSite]] = {}
    for source in sources:
        inline = set()  # PEP 723: `# /// script` dependencies, installed by `uv run`
        for dist in pep723_dependencies(source.text):
            inline |= import_names(dist)
        for site in import_sites(source):
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
    return missing


def _runtime(ctx: TaskContext) -> _Runtime:
    """The task's runtime: how sure a missing import is, and what could not be looked into."""
    if not ctx.has_environment:
        text = "The task defines no environment (no Dockerfile, requirements or docker_image), so it runs on the plain host Python"
        return _Runtime(text, 0.7, True, None)
    if not ctx.docker.present and ctx.docker_image:
        text = f"The task runs in the prebuilt image `{ctx.docker_image}`"
        unseen = f"the image `{ctx.docker_image}` could not be inspected"
        return _Runtime(text, UNKNOWN_IMAGE_CONFIDENCE, False, unseen)
    if ctx.environment_is_opaque:
        text = (
            "The Dockerfile installs a project or requirements file whose package list is not "
            "visible here (a local install, `uv sync`, an unloaded requirements file)"
        )
        unseen = "the package list of what the Dockerfile installs could not be read"
        return _Runtime(text, 0.45, False, unseen)
    if ctx.unknown_base_image:
        text = f"The Dockerfile builds on `{ctx.unknown_base_image}`"
        unseen = f"the base image `{ctx.unknown_base_image}` could not be inspected"
        return _Runtime(text, UNKNOWN_IMAGE_CONFIDENCE, False, unseen)
    if ctx.unresolved_environment_dists:
        shown = ", ".join(f"`{d}`" for d in ctx.unresolved_environment_dists[:3])
        text = f"The environment installs {shown}, whose dependencies are not known here"
        unseen = f"the dependencies of {shown} could not be read; one may provide it"
        return _Runtime(text, UNKNOWN_IMAGE_CONFIDENCE, False, unseen)
    text = (
        "Neither the environment (Dockerfile, requirements) nor the phase's own scripts install it"
    )
    return _Runtime(text, 0.7, True, None)


def _import_confidence(
    module: str, in_tests: bool, only_solution_installs: bool, runtime: _Runtime, local: bool
) -> tuple[float, str | None]:
    """Confidence of one missing import, and what may provide it unseen (`local`: tests/
    installs a local package)."""
    confidence = runtime.confidence
    unseen = f"{runtime.unseen}; `{module}` may come with it" if runtime.unseen else None
    if in_tests and local:
        confidence = min(confidence, 0.45)
        unseen = unseen or (
            "tests/ installs a local package whose contents could not be read; "
            f"it may provide `{module}`"
        )
    if only_solution_installs and runtime.sure:
        confidence = 0.75
    return confidence, unseen


def _why_it_fails(runtime: _Runtime, in_tests: bool, only_solution_installs: bool) -> str:
    """Why the import fails, and what that does to the task."""
    if only_solution_installs:
        reason = (
            "Only the reference solution installs it (solution/ scripts), so the tests "
            "pass with the oracle but fail for an agent that did not happen to install the "
            "same package"
        )
    else:
        reason = runtime.text + "."
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
    return f"{reason} {impact}"


def _import_finding(
    ctx: TaskContext,
    module: str,
    sites: list[ImportSite],
    runtime: _Runtime,
    solution_imports: set[str],
    tests_local_install: bool,
) -> Finding:
    in_tests = any(s.role == "tests" for s in sites)
    only_solution_installs = in_tests and module.lower() in solution_imports
    confidence, unseen = _import_confidence(
        module, in_tests, only_solution_installs, runtime, tests_local_install
    )
    files = list(dict.fromkeys(s.file for s in sites))
    where = ", ".join(files)
    return make_finding(
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
            f"third-party module. {_why_it_fails(runtime, in_tests, only_solution_installs)}"
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
        claim="absence",
    )
