"""Compose files of a task's environment that reference missing files (part of check 8).

`build` contexts and Dockerfiles, `env_file`, relative bind-mount sources, and
`configs`/`secrets` files of environment/docker-compose.y(a)ml that do not exist: ENV-PATH,
Critical, Bug, 0.85. A compose file that does not parse as YAML (and has no conflict markers,
which `build` reports) is ENV-DEP, Critical, Bug, 0.85.
"""

from __future__ import annotations

import posixpath

import yaml

from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.static.build_context import environment_listing
from metaeval.protocols.audit.static.finding_builder import evidence_line, make_finding
from metaeval.protocols.audit.static.image_names import local_only_image
from metaeval.protocols.audit.static.task_context import TaskContext

COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")


def check_compose(ctx: TaskContext, marked: set[str]) -> list[Finding]:
    findings: list[Finding] = []
    listing = environment_listing(ctx)
    for name in COMPOSE_NAMES:
        path = f"environment/{name}"
        f = ctx.files.get(path)
        if f is None:
            continue
        try:
            data = yaml.safe_load(f.text)
        except (yaml.YAMLError, RecursionError) as exc:
            if path in marked:
                continue
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else 1
            why = (
                "it nests too deeply to be parsed"
                if isinstance(exc, RecursionError)
                else str(exc).splitlines()[0]
            )
            findings.append(
                make_finding(
                    ctx,
                    subcategory="ENV-DEP",
                    severity="Critical",
                    finding_type="Bug",
                    title=f"{path} is not valid YAML",
                    description=(
                        f"{path} does not parse ({why}), so the environment cannot be started."
                    ),
                    recommendation=f"Fix the YAML syntax of {path}.",
                    confidence=0.85,
                    evidence=[evidence_line(ctx, path, line)],
                )
            )
            continue
        if not isinstance(data, dict):
            continue
        missing = _compose_missing(data, listing)
        if missing:
            lines = ctx.lines(path)
            evidence = []
            for ref in missing:
                number = next(
                    (i for i, text in enumerate(lines, 1) if ref.split("/")[-1] in text), None
                )
                if number:
                    evidence.append(evidence_line(ctx, path, number))
            findings.append(
                make_finding(
                    ctx,
                    subcategory="ENV-PATH",
                    severity="Critical",
                    finding_type="Bug",
                    title=f"{path} references files that do not exist",
                    description=(
                        f"{path} uses {', '.join(f'`{m}`' for m in missing[:6])}, relative to "
                        "environment/, but the task does not ship them, so the services cannot "
                        "be built or started."
                    ),
                    recommendation="Ship the referenced files in environment/ or fix the paths.",
                    confidence=0.85,
                    evidence=evidence or [Evidence(file=path)],
                )
            )
        for service in (data.get("services") or {}).values():
            image = service.get("image") if isinstance(service, dict) else None
            if isinstance(image, str) and local_only_image(image)[0] and not service.get("build"):
                lines = ctx.lines(path)
                number = next((i for i, t in enumerate(lines, 1) if image in t), None)
                findings.append(
                    make_finding(
                        ctx,
                        subcategory="ENV-DEP",
                        severity="High",
                        finding_type="Bug",
                        title=f"Image `{image}` exists only on its author's machine",
                        description=(
                            f"{path} runs the image `{image}`, which no registry serves and no "
                            "`build:` entry builds, so the environment cannot start elsewhere."
                        ),
                        recommendation="Build it from environment/ or name a public image.",
                        confidence=local_only_image(image)[1],
                        evidence=[evidence_line(ctx, path, number)]
                        if number
                        else [Evidence(file=path)],
                    )
                )
    return findings


def _compose_missing(data: dict, listing: list[str]) -> list[str]:
    """Relative file references of a compose file that are not in environment/."""
    refs: list[str] = []

    def exists(ref: str) -> bool:
        clean = posixpath.normpath(ref)
        if clean in (".", ""):
            return True
        if clean.startswith(".."):
            return False
        return any(n == clean or n.startswith(clean + "/") for n in listing)

    def relative(ref: object) -> str | None:
        if not isinstance(ref, str) or "$" in ref or ref.startswith(("/", "~")) or "://" in ref:
            return None
        return ref

    services = data.get("services") or {}
    if not isinstance(services, dict):
        return []
    for service in services.values():
        if not isinstance(service, dict):
            continue
        build = service.get("build")
        context = "."
        dockerfile = "Dockerfile"
        if isinstance(build, str):
            context = build
        elif isinstance(build, dict):
            context = build.get("context", ".")
            dockerfile = build.get("dockerfile", "Dockerfile")
        if build is not None and (ctx_ref := relative(context)) is not None:
            if not exists(ctx_ref):
                refs.append(ctx_ref)
            elif (df := relative(dockerfile)) is not None:
                joined = posixpath.join(ctx_ref, df)
                if not exists(joined):
                    refs.append(joined)
        env_files = service.get("env_file")
        for ref in [env_files] if isinstance(env_files, str) else env_files or []:
            if isinstance(ref, dict):
                if ref.get("required") is False:
                    continue
                ref = ref.get("path")
            if (rel := relative(ref)) is not None and not exists(rel):
                refs.append(rel)
        for volume in service.get("volumes") or []:
            source = None
            if isinstance(volume, str) and ":" in volume:
                source = volume.split(":", 1)[0]
                if not source.startswith("."):
                    continue  # a named volume
            elif isinstance(volume, dict) and volume.get("type") == "bind":
                source = volume.get("source")
            if (rel := relative(source)) is not None and not exists(rel):
                refs.append(rel)
    for section in ("configs", "secrets"):
        entries = data.get(section) or {}
        if isinstance(entries, dict):
            for entry in entries.values():
                rel = relative(entry.get("file")) if isinstance(entry, dict) else None
                if rel is not None and not exists(rel):
                    refs.append(rel)
    return list(dict.fromkeys(refs))
