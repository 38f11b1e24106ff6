"""Check 5: the tests use the network while task.toml takes it away from the verifier.

The verifier's network is what Harbor gives the verify phase (Harbor's network policy):
`[verifier] network_mode`, else `[verifier.environment] network_mode` for a separate verifier
environment, else the `[environment]` baseline (`network_mode`, or the deprecated boolean
`allow_internet`); the default is public. `toml_schema.network_setting` decides on/off where
it is available (`metaeval.tasks.task_dirs.network_allowed`); this module adds the allowlist hosts,
the separate-verifier-environment case and the key to cite.

Network use in `tests/` files:

- shell: `curl`/`wget`/`git clone` of a remote URL, `pip install`/`uv add`/`uvx`/`uv run
  --with` (PyPI), `apt-get install`/`apt-get update`/`apk add` (distribution mirrors),
  `npm install`/`npx` (npm registry), `go get`/`go install`;
- Python: `requests.*`, `httpx.*`, `urllib.request.urlopen`/`urlretrieve` with a remote URL,
  `socket.create_connection`/`.connect` to a remote host, `subprocess`/`os.system` running
  one of the shell commands above.

Local targets are not network use: `localhost`, `127.*`, `0.0.0.0`, `::1`, and dotless host
names (Compose service names). Installs with `--no-index`/`--offline` are local. URLs built
from values the check cannot resolve are skipped, not guessed.

With network off, the failing install or download breaks the verifier for every agent:
ENV-RESOURCE ("the task requires network"), Bug, High.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.static.command_words import strip_wrappers
from metaeval.protocols.audit.static.finding_builder import (
    dedupe_evidence,
    evidence_line,
    make_finding,
)
from metaeval.protocols.audit.static.installs import find_installs_in
from metaeval.protocols.audit.static.python_source import PySource, locate
from metaeval.protocols.audit.static.shell import parse_script
from metaeval.protocols.audit.static.task_context import TaskContext
from metaeval.protocols.audit.static.toml_lines import toml_key_lines, toml_line_for
from metaeval.tasks.task_dirs import network_allowed  # wraps toml_schema.network_setting

_URL = re.compile(r"\b(?:https?|ftp|git|ssh|wss?)://([^/\s:'\"`<>)\]}]+)")
_SCP_GIT = re.compile(r"\bgit@([\w.-]+):")
_LOCAL_HOST = re.compile(
    r"^(?:localhost|127(?:\.\d+){3}|0\.0\.0\.0|\[?::1\]?|host\.docker\.internal)$"
)
PYPI_HOSTS = ("pypi.org", "files.pythonhosted.org", "pythonhosted.org")
APT_HOSTS = ("debian.org", "ubuntu.com", "alpinelinux.org", "fedoraproject.org", "centos.org")
NPM_HOSTS = ("registry.npmjs.org", "npmjs.org", "npmjs.com")
GO_HOSTS = ("proxy.golang.org", "golang.org", "github.com")


_NET_HINT = re.compile(
    r"\b(?:curl|wget|aria2c|https?|git|svn|hg|scp|rsync|apt-get|apt|apk|npm|pnpm|yarn|npx|go|uv)\b"
)


@dataclass
class NetworkUse:
    file: str
    line: int
    what: str  # human-readable, e.g. "pip install pytest" or "curl https://astral.sh"
    hosts: tuple[str, ...]  # hosts it needs (any one of them suffices)
    strong: bool  # a direct download (True) or a package install that may be satisfied


@dataclass
class VerifierNetwork:
    allowed: bool | None  # None: task.toml says nothing (public by default)
    mode: str | None
    hosts: list[str]
    key: str | None  # dotted key that decided it


def verifier_network(config: dict) -> VerifierNetwork:
    """What network the verify phase gets, per Harbor's network policy."""
    sections: list[tuple[str, dict]] = []
    verifier = config.get("verifier")
    if isinstance(verifier, dict):
        sections.append(("verifier", verifier))
        inner = verifier.get("environment")
        if isinstance(inner, dict):
            sections.append(("verifier.environment", inner))
    environment = config.get("environment")
    if isinstance(environment, dict):
        sections.append(("environment", environment))
    result = VerifierNetwork(None, None, [], None)
    for name, section in sections:
        mode = section.get("network_mode")
        if isinstance(mode, str) and mode.strip():
            mode = mode.strip().lower()
            hosts = section.get("allowed_hosts")
            result = VerifierNetwork(
                mode != "no-network" if mode in ("no-network", "public", "allowlist") else None,
                mode,
                [h for h in hosts if isinstance(h, str)] if isinstance(hosts, list) else [],
                f"{name}.network_mode",
            )
            break
        if name == "environment" and isinstance(section.get("allow_internet"), bool):
            allowed = section["allow_internet"]
            result = VerifierNetwork(
                allowed, "public" if allowed else "no-network", [], "environment.allow_internet"
            )
            break
    if result.key != "verifier.environment.network_mode":
        verdict = network_allowed(config, "verifier")
        if verdict is not None and verdict != result.allowed:
            result.allowed = verdict
    return result


def check_test_network(ctx: TaskContext) -> list[Finding]:
    policy = verifier_network(ctx.task.config)
    if policy.allowed is None or (policy.allowed and policy.mode != "allowlist"):
        return []
    uses = _network_uses(ctx)
    if policy.allowed:  # allowlist: only hosts outside it are a problem
        allowed = [h.lower().lstrip("*.") for h in policy.hosts]
        uses = [u for u in uses if not any(_host_allowed(h, allowed) for h in u.hosts)]
    if not uses:
        return []
    evidence: list[Evidence] = [evidence_line(ctx, u.file, u.line) for u in uses]
    evidence = dedupe_evidence(evidence, limit=7)
    toml_line = toml_line_for(toml_key_lines(ctx.toml_lines), policy.key) if policy.key else None
    if toml_line:
        evidence.append(evidence_line(ctx, "task.toml", toml_line))
    whats = list(dict.fromkeys(u.what for u in uses))
    listed = "; ".join(f"`{w}`" for w in whats[:5]) + (" ..." if len(whats) > 5 else "")
    if policy.allowed:
        title = "Tests reach hosts outside the verifier's network allowlist"
        setting = (
            f'`{policy.key} = "allowlist"` allows only {", ".join(policy.hosts) or "no hosts"}'
        )
    else:
        title = "Tests need the network at verification time, but task.toml disables it"
        setting = f"`{policy.key}` turns the network off for the verifier"
    return [
        make_finding(
            ctx,
            subcategory="ENV-RESOURCE",
            severity="High",
            finding_type="Bug",
            title=title,
            description=(
                f"{setting}, yet the verifier needs it: {listed}. Without network these "
                "commands fail, so test.sh errors out (or skips the checks) for every agent "
                "and the reward no longer reflects the agent's work."
            ),
            recommendation=(
                "Install test dependencies and fetch data at image build time (in "
                "environment/Dockerfile), or vendor them under tests/; or, if network is "
                "really needed, allow it for the verifier (`[verifier] network_mode = "
                '"public"` or an allowlist with the needed hosts).'
            ),
            confidence=0.75 if any(u.strong for u in uses) else 0.65,
            evidence=evidence,
        )
    ]


def _host_allowed(host: str, allowed: list[str]) -> bool:
    host = host.lower()
    return any(host == a or host.endswith("." + a) or a.endswith("." + host) for a in allowed)


def _remote(host: str) -> bool:
    host = host.lower().split("@")[-1]
    return "." in host and not _LOCAL_HOST.match(host) and not host.startswith("$")


def _network_uses(ctx: TaskContext) -> list[NetworkUse]:
    uses: list[NetworkUse] = []
    for path, script in ctx.shell_scripts.items():
        if ctx.files[path].role != "tests":
            continue
        lines = ctx.lines(path)
        for command in script.commands:
            for what, hosts, strong, needle in _shell_uses(command.resolved, command.words):
                line = locate(lines, command.line, command.end, needle)
                uses.append(NetworkUse(path, line, what, hosts, strong))
    for source in ctx.python_sources:
        if source.role != "tests":
            continue
        uses += _python_uses(ctx, source)
    uses.sort(key=lambda u: (u.file, u.line))
    return uses


def _shell_uses(
    command: str, commands: list[list[str]]
) -> list[tuple[str, tuple[str, ...], bool, str]]:
    """(description, hosts, strong, text to locate the line) for one statement: its resolved
    text and its simple commands' words."""
    found: list[tuple[str, tuple[str, ...], bool, str]] = []
    for install in find_installs_in(commands):
        if install.offline:
            continue
        if install.tool == "apt":
            found.append(("apt package install", APT_HOSTS, True, "install"))
        elif install.packages or install.requirement_files:
            names = " ".join(install.packages[:3]) or "-r " + install.requirement_files[0]
            needle = install.packages[0] if install.packages else install.requirement_files[0]
            found.append((f"{install.tool} install {names}", PYPI_HOSTS, False, needle))
    if not _NET_HINT.search(command):
        return found
    for words in commands:
        words = strip_wrappers(words)
        if not words:
            continue
        head = words[0].rsplit("/", 1)[-1]
        rest = words[1:]
        if head in ("curl", "wget", "aria2c", "http", "https", "git", "svn", "hg", "scp", "rsync"):
            if head == "git" and not set(rest[:1]) & {
                "clone",
                "fetch",
                "pull",
                "ls-remote",
                "submodule",
            }:
                continue
            for word in rest:
                hosts = [m.group(1) for m in _URL.finditer(word)] + _SCP_GIT.findall(word)
                remote = [h for h in hosts if _remote(h)]
                if remote:
                    found.append((f"{head} {word[:80]}", tuple(remote), True, word[:40]))
                    break
        elif head in ("apt-get", "apt", "apk") and rest[:1] == ["update"]:
            found.append((f"{head} update", APT_HOSTS, True, "update"))
        elif (
            head in ("npm", "pnpm", "yarn")
            and rest[:1]
            and rest[0] in ("install", "i", "ci", "add")
        ):
            found.append((f"{head} {rest[0]}", NPM_HOSTS, False, rest[0]))
        elif head == "npx":
            found.append(("npx", NPM_HOSTS, False, "npx"))
        elif head == "go" and rest[:1] and rest[0] in ("get", "install"):
            found.append((f"go {rest[0]}", GO_HOSTS, False, rest[0]))
        elif head == "uv" and rest[:1] == ["sync"] and "--offline" not in rest:
            found.append(("uv sync", PYPI_HOSTS, False, "sync"))
    return found


_HTTP_FUNCS = re.compile(
    r"^(?:requests|httpx|session|client|s|http|aiohttp)\.(?:get|post|put|patch|delete|head|options|request|stream)$"
    r"|(?:^|\.)(?:urlopen|urlretrieve|Request)$"
)
_SOCKET_FUNCS = re.compile(r"(?:^|\.)(?:create_connection|connect|connect_ex)$")
_SHELL_FUNCS = re.compile(
    r"^(?:subprocess\.(?:run|call|check_call|check_output|Popen|getoutput|getstatusoutput)|os\.system|os\.popen)$"
)


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    return ".".join(reversed(parts))


def _python_uses(ctx: TaskContext, source: PySource) -> list[NetworkUse]:
    constants = _string_names(source.nodes)
    uses: list[NetworkUse] = []
    lines = ctx.lines(source.file)
    for node in source.calls:
        name = _dotted(node.func)
        if not name:
            continue
        first = node.args[0] if node.args else None
        if name.endswith(".request") and len(node.args) > 1:
            first = node.args[1]
        for keyword in node.keywords:
            if keyword.arg == "url":
                first = keyword.value
        line = source.file_line(node)
        end = source.file_end_line(node)
        if _HTTP_FUNCS.search(name):
            url = _resolve(first, constants) if first is not None else None
            hosts = [m.group(1) for m in _URL.finditer(url or "")]
            remote = [h for h in hosts if _remote(h)]
            if remote:
                line = locate(lines, line, end, remote[0])
                uses.append(
                    NetworkUse(
                        source.file, line, f"{name}({(url or '')[:60]})", tuple(remote), True
                    )
                )
        elif _SOCKET_FUNCS.search(name) and isinstance(first, ast.Tuple) and first.elts:
            host = _resolve(first.elts[0], constants)
            if host and _remote(host):
                uses.append(
                    NetworkUse(source.file, line, f"{name}(({host!r}, ...))", (host,), True)
                )
        elif _SHELL_FUNCS.match(name) and first is not None:
            text = _command_text(first, constants)
            if text:
                for statement in parse_script(source.file, text).commands:
                    for what, named, strong, _ in _shell_uses(statement.resolved, statement.words):
                        uses.append(NetworkUse(source.file, line, what, named, strong))
    return uses


def _string_names(nodes: list[ast.AST]) -> dict[str, str]:
    """Names assigned a string literal (or a resolvable f-string) anywhere in the module."""
    names: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if value is None:
                continue
            resolved = _resolve(value, names)
            if resolved is None:
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    names.setdefault(target.id, resolved)
    return names


def _resolve(node: ast.AST | None, names: dict[str, str]) -> str | None:
    """The string value of a literal, a name bound to one, an f-string or a `+` of those.

    Unknown parts of an f-string become `{}` so the host part stays readable.
    """
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.JoinedStr):
        out = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                out.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                inner = _resolve(value.value, names)
                out.append(inner if inner is not None else "{}")
        text = "".join(out)
        return None if text.startswith("{}") else text
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _resolve(node.left, names)
        if left is None:
            return None
        right = _resolve(node.right, names)
        return left + (right if right is not None else "{}")
    return None


def _command_text(node: ast.AST, names: dict[str, str]) -> str | None:
    if isinstance(node, (ast.List, ast.Tuple)):
        parts = [_resolve(e, names) for e in node.elts]
        if not parts or parts[0] is None:
            return None
        return " ".join(p if p is not None else "{}" for p in parts)
    return _resolve(node, names)
