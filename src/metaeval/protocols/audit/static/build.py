"""Check 8: can the task's environment be built and its files be read at all?

Four defects (and the RUN reads of `run_reads`) that stop a task before any agent runs, each reported once with the line that
shows it:

- **Merge-conflict markers** (`<<<<<<<`, `=======`, `>>>>>>>` in that order, at line starts)
  in any task file: the file is half of two versions. Environment files -> ENV-DEP (the image
  or compose file cannot be parsed), tests -> EVAL-MISMATCH, solution -> GT-LOGIC,
  instruction -> INST-CONTRADICT, other files -> ENV-PATH. Bug, confidence 0.9.
- **COPY/ADD sources missing from the build context**: Harbor builds environment/Dockerfile
  with environment/ as the context. A source that matches no file there, or that climbs out
  of it (`../data`), fails the build: ENV-PATH, Critical, Bug, 0.9. A Terminal-Bench task
  converted to Harbor whose Dockerfile still copies `tests/`, `run-tests.sh` or
  `solution.sh` is named as such. `COPY --from=stage`, URLs and unresolved `$VARS` are
  skipped.
- **Local-only image names**: `FROM` or `[environment] docker_image` (or a compose
  `image:`) naming an image no registry serves: `localhost/...`, or a single name that is
  not an official Docker Hub image (`tb-base`, `my-task-env:latest`). Nobody else can pull
  it: ENV-DEP, High, Bug, 0.7 (0.55 for a name that merely is not in the known list).
- **Compose files that reference missing files** (`compose`): `build` contexts and Dockerfiles,
  `env_file`, relative bind-mount sources, and `configs`/`secrets` files of
  environment/docker-compose.y(a)ml that do not exist: ENV-PATH, Critical, Bug, 0.85. A compose
  file that does not parse as YAML (and has no conflict markers, which are reported above)
  is ENV-DEP, Critical, Bug, 0.85.
"""

from __future__ import annotations

import posixpath
import re

from metaeval.protocols.audit.findings import Evidence, Finding, Severity
from metaeval.protocols.audit.static.build_context import environment_listing, matches_listing
from metaeval.protocols.audit.static.compose import check_compose
from metaeval.protocols.audit.static.finding_builder import evidence_line, make_finding
from metaeval.protocols.audit.static.image_names import local_only_image
from metaeval.protocols.audit.static.run_reads import check_run_reads
from metaeval.protocols.audit.static.task_context import TaskContext
from metaeval.protocols.audit.static.toml_lines import toml_key_lines

_CONFLICT_START = re.compile(r"^<{7}(?: |$)")
_CONFLICT_MID = re.compile(r"^={7}$")
_CONFLICT_END = re.compile(r"^>{7}(?: |$)")
TB_LEFTOVERS = ("tests", "run-tests.sh", "solution.sh", "solution.yaml", "solution")


def check_build(ctx: TaskContext) -> list[Finding]:
    findings = _conflict_markers(ctx)
    marked = {e.file for f in findings for e in f.evidence}
    findings += _dockerfile_error(ctx, marked)
    findings += _copy_sources(ctx)
    findings += check_run_reads(ctx)
    findings += _local_images(ctx)
    findings += check_compose(ctx, marked)
    return findings


# ------------------------------------------------------------------------ conflict markers

_ROLE_SUBCATEGORY: dict[str, tuple[str, Severity]] = {
    "environment": ("ENV-DEP", "Critical"),
    "tests": ("EVAL-MISMATCH", "Critical"),
    "solution": ("GT-LOGIC", "High"),
    "instruction": ("INST-CONTRADICT", "High"),
}


def _conflict_markers(ctx: TaskContext) -> list[Finding]:
    findings: list[Finding] = []
    for f in ctx.task.files:
        if "<<<<<<<" not in f.text:
            continue
        lines = ctx.lines(f.path)
        start = mid = None
        for number, line in enumerate(lines, 1):
            if start is None and _CONFLICT_START.match(line):
                start = number
            elif start is not None and mid is None and _CONFLICT_MID.match(line):
                mid = number
            elif start is not None and mid is not None and _CONFLICT_END.match(line):
                role = "instruction" if f.path == "instruction.md" else f.role
                if f.path == "task.toml":
                    role = "environment"
                subcategory, severity = _ROLE_SUBCATEGORY.get(role, ("ENV-PATH", "High"))
                findings.append(
                    make_finding(
                        ctx,
                        subcategory=subcategory,
                        severity=severity,
                        finding_type="Bug",
                        title=f"Unresolved merge conflict in {f.path}",
                        description=(
                            f"{f.path} still holds git merge-conflict markers (lines {start}, "
                            f"{mid} and {number}): it contains both sides of a conflict, so it "
                            "is neither version its authors meant and most tools cannot parse "
                            "it at all."
                        ),
                        recommendation=(
                            f"Resolve the conflict in {f.path}: keep the right side, delete "
                            "the markers, and check the task again."
                        ),
                        confidence=0.9,
                        evidence=[
                            evidence_line(ctx, f.path, start),
                            evidence_line(ctx, f.path, mid),
                            evidence_line(ctx, f.path, number),
                        ],
                    )
                )
                break
    return findings


# ------------------------------------------------------------------------ COPY / ADD


def _dockerfile_error(ctx: TaskContext, marked: set[str]) -> list[Finding]:
    docker = ctx.docker
    if not docker.present or not docker.error or docker.file in marked:
        return []
    line = docker.error_line or 1
    return [
        make_finding(
            ctx,
            subcategory="ENV-DEP",
            severity="Critical",
            finding_type="Bug",
            title=f"{docker.file} cannot be built",
            description=(
                f"Docker rejects {docker.file}: {docker.error}. The image cannot be built, so "
                "no agent can run the task."
            ),
            recommendation=f"Fix {docker.file} so that `docker build` accepts it.",
            confidence=0.85,
            evidence=[evidence_line(ctx, docker.file, line)],
        )
    ]


def _copy_sources(ctx: TaskContext) -> list[Finding]:
    docker = ctx.docker
    if not docker.present or not docker.file.startswith("environment/") or docker.error:
        return []
    listing = environment_listing(ctx)
    context_dir = posixpath.dirname(docker.file)[len("environment") :].lstrip("/")
    missing: list[tuple[int, str, str]] = []  # (line, source, why)
    for copy in docker.copies:
        if copy.from_stage is not None or copy.heredoc:
            continue
        for source in copy.sources:
            if "://" in source or "$" in source or source.startswith("git@"):
                continue
            joined = posixpath.normpath(posixpath.join(context_dir, source.lstrip("/")))
            if joined == ".." or joined.startswith("../"):
                missing.append((copy.line, source, "outside"))
            elif not matches_listing(joined, listing):
                missing.append((copy.line, source, "missing"))
    if not missing:
        return []
    sources = list(dict.fromkeys(s for _, s, _ in missing))
    leftovers = [s for s in sources if s.strip("./").split("/", 1)[0] in TB_LEFTOVERS]
    outside = [s for _, s, why in missing if why == "outside"]
    shown = ", ".join(f"`{s}`" for s in sources[:6])
    description = (
        f"{docker.file} copies {shown} into the image, but Harbor builds it with environment/ "
        "as the build context and "
        + (
            f"{', '.join(f'`{s}`' for s in outside)} lie outside it (Docker refuses to copy "
            "from outside the context)"
            if outside
            else "no such file is there"
        )
        + ", so the image cannot be built and no agent can run the task."
    )
    if leftovers:
        description += (
            " These are a Terminal-Bench task's test and solution files, which the Harbor "
            "layout keeps in tests/ and solution/ (mounted at run time, not copied)."
        )
    return [
        make_finding(
            ctx,
            subcategory="ENV-PATH",
            severity="Critical",
            finding_type="Bug",
            title=f"Dockerfile copies {sources[0]}, which is not in the build context",
            description=description,
            recommendation=(
                "Remove the COPY/ADD lines for files Harbor mounts itself (tests/, solution/), "
                "and put every other copied file inside environment/ (or fix the path)."
            ),
            confidence=0.9,
            evidence=[
                evidence_line(ctx, docker.file, line)
                for line in dict.fromkeys(line for line, _, _ in missing)
            ][:8],
        )
    ]


# ------------------------------------------------------------------------ image names


def _local_images(ctx: TaskContext) -> list[Finding]:
    findings: list[Finding] = []
    sites: list[tuple[str, int | None, str]] = []
    for from_line, image in ctx.docker.from_lines:
        sites.append((ctx.docker.file, from_line, image))
    if ctx.docker_image:
        toml_line = toml_key_lines(ctx.toml_lines).get("environment.docker_image")
        sites.append(("task.toml", toml_line, ctx.docker_image))
    for path, line, image in sites:
        local, confidence = local_only_image(image)
        if not local:
            continue
        evidence = (
            [evidence_line(ctx, path, line)] if line else [Evidence(file=path, snippet=image)]
        )
        findings.append(
            make_finding(
                ctx,
                subcategory="ENV-DEP",
                severity="High",
                finding_type="Bug" if confidence >= 0.55 else "Warning",
                title=f"Image `{image}` exists only on its author's machine",
                description=(
                    f"{path} names the image `{image}`, which "
                    + (
                        "is a local (`localhost/`) image"
                        if image.startswith("localhost")
                        else "has no registry or owner and is not an official Docker Hub image"
                    )
                    + ". No registry serves it, so anyone else's build or pull fails before "
                    "the task starts."
                ),
                recommendation=(
                    "Name an image a registry serves (with its registry and a pinned tag or "
                    "digest), or build it from a Dockerfile shipped in environment/."
                ),
                confidence=confidence,
                evidence=evidence,
                unseen="whether a registry or this machine's engine serves the image",
                claim="absence",
            )
        )
    return findings
