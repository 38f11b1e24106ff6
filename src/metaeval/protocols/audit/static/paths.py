"""Check 2: absolute paths in the solution or tests that the environment never provides.

Referenced paths: string literals in Python (a whole literal that is an absolute path, the
literal prefix of an f-string, the words of a `subprocess`/`os.system` command) and the
resolved words and redirect targets of shell commands, as tree-sitter-bash reads them
(`"$(dirname "$0")/x.py"` is /tests/x.py; sed/grep/awk patterns and `-c` programs are not
paths; comments and data heredocs are excluded). A path needs two
segments or a file extension (`/home/alice/x`, `/input.csv`), which keeps `a /b` arithmetic
and `/pattern/` regexes out.

Provided paths:

- Harbor's own mounts and the working directory: /app, /tests, /solution, /logs (verifier,
  agent), /tmp, and `[environment] workdir`;
- system directories of any Linux image: /usr, /bin, /sbin, /lib*, /etc, /dev, /proc, /sys,
  /var, /run, /root, /boot; the bare directories /home, /opt, /mnt, /srv, /media (but not
  what is under them);
- everything the Dockerfile names (WORKDIR, COPY/ADD destinations, VOLUME, any absolute path
  in RUN/ENV such as `mkdir -p /data` or `git clone ... /opt/tool`), plus their parent
  directories, and `/home/<user>` for `useradd`/`adduser`;
- absolute paths in the instruction (the agent is told to create them) and directories the
  task's own scripts create (`mkdir`, `os.makedirs`, `Path(...).mkdir`).

A path below none of these is reported, grouped by its top two segments (one root cause per
missing directory, e.g. `/data` or `/home/alice`), as ENV-PATH: High when the tests use it
(every agent fails), Medium when only the reference solution does. Confidence 0.7 with a
Dockerfile on a plain base image (python, debian, ubuntu, ...), 0.6 when the task has no
environment. When the base image (FROM, or a prebuilt `docker_image`) is one whose contents
are unknown (a SWE-bench image may well hold /opt/miniconda3 and /testbed), the path is only
a suspicion: Low, Warning, 0.3, until a container run confirms it. Path-shaped values that
the task's own data files hold (`/orders/7` in a request log) are data, not paths. In test files
that talk HTTP, extensionless paths are taken for URL routes and skipped.
"""

from __future__ import annotations

import posixpath
import re

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static.finding_builder import (
    dedupe_evidence,
    evidence_line,
    make_finding,
)
from metaeval.protocols.audit.static.path_uses import PathUse, normal_path, shared_path_uses
from metaeval.protocols.audit.static.task_context import TaskContext, absolute_tokens

UNKNOWN_IMAGE_CONFIDENCE = 0.3
HARBOR_PATHS = ("/app", "/tests", "/solution", "/logs", "/tmp", "/installed-agent", "/oracle")
SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/dev",
    "/proc",
    "/sys",
    "/var",
    "/run",
    "/root",
    "/boot",
)
BARE_DIRS = frozenset({"/", "/home", "/opt", "/mnt", "/srv", "/media"})

_HAS_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_HTTP_HINT = re.compile(
    r"https?://|\bimport (?:requests|httpx|aiohttp|urllib)|\bfrom (?:requests|httpx|fastapi|flask|starlette)\b|\bcurl\b"
)


def _enough(path: str) -> bool:
    segments = [s for s in path.split("/") if s]
    return len(segments) >= 2 or (len(segments) == 1 and bool(_HAS_EXT.search(segments[0])))


def check_absolute_paths(ctx: TaskContext) -> list[Finding]:
    uses, created = shared_path_uses(ctx)
    if not uses:
        return []
    missing = _missing_by_root(ctx, uses, _provided_paths(ctx, created))
    if not missing:
        return []
    return [_missing_path_finding(ctx, root, group) for root, group in missing.items()]


def _provided_paths(ctx: TaskContext, created: set[str]) -> set[str]:
    """What the runtime has: Harbor's mounts, system directories, what the task's scripts
    create, what the Dockerfile makes (and its parents), the workdir, the instruction's paths."""
    provided: set[str] = set(HARBOR_PATHS) | set(SYSTEM_PATHS) | created
    for path in ctx.docker.provided:
        path = normal_path(path)
        provided.add(path)
        parent = posixpath.dirname(path)
        if parent != "/":
            provided.add(parent)
    workdir = ctx.environment_section.get("workdir")
    if isinstance(workdir, str) and workdir.startswith("/"):
        provided.add(normal_path(workdir))
    if ctx.instruction is not None:
        for token in absolute_tokens(ctx.instruction.text):
            token = normal_path(token)
            provided.add(token)
            if posixpath.dirname(token) != "/":
                provided.add(posixpath.dirname(token))
    provided.discard("/")
    return provided


def _missing_by_root(
    ctx: TaskContext, uses: list[PathUse], provided: set[str]
) -> dict[str, list[PathUse]]:
    """Uses of paths the runtime lacks, grouped by their top directory (`/data`, `/home/alice`)."""
    # A path-shaped value that the task's own data holds (`/orders/7` in a request log the
    # tests summarise) is data the tests compare against, not a file they open.
    data_text = "\n".join(
        f.text
        for f in ctx.role_files("environment")
        if not f.path.rsplit("/", 1)[-1].startswith(("Dockerfile", "docker-compose", "compose"))
    )

    http_files = {f.path for f in ctx.role_files("tests") if _HTTP_HINT.search(f.text)}
    missing: dict[str, list[PathUse]] = {}
    for use in uses:
        path = normal_path(use.path)
        if not _enough(path) or path in BARE_DIRS:
            continue
        if any(path == p or path.startswith(p + "/") or p.startswith(path + "/") for p in provided):
            continue
        if use.file in http_files and not _HAS_EXT.search(path):
            continue
        if data_text and use.path in data_text:
            continue
        segments = [s for s in path.split("/") if s]
        root = "/" + segments[0]
        if root in BARE_DIRS and len(segments) > 2:  # /home/alice, /mnt/data
            root += "/" + segments[1]
        missing.setdefault(root, []).append(use)
    return missing


def _runtime_confidence(ctx: TaskContext) -> tuple[float, str]:
    """Confidence of a missing path, and why the runtime lacks it."""
    unknown_base = ctx.unknown_base_image
    if unknown_base:
        # An image nobody here can look into may well hold the path: a suspicion, no more,
        # until a container run confirms it.
        return (
            UNKNOWN_IMAGE_CONFIDENCE,
            f"the base image `{unknown_base}` may provide it (not confirmed by a container run)",
        )
    if ctx.docker.present:
        return 0.7, "environment/Dockerfile never creates or copies it"
    return 0.6, "the task defines no environment that would create it"


def _missing_path_finding(ctx: TaskContext, root: str, group: list[PathUse]) -> Finding:
    unknown_base = ctx.unknown_base_image
    confidence, runtime = _runtime_confidence(ctx)
    in_tests = any(u.role == "tests" for u in group)
    paths = list(dict.fromkeys(u.path for u in group))
    shown = ", ".join(f"`{p}`" for p in paths[:4]) + (" ..." if len(paths) > 4 else "")
    file_list = list(dict.fromkeys(u.file for u in group))
    files = ", ".join(file_list) + (" uses" if len(file_list) == 1 else " use")
    impact = (
        "The tests look for it at run time, so they fail for every agent, including a correct one."
        if in_tests
        else "The reference solution depends on it, so the task was never shown to be "
        "solvable in its own environment."
    )
    return make_finding(
        ctx,
        subcategory="ENV-PATH",
        severity="Low" if unknown_base else ("High" if in_tests else "Medium"),
        finding_type="Bug" if confidence >= 0.55 else "Warning",
        title=f"Hard-coded path {paths[0]} is not provided by the environment",
        description=(
            f"{files} {shown} under `{root}`, but {runtime}, the instruction "
            "does not ask for it, and Harbor mounts only /app (the working directory), "
            f"/tests, /solution and /logs. {impact}"
        ),
        recommendation=(
            f"Use a path the runtime has (e.g. under /app or /tests), or create/copy "
            f"`{root}` in environment/Dockerfile (`COPY ... {root}/` or `RUN mkdir -p "
            f"{root}`)."
        ),
        confidence=confidence,
        evidence=dedupe_evidence(evidence_line(ctx, u.file, u.line) for u in group),
        unseen=(
            f"the image `{unknown_base}` could not be inspected; it may hold `{root}`"
            if unknown_base
            else None
        ),
        claim="absence",
    )
