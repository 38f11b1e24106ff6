"""Package installs in commands and files: pip/uv/conda/apt command lines, requirements files,
pyproject dependencies. Names only; what a name provides is `packages`' business."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

from metaeval.protocols.audit.static.command_words import shell_words, strip_wrappers

_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_VCS = re.compile(
    r"^(?:git|hg|svn|bzr)\+\S+?/([A-Za-z0-9][A-Za-z0-9._-]*?)(?:\.git)?(?:@[^/#]*)?/?$"
)
_EGG = re.compile(r"#egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_WHEEL = re.compile(r"(?:^|/)([A-Za-z0-9][A-Za-z0-9_.]*?)-\d[^/]*\.(?:whl|tar\.gz|zip)$")


def requirement_name(spec: str) -> str | None:
    """The distribution name of a requirement specifier, or None for paths and options."""
    spec = spec.strip()
    if not spec or spec.startswith(("-", "#")):
        return None
    egg = _EGG.search(spec)
    if egg:
        return egg.group(1)
    wheel = _WHEEL.search(spec)
    if wheel:
        return wheel.group(1)
    if " @ " in spec:  # `name @ git+https://...`: the name is given
        spec = spec.split(" @ ", 1)[0]
    elif _VCS.match(spec):  # `git+https://host/owner/MobileSAM.git@v1`: the repository's name
        return _VCS.match(spec).group(1)  # type: ignore[union-attr]
    if "://" in spec or spec.startswith((".", "/", "~", "$")) or spec.endswith((".whl", ".zip")):
        return None
    match = _REQ_NAME.match(spec)
    return match.group(1) if match else None


def requirements_file_names(text: str) -> tuple[list[str], list[str]]:
    """Distribution names in a requirements file, and the files it includes with -r."""
    names: list[str] = []
    includes: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r", "--requirement", "-c", "--constraint")):
            parts = line.split(None, 1) if " " in line else [line[:2], line[2:]]
            if len(parts) == 2 and line.startswith(("-r", "--requirement")):
                includes.append(parts[1].strip())
            continue
        if line.startswith(("-e", "--editable")):
            egg = _EGG.search(line)
            if egg:
                names.append(egg.group(1))
            continue
        if line.startswith("-"):
            continue
        name = requirement_name(line.split(";", 1)[0])
        if name:
            names.append(name)
    return names, includes


_PIP_VALUE_OPTIONS = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-t",
        "--target",
        "--prefix",
        "--root",
        "--python",
        "-p",
        "--trusted-host",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--src",
        "--upgrade-strategy",
        "--progress-bar",
        "--cache-dir",
        "--log",
        "--timeout",
        "--retries",
        "--proxy",
        "--cert",
        "--client-cert",
        "--exists-action",
        "--report",
        "-C",
        "--config-settings",
        "--global-option",
        "--no-binary",
        "--only-binary",
        "--index-strategy",
        "--group",
        "--extra",
    }
)


@dataclass
class InstallCommand:
    """A package install found in a command line."""

    tool: str  # "pip", "uv", "conda", "apt"
    packages: list[str]  # distribution names (apt: python3-* mapped to import names)
    requirement_files: list[str]
    local: bool  # installs a local path (`pip install .`, `-e /app`)
    offline: bool  # --no-index / --offline


def _pip_args(words: list[str]) -> tuple[list[str], list[str], bool, bool]:
    packages: list[str] = []
    req_files: list[str] = []
    local = False
    offline = False
    index = 0
    while index < len(words):
        word = words[index]
        if word in ("--no-index", "--offline"):
            offline = True
        if word in ("-r", "--requirement"):
            if index + 1 < len(words):
                req_files.append(words[index + 1])
            index += 2
            continue
        if word.startswith("--requirement=") or (word.startswith("-r") and len(word) > 2):
            req_files.append(word.split("=", 1)[-1] if "=" in word else word[2:])
        elif word in ("-e", "--editable"):
            if index + 1 < len(words):
                name = requirement_name(words[index + 1])
                if name and "#egg=" in words[index + 1]:
                    packages.append(name)
                else:
                    local = True
            index += 2
            continue
        elif word in _PIP_VALUE_OPTIONS:
            index += 2
            continue
        elif word.startswith("-"):
            pass
        else:
            name = requirement_name(word)
            if name:
                packages.append(name)
            elif word.startswith((".", "/", "~")) or word.endswith((".whl", ".zip")):
                local = True
        index += 1
    return packages, req_files, local, offline


_INSTALL_HINT = re.compile(r"install|\badd\b|--with|\s-w\s|\buvx\b")


def find_installs(command: str) -> list[InstallCommand]:
    """Python package installs in one shell command line (free text)."""
    if not _INSTALL_HINT.search(command):
        return []
    return find_installs_in(shell_words(command))


def find_installs_in(commands: list[list[str]]) -> list[InstallCommand]:
    """Python package installs among simple commands given as resolved words."""
    found: list[InstallCommand] = []
    for words in commands:
        install = _install_of(strip_wrappers(words))
        if install is not None:
            found.append(install)
    return found


def _install_of(words: list[str]) -> InstallCommand | None:
    """The install one simple command makes, if it is one (pip, uv, conda, apt, ...)."""
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    if head.startswith("python") and rest[:2] == ["-m", "pip"]:
        head, rest = "pip", rest[2:]
    if head == "uv" and rest[:1] == ["pip"]:
        head, rest = "pip", rest[1:]
    if re.fullmatch(r"pip[\d.]*", head) and rest[:1] == ["install"]:
        packages, reqs, local, offline = _pip_args(rest[1:])
        return InstallCommand("pip", packages, reqs, local, offline)
    if head in ("uv", "poetry", "pdm", "rye", "hatch") and rest[:1] == ["add"]:
        packages, reqs, local, offline = _pip_args(rest[1:])
        return InstallCommand("uv", packages, reqs, local, offline)
    if head in ("uvx", "uv", "pipx"):
        return _tool_install(head, rest)
    if head in ("conda", "mamba", "micromamba") and rest[:1] == ["install"]:
        return InstallCommand("conda", _conda_packages(rest[1:]), [], False, False)
    if head in ("apt-get", "apt", "apk", "yum", "dnf") and (
        "install" in rest[:3] or "add" in rest[:1]
    ):
        return InstallCommand("apt", _system_python_packages(rest), [], False, False)
    return None


def _tool_install(head: str, rest: list[str]) -> InstallCommand | None:
    """What `uvx TOOL`, `uv tool run`, `uv run --with X` or `pipx install X` brings in."""
    withs: list[str] = []
    offline = "--offline" in rest
    for index, word in enumerate(rest):
        if word in ("--with", "-w", "--with-requirements") and index + 1 < len(rest):
            value = rest[index + 1]
            if word == "--with-requirements":
                continue
            withs += [n for part in value.split(",") if (n := requirement_name(part))]
        elif word.startswith("--with="):
            withs += [n for part in word[7:].split(",") if (n := requirement_name(part))]
    if head == "uvx" or rest[:2] == ["tool", "run"]:
        tool = _tool_name(rest if head == "uvx" else rest[2:])
        if tool:
            withs.append(tool)
    if head == "pipx" and rest[:1] == ["install"]:
        withs += [n for w in rest[1:] if (n := requirement_name(w))]
    if withs or head == "uvx":
        return InstallCommand("uv", withs, [], False, offline)
    return None


def _tool_name(tool_words: list[str]) -> str | None:
    """The tool itself: the first word that is not an option or an option value."""
    skip = False
    for word in tool_words:
        if skip:
            skip = False
            continue
        if word in ("--with", "-w", "--python", "-p", "--from", "--index-url"):
            skip = True
            continue
        if word.startswith("-"):
            continue
        return requirement_name(word.split("@", 1)[0])
    return None


def _conda_packages(words: list[str]) -> list[str]:
    """Package names of a `conda install` (channel, env name and prefix options skipped)."""
    packages = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in ("-c", "--channel", "-n", "--name", "-p", "--prefix"):
            skip = True
            continue
        if not word.startswith("-"):
            name = requirement_name(word.split("=", 1)[0])
            if name:
                packages.append(name)
    return packages


def _system_python_packages(words: list[str]) -> list[str]:
    """Python packages a system package manager installs (`python3-numpy` is numpy)."""
    packages = []
    for word in words:
        match = re.match(r"^(?:python3?|py3)-([A-Za-z0-9._-]+?)(?:=.*)?$", word)
        if match:
            packages.append(match.group(1))
        elif re.fullmatch(r"[a-z][a-z0-9-]*[a-z]\d", word.split("=", 1)[0]):
            packages.append(word.split("=", 1)[0][:-1])  # Debian's mailman3: `mailman`
    return packages


def requirements_closure(text: str, by_name: dict[str, str]) -> list[str]:
    """Distribution names of a requirements file and the files it includes (`-r`), by name."""
    names: list[str] = []
    queue, seen = [text], set()
    while queue:
        current = queue.pop()
        found, includes = requirements_file_names(current)
        names += found
        for include in includes:
            base = include.rsplit("/", 1)[-1]
            if base not in seen and base in by_name:
                seen.add(base)
                queue.append(by_name[base])
    return names


def pyproject_dependencies(text: str) -> list[str]:
    """Distribution names a pyproject.toml depends on (optional groups included)."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return []
    project = data.get("project")
    if not isinstance(project, dict):
        project = {}
    deps = list(project.get("dependencies") or [])
    for group in (project.get("optional-dependencies") or {}).values():
        deps += list(group or [])
    return [n for d in deps if isinstance(d, str) and (n := requirement_name(d))]
