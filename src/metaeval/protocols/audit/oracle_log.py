"""Reading a failed run's log: the module or command it lacked, the network error it hit, the
absolute path it could not find, and what the task's own files say about a missing file."""

from __future__ import annotations

import re

from metaeval.protocols.audit.task_view import LoadedTask
from metaeval.tasks.harbor_root import python_prefixes

_CONTAINER_PREFIXES = (
    "/app",
    "/tests",
    "/solution",
    "/logs",
    "/tmp",
    "/usr",
    "/bin",
    "/lib",
    "/lib64",
    "/etc",
    "/proc",
    "/dev",
    "/sbin",
)


_MISSING_MODULE = re.compile(
    r"(ModuleNotFoundError: No module named '([^']+)'|"
    r"ImportError: No module named ([\w.]+))"
)


_MISSING_COMMAND = re.compile(r"([\w.+-]+): command not found")


_MISSING_COMMAND_DASH = re.compile(r"^\S+: \d+: ([\w.+-]+): not found$", re.MULTILINE)


NETWORK_ERRORS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Could not resolve host",
    "nodename nor servname provided",
    "No address associated with hostname",
    "Failed to establish a new connection",
    "getaddrinfo failed",
)


_MISSING_PATH = re.compile(r"No such file or directory(?::)? ?'?(/[^'\s:\"]+)")


_MISSING_PATH_SHELL = re.compile(r"(/[^\s:'\"]+): No such file or directory")


def missing_dependency(log: str) -> str | None:
    match = _MISSING_MODULE.search(log)
    if match:
        return (match.group(2) or match.group(3)).split(".")[0]
    for pattern in (_MISSING_COMMAND, _MISSING_COMMAND_DASH):
        match = pattern.search(log)
        if match:
            return match.group(1)
    return None


_INSTRUCTION_FILE = re.compile(r"(?<![\w/.-])(/?(?:[\w.-]+/)*[\w-][\w.-]*\.([A-Za-z0-9]{1,8}))\b")


def _missing_paths(log: str) -> list[str]:
    """Absolute paths the log says do not exist, in order, once each."""
    found: list[str] = []
    for pattern in (_MISSING_PATH, _MISSING_PATH_SHELL):
        found += [m.group(1) for m in pattern.finditer(log)]
    return list(dict.fromkeys(p.rstrip(".,;") for p in found))


Diagnosis = tuple[str, str, str, str]
"""(subcategory, title, description, recommendation)"""


def diagnose_missing_file(task: LoadedTask, log: str) -> Diagnosis | None:
    """The cause of an oracle failure that its log shows as a missing file, from the task's
    own files: (subcategory, title, description, recommendation), or None.

    - a path under /tests or /solution that the task does not ship: a missing fixture
      (ENV-PATH);
    - a file the solution reads but the instruction never names, while the instruction names
      another file of the same kind: the instruction and the solution disagree on the input
      (INST-CONTRADICT);
    - a file the tests read but the instruction never names, while the instruction names
      another file of the same kind as the output: the tests check another file than the
      specification asks for (EVAL-MISMATCH).
    """
    texts = {f.path: f.text for f in task.files}
    instruction = texts.get("instruction.md", "")
    named = {
        m.group(1).rsplit("/", 1)[-1]: m.group(2).lower()
        for m in _INSTRUCTION_FILE.finditer(instruction)
    }
    for path in _missing_paths(log):
        found = _missing_fixture(task, texts, path) or _disagreement(texts, named, path)
        if found is not None:
            return found
    return None


def _missing_fixture(task: LoadedTask, texts: dict[str, str], path: str) -> Diagnosis | None:
    """ENV-PATH when `path` lies under /tests or /solution and the task does not ship it."""
    for mount in ("/tests/", "/solution/"):
        if path.startswith(mount) and path[1:] not in texts and not (task.root / path[1:]).exists():
            return (
                "ENV-PATH",
                f"The task does not ship `{path}`, which its run reads",
                f"The oracle run failed because `{path}` does not exist: the task's "
                f"{mount.strip('/')}/ directory does not contain `{path[len(mount) :]}`, so "
                "the fixture is missing from the task.",
                f"Add `{path[1:]}` to the task (or stop reading it).",
            )
    return None


def _disagreement(texts: dict[str, str], named: dict[str, str], path: str) -> Diagnosis | None:
    """INST-CONTRADICT or EVAL-MISMATCH when the missing file is one the instruction never
    names while it names another of the same kind, and only the solution (or only the
    tests) reads it."""
    base = path.rsplit("/", 1)[-1]
    if "." not in base or base in named:
        return None
    ext = base.rsplit(".", 1)[-1].lower()
    others = [n for n, e in named.items() if e == ext and n != base]
    if not others:
        return None
    solution = "\n".join(t for p, t in texts.items() if p.startswith("solution/"))
    tests = "\n".join(t for p, t in texts.items() if p.startswith("tests/"))
    shipped = {p.rsplit("/", 1)[-1] for p in texts if p.startswith("environment/")}
    in_solution, in_tests = base in solution, base in tests
    if in_solution and not in_tests:  # the instructed input the environment ships first
        others.sort(key=lambda n: n not in shipped)
        return (
            "INST-CONTRADICT",
            f"The instruction names `{others[0]}` but the solution reads `{base}`",
            f"The reference solution reads `{path}`, which does not exist in the run; the "
            f"instruction never mentions `{base}` and names `{others[0]}` instead. The "
            "instruction and the solution disagree on the input file.",
            f"Make the instruction and the solution name the same file (`{others[0]}` or "
            f"`{base}`), and ship it.",
        )
    if in_tests and not in_solution:  # the instructed output the solution writes first
        others.sort(key=lambda n: n not in solution)
        return (
            "EVAL-MISMATCH",
            f"The tests read `{base}` but the instruction asks for `{others[0]}`",
            f"The tests read `{path}`, which does not exist after the reference solution "
            f"ran; the instruction never mentions `{base}` and asks for `{others[0]}`. An "
            "agent that writes the file it was asked for fails the tests.",
            f"Have the tests read `{others[0]}` (or change the instruction to `{base}`).",
        )
    return None


def missing_absolute_path(log: str) -> str | None:
    allowed = (*_CONTAINER_PREFIXES, *python_prefixes())
    for pattern in (_MISSING_PATH, _MISSING_PATH_SHELL):
        for match in pattern.finditer(log):
            path = match.group(1)
            if not any(path == p or path.startswith(p + "/") for p in allowed):
                return path
    return None
