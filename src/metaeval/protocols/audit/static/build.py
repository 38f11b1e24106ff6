"""Check 8: can the task's environment be built and its files be read at all?

Four defects that stop a task before any agent runs, each reported once with the line that
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
- **Compose files that reference missing files**: `build` contexts and Dockerfiles,
  `env_file`, relative bind-mount sources, and `configs`/`secrets` files of
  environment/docker-compose.y(a)ml that do not exist: ENV-PATH, Critical, Bug, 0.85. A compose
  file that does not parse as YAML (and has no conflict markers, which are reported above)
  is ENV-DEP, Critical, Bug, 0.85.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from pathlib import Path

import yaml

from metaeval.protocols.audit.findings import Evidence, Finding, Severity
from metaeval.protocols.audit.static.context import (
    TaskContext,
    evidence_line,
    make_finding,
    skipped_path,
    strip_wrappers,
)
from metaeval.protocols.audit.static.dockerfile import CopyInstruction, CopyStep
from metaeval.protocols.audit.static.mounted import file_reads, under_created
from metaeval.protocols.audit.static.shell import SimpleCommand
from metaeval.tasks.safe_files import walk_tree

_CONFLICT_START = re.compile(r"^<{7}(?: |$)")
_CONFLICT_MID = re.compile(r"^={7}$")
_CONFLICT_END = re.compile(r"^>{7}(?: |$)")
COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
TB_LEFTOVERS = ("tests", "run-tests.sh", "solution.sh", "solution.yaml", "solution")

# Official Docker Hub images (library/...) a task may name without a registry or owner.
_OFFICIAL = """
    alpine almalinux amazoncorretto amazonlinux arangodb archlinux bash buildpack-deps busybox
    caddy cassandra centos chronograf clearlinux clojure composer consul couchbase couchdb
    crate dart debian docker eclipse-mosquitto eclipse-temurin elasticsearch elixir erlang
    fedora flink fluentd gcc gradle golang groovy haproxy haskell hello-world httpd hylang
    ibmjava influxdb irssi jetty jruby julia kapacitor kibana kong liquibase logstash
    mariadb maven memcached mongo mongo-express mono mysql nats neo4j nextcloud nginx node
    odoo open-liberty openjdk oraclelinux orientdb percona perl photon php php-zendserver
    phpmyadmin postgres pypy python r-base rabbitmq redis redmine registry rethinkdb
    rockylinux ruby rust sapmachine scratch solr sonarqube spark swift telegraf tomcat tomee
    traefik ubuntu vault wordpress xwiki zookeeper ros gazebo nats-streaming matomo ghost
    drupal joomla mediawiki plone rocket.chat silverpeas znc adminer backdrop bonita
    convertigo friendica geonetwork lightstreamer nuxeo postfixadmin teamspeak yourls
    emqx ibm-semeru-runtimes mageia sl storm unit varnish websphere-liberty
    """
OFFICIAL_IMAGES = frozenset(_OFFICIAL.split())


def check_build(ctx: TaskContext) -> list[Finding]:
    findings = _conflict_markers(ctx)
    marked = {e.file for f in findings for e in f.evidence}
    findings += _dockerfile_error(ctx, marked)
    findings += _copy_sources(ctx)
    findings += _run_reads(ctx)
    findings += _local_images(ctx)
    findings += _compose(ctx, marked)
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


def environment_listing(ctx: TaskContext) -> list[str]:
    """Paths relative to environment/ of every file there (loaded, skipped, or on disk);
    computed once per task context."""
    cached = ctx.shared.get("environment_listing")
    if cached is not None:
        return cached
    names: set[str] = set()
    for path in list(ctx.files) + [skipped_path(s) for s in ctx.task.skipped_files]:
        if path.startswith("environment/"):
            names.add(path[len("environment/") :])
    env_dir = Path(ctx.task.root) / "environment"
    if env_dir.is_dir():  # iterative walk: a task nested deeper than Python's stack is fine
        for entry in walk_tree(env_dir, boundary=ctx.task.root):
            if entry.kind != "dir":
                names.add(entry.rel)
    listing = ctx.shared["environment_listing"] = sorted(names)
    return listing


def _matches(source: str, listing: list[str]) -> bool:
    source = posixpath.normpath(source).lstrip("/")  # "./.env" is ".env", not "env"
    if source in (".", ""):
        return True
    if any(ch in source for ch in "*?["):
        return any(
            fnmatch.fnmatchcase(name, source)
            or any(fnmatch.fnmatchcase(prefix, source) for prefix in _prefixes(name))
            for name in listing
        )
    return any(name == source or name.startswith(source.rstrip("/") + "/") for name in listing)


def _prefixes(name: str) -> list[str]:
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


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
            elif not _matches(joined, listing):
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


def local_only_image(image: str) -> tuple[bool, float]:
    """(True, confidence) when no registry can serve `image`."""
    if not image or "$" in image or image == "scratch":
        return False, 0.0
    name = image.split("@", 1)[0]
    first = name.split("/", 1)[0]
    if first in ("localhost",) or first.startswith("localhost:"):
        return True, 0.7
    if "/" in name:
        return False, 0.0  # owner/name or registry/...: may be public
    base = name.split(":", 1)[0].lower()
    if base in OFFICIAL_IMAGES:
        return False, 0.0
    return True, 0.55


def _local_images(ctx: TaskContext) -> list[Finding]:
    findings: list[Finding] = []
    sites: list[tuple[str, int | None, str]] = []
    for from_line, image in ctx.docker.from_lines:
        sites.append((ctx.docker.file, from_line, image))
    if ctx.docker_image:
        from metaeval.protocols.audit.static.context import toml_key_lines

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
            )
        )
    return findings


# ------------------------------------------------------------------------ compose


def _compose(ctx: TaskContext, marked: set[str]) -> list[Finding]:
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


# ------------------------------------------------------------------------ RUN reads

# Commands that create nothing beyond what their arguments name: after one of anything else
# (a build script, a compiler, git, curl, tar ...) any file may exist, and no read is judged.
_INERT = frozenset(
    [
        "apt-get",
        "apt",
        "apk",
        "yum",
        "dnf",
        "microdnf",
        "pip",
        "pip3",
        "chmod",
        "chown",
        "chgrp",
        "mkdir",
        "rm",
        "ln",
        "echo",
        "printf",
        "useradd",
        "adduser",
        "groupadd",
        "addgroup",
        "export",
        "cd",
        "true",
        "set",
        "ls",
        "cat",
        "test",
        "[",
        "update-ca-certificates",
        "locale-gen",
        "sed",
        "cp",
        "mv",
        "install",
        "touch",
        "rmdir",
    ]
)


def _run_reads(ctx: TaskContext) -> list[Finding]:
    """ENV-PATH Critical: a RUN command reads a file under a directory COPY put in the image
    (`COPY scripts/ /app/scripts/` then `RUN chmod +x /app/scripts/x.sh`) that the build
    context does not have, and nothing before created it: the build fails there.

    Judged only where a failure fails the build: single-stage Dockerfiles, the last statement
    of a RUN (or every one after `set -e`), no `||` fallback or pipe, and only until a RUN
    runs anything that may create files (see `_INERT`)."""
    docker = ctx.docker
    if not docker.present or docker.error or docker.stage_count != 1:
        return []
    if not docker.file.startswith("environment/"):
        return []
    listing = environment_listing(ctx)
    context_dir = posixpath.dirname(docker.file)[len("environment") :].lstrip("/")
    copied: list[tuple[str, str]] = []  # (image directory, context directory)
    created: set[str] = set()
    findings: list[Finding] = []
    for step in docker.steps:
        if isinstance(step, CopyStep):
            copied += _copied_dirs(step.copy, step.workdir, context_dir, listing)
            created |= _copied_files(step.copy, step.workdir, context_dir, listing)
            continue
        statements, where = step.statements, step.line
        strict = bool(statements) and re.match(r"set\s+-\w*e", statements[0].text) is not None
        for index, statement in enumerate(statements):
            judged = (strict or index == len(statements) - 1) and not re.search(
                r"\|", statement.text
            )
            for simple in statement.simple:
                if judged:
                    for read in file_reads(simple):
                        path = _absolute(read, simple.cwd)
                        if path is None or under_created(path, created):
                            continue
                        missing = _missing_in_context(path, copied, listing)
                        if missing is not None:
                            findings.append(_run_read_finding(ctx, where, path, missing, simple))
                            return findings  # the build stops at the first failing read
                created |= _creates(simple)
                name = _command_name(simple)
                if name not in _INERT and not _inert_python(simple):
                    return findings  # anything may exist from here on
    return findings


def _copied_dirs(
    copy: CopyInstruction, workdir: str, context_dir: str, listing: list[str]
) -> list[tuple[str, str]]:
    """(image directory, context directory) pairs a COPY fills with a directory's contents."""
    if copy.instruction != "COPY" or copy.from_stage is not None or copy.heredoc:
        return []
    dest = copy.destination
    dest = posixpath.normpath(dest if dest.startswith("/") else posixpath.join(workdir, dest))
    pairs = []
    for source in copy.sources:
        if any(ch in source for ch in "*?[$") or "://" in source:
            continue
        joined = posixpath.normpath(posixpath.join(context_dir, source.lstrip("/")))
        if joined.startswith(".."):
            continue
        if joined == "." or any(n.startswith(joined + "/") for n in listing):
            pairs.append((dest, "" if joined == "." else joined))
    return pairs


def _copied_files(
    copy: CopyInstruction, workdir: str, context_dir: str, listing: list[str]
) -> set[str]:
    """Image paths a COPY/ADD of single files writes (directory sources are in `copied`;
    a source this check cannot read, such as a wildcard or an ADD URL, creates its whole
    destination)."""
    dest = copy.destination
    dest = posixpath.normpath(dest if dest.startswith("/") else posixpath.join(workdir, dest))
    if copy.instruction == "ADD":
        return {dest}  # ADD unpacks local archives: anything may appear under dest
    made: set[str] = set()
    for source in copy.sources:
        if any(ch in source for ch in "*?[$") or "://" in source or copy.from_stage is not None:
            made.add(dest)
            continue
        joined = posixpath.normpath(posixpath.join(context_dir, source.lstrip("/")))
        if joined == "." or any(n.startswith(joined + "/") for n in listing):
            continue  # a directory: mapped by `_copied_dirs`
        name = joined.rsplit("/", 1)[-1]
        many = copy.destination.endswith("/") or len(copy.sources) > 1
        made.add(posixpath.join(dest, name) if many else dest)
    if copy.heredoc:
        made.add(dest)
    return made


def _missing_in_context(path: str, copied: list[tuple[str, str]], listing: list[str]) -> str | None:
    """The context path `path` would come from when no COPY supplies it, else None."""
    candidates = []
    for image_dir, context in copied:
        if not path.startswith(image_dir.rstrip("/") + "/"):
            continue
        rel = path[len(image_dir.rstrip("/")) + 1 :]
        source = posixpath.normpath(posixpath.join(context, rel)) if context else rel
        if source in listing or any(n.startswith(source + "/") for n in listing):
            return None
        candidates.append(source)
    return candidates[0] if candidates else None


def _absolute(word: str, cwd: str | None) -> str | None:
    if any(ch in word for ch in "$`*?[{~"):
        return None
    if word.startswith("/"):
        return posixpath.normpath(word)
    if cwd is None:
        return None
    return posixpath.normpath(posixpath.join(cwd, word))


def _command_name(simple: SimpleCommand) -> str:
    words = strip_wrappers(simple.words)
    return words[0].rsplit("/", 1)[-1] if words else ""


def _inert_python(simple: SimpleCommand) -> bool:
    """`python3 -m pip ...` / `python3 -m venv DIR` create only packages or the venv."""
    words = strip_wrappers(simple.words)
    return (
        len(words) >= 3
        and re.match(r"^python[\d.]*$", words[0].rsplit("/", 1)[-1]) is not None
        and words[1] == "-m"
        and words[2] in ("pip", "venv")
    )


def _creates(simple: SimpleCommand) -> set[str]:
    made = {posixpath.normpath(t) for _, t in simple.redirects if t.startswith("/")}
    words = strip_wrappers(simple.words)
    if words and words[0].rsplit("/", 1)[-1] in ("mkdir", "touch", "cp", "mv", "install", "ln"):
        args = [_absolute(w, simple.cwd) for w in words[1:] if not w.startswith("-")]
        made |= {a for a in args if a is not None}
    return made


def _run_read_finding(
    ctx: TaskContext, line: int, path: str, source: str, simple: SimpleCommand
) -> Finding:
    docker = ctx.docker
    command = " ".join(strip_wrappers(simple.words))[:120]
    return make_finding(
        ctx,
        subcategory="ENV-PATH",
        severity="Critical",
        finding_type="Bug",
        title=f"{docker.file} reads `{path}`, which the build context does not provide",
        description=(
            f"`{command}` runs during the build and needs {path}. That directory of the image "
            f"is copied from the build context, which has no environment/{source}, and no "
            "earlier step creates it, so the command fails and the image cannot be built."
        ),
        recommendation=(
            f"Add environment/{source} to the task, or remove {path} from the RUN command."
        ),
        confidence=0.85,
        evidence=[evidence_line(ctx, docker.file, line)],
    )


def copied_directories(ctx: TaskContext) -> list[tuple[str, str]]:
    """(image directory, context directory) for every directory a single-stage Dockerfile
    copies from its build context ("" for the whole context), leaving out directories a
    later RUN step mentions (it may add files there)."""
    docker = ctx.docker
    if not docker.present or docker.error or docker.stage_count != 1:
        return []
    if not docker.file.startswith("environment/"):
        return []
    listing = environment_listing(ctx)
    context_dir = posixpath.dirname(docker.file)[len("environment") :].lstrip("/")
    pairs: list[tuple[str, str]] = []
    for step in docker.steps:
        if isinstance(step, CopyStep):
            pairs += _copied_dirs(step.copy, step.workdir, context_dir, listing)
            continue
        text = " ".join(statement.text for statement in step.statements)
        pairs = [
            (image_dir, source)
            for image_dir, source in pairs
            if image_dir not in text and image_dir.rstrip("/").rsplit("/", 1)[-1] not in text
        ]
    return pairs
