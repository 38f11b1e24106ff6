"""Compose files of a task's environment that reference missing files (part of check 8).

`build` contexts and Dockerfiles, `env_file`, and `configs`/`secrets` files of
environment/docker-compose.y(a)ml that do not exist: ENV-PATH, Critical, Bug, 0.85 (an
intrinsic claim). A relative bind-mount source that does not exist is an absence claim: Compose
creates a short-syntax source (`./runs:/app/runs`) itself, so only a long-syntax bind without
`create_host_path` is reported, `assumed` (whoever starts the environment may create it). A compose file that does not parse as YAML (and has no conflict markers,
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
            if path not in marked:
                findings.append(_invalid_yaml_finding(ctx, path, exc))
            continue
        if not isinstance(data, dict):
            continue
        missing = _compose_missing(data, listing)
        if missing:
            findings.append(_missing_refs_finding(ctx, path, missing))
        mounts = _mount_refs(data, listing)
        if mounts:
            findings.append(_missing_refs_finding(ctx, path, mounts, mounts=True))
        findings += _local_image_findings(ctx, path, data)
    return findings


def _invalid_yaml_finding(ctx: TaskContext, path: str, exc: Exception) -> Finding:
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else 1
    why = (
        "it nests too deeply to be parsed"
        if isinstance(exc, RecursionError)
        else str(exc).splitlines()[0]
    )
    return make_finding(
        ctx,
        subcategory="ENV-DEP",
        severity="Critical",
        finding_type="Bug",
        title=f"{path} is not valid YAML",
        description=(f"{path} does not parse ({why}), so the environment cannot be started."),
        recommendation=f"Fix the YAML syntax of {path}.",
        confidence=0.85,
        evidence=[evidence_line(ctx, path, line)],
    )


def _missing_refs_finding(
    ctx: TaskContext, path: str, missing: list[str], mounts: bool = False
) -> Finding:
    lines = ctx.lines(path)
    evidence = []
    for ref in missing:
        number = next((i for i, text in enumerate(lines, 1) if ref.split("/")[-1] in text), None)
        if number:
            evidence.append(evidence_line(ctx, path, number))
    return make_finding(
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
        claim="absence" if mounts else "intrinsic",
        unseen=(
            "whether whoever starts the environment creates the bind-mount source first "
            "(a directory of the host, not of the task)"
            if mounts
            else None
        ),
    )


def _local_image_findings(ctx: TaskContext, path: str, data: dict) -> list[Finding]:
    """Services that run an image only its author's machine has, with nothing to build it."""
    findings: list[Finding] = []
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


def _exists(ref: str, listing: list[str]) -> bool:
    """Whether a relative reference names a file or directory of environment/."""
    clean = posixpath.normpath(ref)
    if clean in (".", ""):
        return True
    if clean.startswith(".."):
        return False
    return any(n == clean or n.startswith(clean + "/") for n in listing)


def _relative(ref: object) -> str | None:
    """The reference when it is a plain relative path (no variable, URL or home path)."""
    if not isinstance(ref, str) or "$" in ref or ref.startswith(("/", "~")) or "://" in ref:
        return None
    return ref


def _compose_missing(data: dict, listing: list[str]) -> list[str]:
    """Relative file references of a compose file that are not in environment/."""
    services = data.get("services") or {}
    if not isinstance(services, dict):
        return []
    refs: list[str] = []
    for service in services.values():
        if not isinstance(service, dict):
            continue
        refs += _build_refs(service, listing)
        refs += _env_file_refs(service, listing)
    for section in ("configs", "secrets"):
        entries = data.get(section) or {}
        if isinstance(entries, dict):
            for entry in entries.values():
                rel = _relative(entry.get("file")) if isinstance(entry, dict) else None
                if rel is not None and not _exists(rel, listing):
                    refs.append(rel)
    return list(dict.fromkeys(refs))


def _build_refs(service: dict, listing: list[str]) -> list[str]:
    """A missing `build` context, or else a missing Dockerfile in it."""
    build = service.get("build")
    context = "."
    dockerfile = "Dockerfile"
    if isinstance(build, str):
        context = build
    elif isinstance(build, dict):
        context = build.get("context", ".")
        dockerfile = build.get("dockerfile", "Dockerfile")
    if build is None or (ctx_ref := _relative(context)) is None:
        return []
    if not _exists(ctx_ref, listing):
        return [ctx_ref]
    if (df := _relative(dockerfile)) is not None:
        joined = posixpath.join(ctx_ref, df)
        if not _exists(joined, listing):
            return [joined]
    return []


def _env_file_refs(service: dict, listing: list[str]) -> list[str]:
    """Missing `env_file` entries (those marked `required: false` may be absent)."""
    refs: list[str] = []
    env_files = service.get("env_file")
    for ref in [env_files] if isinstance(env_files, str) else env_files or []:
        if isinstance(ref, dict):
            if ref.get("required") is False:
                continue
            ref = ref.get("path")
        if (rel := _relative(ref)) is not None and not _exists(rel, listing):
            refs.append(rel)
    return refs


def _mount_refs(data: dict, listing: list[str]) -> list[str]:
    """Missing sources of relative long-syntax bind mounts that Compose will not create
    (short syntax `./data:/data` creates its source; named volumes are not files)."""
    services = data.get("services") or {}
    refs: list[str] = []
    for service in services.values() if isinstance(services, dict) else []:
        volumes = service.get("volumes") if isinstance(service, dict) else None
        for volume in volumes if isinstance(volumes, list) else []:
            if not isinstance(volume, dict) or volume.get("type") != "bind":
                continue
            bind = volume.get("bind")
            if isinstance(bind, dict) and bind.get("create_host_path") is True:
                continue
            rel = _relative(volume.get("source"))
            if rel is not None and not _exists(rel, listing):
                refs.append(rel)
    return list(dict.fromkeys(refs))
