"""The environment of a converted Terminal-Bench 1 task: its Dockerfile's build context
(with the task files the Dockerfile copies that Harbor keeps outside it, such as
run-tests.sh and tests/) and its docker-compose.yaml, kept only when it is more than the
standard client-service template (see `terminal_bench`)."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from metaeval.config_files import parse_yaml
from metaeval.errors import ConfigError
from metaeval.tasks.safe_files import classify, read_regular

MAX_SOURCE_BYTES = 16 * 1024 * 1024
HANDLED_ROOT = frozenset(
    {
        "task.yaml",
        "solution.sh",
        "solution.yaml",
        "run-tests.sh",
        "tests",
        "Dockerfile",
        "docker-compose.yaml",
        "docker-compose.yml",
    }
)


def read_source(path: Path) -> str:
    """The text of a source-task file, read only when it is a regular file inside its task
    directory (a link leading elsewhere, a FIFO or a device is refused unread)."""
    try:
        return read_source_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read: {exc}", file=str(path)) from exc


def read_source_bytes(path: Path) -> bytes:
    kind, detail = classify(path, path.parent)
    if kind == "outside_link":
        raise ConfigError(f"symlink leading outside the task ({detail}), not read", file=str(path))
    if kind not in ("file", "link"):
        raise ConfigError("not a regular file, not read", file=str(path))
    try:
        return read_regular(path, path.parent, max_bytes=MAX_SOURCE_BYTES)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc}", file=str(path)) from exc


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def special_files(directory: str, names: list[str]) -> set[str]:
    """copytree ignore: FIFOs, sockets and devices (links are copied as links, unread)."""
    return {n for n in names if classify(os.path.join(directory, n), directory)[0] == "special"}


# Root entries of a Terminal-Bench 1 task that the Harbor layout keeps outside environment/
# (tests/ and solution/ are uploaded at run time; task.yaml becomes task.toml and
# instruction.md). The original build context is the whole task directory, so a Dockerfile
# may copy them into the image; docker-compose files are left out on purpose (one in
# environment/ is a compose file to Harbor).
TB1_LEFTOVERS = ("run-tests.sh", "solution.sh", "solution.yaml", "task.yaml", "tests")
_WHOLE_CONTEXT = frozenset({"", ".", "*"})


def copied_leftovers(text: str) -> tuple[list[str], str | None]:
    """The TB1_LEFTOVERS names that the Dockerfile `text` copies from its build context.

    A COPY/ADD source is a path inside the context (a leading `/` or `./` changes nothing);
    `.` copies the whole context, a wildcard in the first component may match any entry.
    The Dockerfile is read with Docker's own parser (the `dockerfile` package); copies from
    another stage or image (`--from`) and heredocs read no context. Returns the names in
    TB1_LEFTOVERS order and, when the parser rejects the file, its error instead.
    """
    import dockerfile

    try:
        commands = dockerfile.parse_string(text)
    except dockerfile.GoParseError as exc:
        return [], str(exc)
    wanted: set[str] = set()
    for command in commands:
        if command.cmd.upper() not in ("COPY", "ADD") or command.heredocs:
            continue
        if any(flag.startswith("--from") for flag in command.flags):
            continue
        for source in command.value[:-1]:
            head = _context_head(source)
            if head is None:
                continue
            wanted.update(n for n in TB1_LEFTOVERS if head in _WHOLE_CONTEXT or fnmatch(n, head))
    return [n for n in TB1_LEFTOVERS if n in wanted], None


def _context_head(source: str) -> str | None:
    """The first component of a context path (`""` for the context itself), or None for a
    URL, which ADD fetches instead of reading the context."""
    if "://" in source:
        return None
    parts = [p for p in source.split("/") if p not in ("", ".")]
    return parts[0] if parts else ""


def _copy_entry(entry: Path, target: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.copytree(entry, target, symlinks=True, ignore=special_files)
    else:
        shutil.copy2(entry, target, follow_symlinks=False)


def _copy_leftovers(src: Path, env: Path, text: str, notes: list[str]) -> None:
    """Put into environment/ the task files the Dockerfile copies that the Harbor layout
    keeps elsewhere, so the image is built from what the original's context held."""
    names, error = copied_leftovers(text)
    if error is not None:
        notes.append(f"Dockerfile: not parsed ({error}); its COPY sources were not checked")
        return
    present = [n for n in names if (src / n).exists() or (src / n).is_symlink()]
    copied: list[str] = []
    for name in present:
        entry = src / name
        if classify(entry, src)[0] == "special":
            continue  # reported by the copy of the build context
        _copy_entry(entry, env / name)
        copied.append(name)
    if copied:
        notes.append(
            "Dockerfile copies " + ", ".join(copied) + " from its build context, as in the "
            "Terminal-Bench 1 original (whose context is the whole task): copied to "
            "environment/ too, so the image holds them as before (the agent can read them)"
        )


def write_environment(src: Path, dst: Path, notes: list[str]) -> None:
    env = dst / "environment"
    env.mkdir()
    dockerfile = src / "Dockerfile"
    if dockerfile.is_file():
        data = read_source_bytes(dockerfile)
        (env / "Dockerfile").write_bytes(data)
        text = data.decode("utf-8", errors="replace")
        if "ghcr.io/laude-institute/t-bench" in text:
            notes.append(
                "Dockerfile: uses a Terminal-Bench 1 base image (ghcr.io/laude-institute/"
                "t-bench/...); check that it is still available"
            )
        _copy_leftovers(src, env, text, notes)
    else:
        notes.append("no Dockerfile: environment/ has no image definition")
    for name in ("docker-compose.yaml", "docker-compose.yml"):
        if (src / name).is_file():
            data = read_source_bytes(src / name)
            standard = standard_client_service(data.decode("utf-8", errors="replace"))
            if standard is None:
                (env / "docker-compose.yaml").write_bytes(data)
                notes.append(
                    f"{name}: copied as is; its T_BENCH_* variables are not Harbor's and its "
                    "services need review"
                )
                break
            notes.append(
                f"{name}: the standard Terminal-Bench client service (built from the "
                "Dockerfile, log mounts, TEST_DIR); Harbor provides the same, so it was not "
                "copied"
            )
            _append_environment_table(dst / "task.toml", standard, name, notes)
            break
    extra: list[str] = []
    for entry in sorted(src.iterdir(), key=lambda p: p.name):
        hidden = entry.name.startswith(".") and entry.name != ".dockerignore"
        if entry.name in HANDLED_ROOT or hidden:
            continue
        target = env / entry.name
        if classify(entry, src)[0] == "special":
            notes.append(f"{entry.name}: not a regular file (FIFO, socket or device), not copied")
            continue
        _copy_entry(entry, target)
        extra.append(entry.name)
    if extra:
        notes.append("copied to environment/ as build context: " + ", ".join(extra))


# --------------------------------------------------------------------------- docker-compose

_CLIENT_KEYS = frozenset(
    {"build", "image", "container_name", "command", "environment", "volumes", "network_mode"}
)
_TB_VARIABLE = re.compile(r"^\$\{T_BENCH_[A-Z_]+\}$")
_TB_MOUNT = re.compile(r"^\$\{T_BENCH_[A-Z_]+\}:\$\{T_BENCH_[A-Z_]+\}(?::[a-z,]+)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ClientService:
    """What a standard Terminal-Bench client service sets beyond Harbor's defaults."""

    env: dict[str, str]
    no_network: bool


def standard_client_service(text: str) -> ClientService | None:
    """The settings of a docker-compose file that is only Terminal-Bench 1's client-service
    template (one service built from the task's Dockerfile, T_BENCH_* names and log mounts,
    `TEST_DIR`, literal variables, optionally `network_mode: none`), else None: anything
    else (more services, ports, other builds or mounts, host variables) needs a person."""
    try:
        data = parse_yaml(text, "docker-compose.yaml")
    except ConfigError:  # not YAML, or a key given twice: not the template (Docker refuses it)
        return None
    if not isinstance(data, dict) or set(data) != {"services"}:
        return None
    services = data["services"]
    if not isinstance(services, dict) or len(services) != 1:
        return None
    [service] = services.values()
    if not isinstance(service, dict) or not set(service) <= _CLIENT_KEYS:
        return None
    if not _own_dockerfile(service.get("build")):
        return None
    for key in ("image", "container_name"):
        value = service.get(key)
        if value is not None and not (isinstance(value, str) and _TB_VARIABLE.match(value)):
            return None
    volumes = service.get("volumes") or []
    if not isinstance(volumes, list) or not all(
        isinstance(v, str) and _TB_MOUNT.match(v) for v in volumes
    ):
        return None
    network = service.get("network_mode")
    if network not in (None, "none"):
        return None
    env = _literal_environment(service.get("environment"))
    if env is None:
        return None
    return ClientService(env=env, no_network=network == "none")


def _own_dockerfile(build: Any) -> bool:
    if build in (".", "./"):
        return True
    if not isinstance(build, dict) or not set(build) <= {"context", "dockerfile"}:
        return False
    return build.get("context", ".") in (".", "./") and build.get("dockerfile", "Dockerfile") in (
        "Dockerfile",
        "./Dockerfile",
    )


def _literal_environment(raw: Any) -> dict[str, str] | None:
    """`environment:` as literal name -> value (TEST_DIR left out: tests/test.sh sets it),
    or None when an entry reads the host or is not a plain variable."""
    if raw is None:
        return {}
    if isinstance(raw, list):
        pairs = []
        for entry in raw:
            if not isinstance(entry, str) or "=" not in entry:
                return None  # `- NAME` passes the host's value through
            pairs.append(tuple(entry.split("=", 1)))
    elif isinstance(raw, dict):
        pairs = list(raw.items())
    else:
        return None
    env: dict[str, str] = {}
    for name, value in pairs:
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            return None
        if name == "TEST_DIR" and value == "${T_BENCH_TEST_DIR}":
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return None
        value = str(value)
        if "$" in value:
            return None
        env[name] = value
    return env


def _append_environment_table(
    task_toml: Path, service: ClientService, name: str, notes: list[str]
) -> None:
    """Carry the client service's variables and `network_mode: none` into task.toml."""
    lines: list[str] = []
    if service.no_network:
        lines += ["", "[environment]", "allow_internet = false"]
        notes.append(f"{name}: network_mode none became [environment] allow_internet = false")
    if service.env:
        lines += ["", "[environment.env]"]
        lines += [f"{key} = {toml_value(value)}" for key, value in service.env.items()]
        notes.append(f"{name}: its variables ({', '.join(service.env)}) became [environment.env]")
    if lines:
        with task_toml.open("a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
