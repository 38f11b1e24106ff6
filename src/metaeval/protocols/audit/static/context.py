"""What every static check needs from a task, parsed once and shared.

`TaskContext` wraps a `LoadedTask` and lazily builds, at most once per task:

- the lines of every loaded file (`str.splitlines`, the same split `TaskFile.lines` uses,
  so a cited line number and snippet match what evidence verification reads);
- the Python syntax trees of the solution and test code, including Python written inline
  in shell scripts through a heredoc (`cat > /app/solve.py <<'EOF' ... EOF`,
  `python3 - <<EOF`), with line numbers mapped back to the shell file;
- the logical command lines of every shell script (continuations joined, comments cut,
  heredoc bodies set apart);
- what `environment/Dockerfile` provides: working directories, COPY/ADD destinations,
  created directories, home directories, base images, installed Python packages;
- the Python packages each phase can import: the environment image, `tests/` scripts
  (`pip install`, `uvx --with`) and `solution/` scripts, kept apart because packages the
  reference solution installs are not there for an agent.

Nothing here judges the task; the check modules do.
"""

from __future__ import annotations

import ast
import posixpath
import re
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from metaeval.protocols.audit.findings import (
    SUBCATEGORIES,
    Evidence,
    Finding,
    FindingType,
    Severity,
)
from metaeval.protocols.audit.static.distributions import installed_imports, installed_requires
from metaeval.protocols.audit.static.dockerfile import DockerInfo
from metaeval.protocols.audit.static.parse_cache import shared_dockerfile, shared_script
from metaeval.protocols.audit.static.shell import (
    ShellScript,
    parse_script,
    runtime_path,
)
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile
from metaeval.tasks.safe_files import read_regular
from metaeval.tasks.task_dirs import MAX_CONFIG_BYTES

STATIC_SOURCE = "static"

CODE_ROLES = ("solution", "tests")
SHELL_SUFFIXES = (".sh", ".bash")

# ---------------------------------------------------------------------------------------------
# Findings


def evidence_line(ctx: TaskContext, path: str, line: int) -> Evidence:
    """Evidence for one line of a loaded (or task.toml) file, quoting the line exactly."""
    lines = ctx.lines(path)
    snippet = lines[line - 1] if 0 < line <= len(lines) else ""
    return Evidence(file=path, line_start=line, line_end=line, snippet=snippet)


def make_finding(
    ctx: TaskContext,
    *,
    subcategory: str,
    severity: Severity,
    finding_type: FindingType,
    title: str,
    description: str,
    recommendation: str,
    confidence: float,
    evidence: list[Evidence],
    unseen: str | None = None,
) -> Finding:
    """A finding from the static protocol; the category follows from the subcategory.

    `unseen` says what the check could not see (an image it could not inspect, a path the
    image may hold): the finding is then `assumed` and its description ends with it; else it
    is `self-contained` (provable from the task's files)."""
    if unseen:
        description = f"{description.rstrip()} Not seen: {unseen.rstrip('.')}."
    return Finding(
        task_id=ctx.task.task_id,
        category=SUBCATEGORIES[subcategory],
        subcategory=subcategory,
        severity=severity,
        finding_type=finding_type,
        title=title,
        description=description,
        evidence=evidence,
        recommendation=recommendation,
        confidence=round(confidence, 2),
        source=STATIC_SOURCE,
        protocol="static",
        evidence_tier="assumed" if unseen else "self-contained",
    )


def dedupe_evidence(items: Iterable[Evidence], limit: int = 8) -> list[Evidence]:
    """Drop repeated (file, line) citations, keep the first `limit` in order."""
    seen: set[tuple[str, int | None]] = set()
    out: list[Evidence] = []
    for item in items:
        key = (item.file, item.line_start)
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) >= limit:
            break
    return out


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else (many or word + 's')}"


# ---------------------------------------------------------------------------------------------
# Shell scripts

_WRAPPERS = frozenset({"sudo", "env", "exec", "time", "RUN", "nohup", "command", "xargs"})


def strip_wrappers(words: list[str]) -> list[str]:
    """Drop leading `VAR=value`, `sudo`, `env`, `exec`, `time` ... from a command's words."""
    index = 0
    while index < len(words) and (
        re.match(r"^[A-Za-z_]\w*=", words[index]) or words[index] in _WRAPPERS
    ):
        index += 1
    return words[index:]


def shell_words(command: str) -> list[list[str]]:
    """The simple commands of a command line, each as its resolved words (tree-sitter)."""
    script = parse_script("-", command, script_path="/", cwd=None)
    out: list[list[str]] = []
    for statement in script.commands:
        for words in statement.words:
            words = strip_wrappers(words)
            if words:
                out.append(words)
    return out


# ---------------------------------------------------------------------------------------------
# Python


@dataclass
class PySource:
    """A parsed Python source: a .py file, or a Python heredoc inside a shell script.

    `nodes` (every AST node, breadth first) and `strings` are computed once and shared by
    all checks, so each source is walked a single time.
    """

    file: str
    role: str
    tree: ast.Module
    line_offset: int  # file line = AST line + line_offset
    text: str = ""
    writes: str = ""  # a heredoc written out to this path (`cat > /app/mod.py <<EOF`), not run

    def file_line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 1) + self.line_offset

    def file_end_line(self, node: ast.AST) -> int:
        return (getattr(node, "end_lineno", 0) or getattr(node, "lineno", 1)) + self.line_offset

    @cached_property
    def nodes(self) -> list[ast.AST]:
        return all_nodes(self.tree)

    @cached_property
    def calls(self) -> list[ast.Call]:
        return [n for n in self.nodes if type(n) is ast.Call]

    @cached_property
    def _string_table(self) -> list[tuple[ast.AST, str, bool]]:
        return list(_strings(self.nodes))

    def strings(self, fstring_parts: bool = False) -> list[tuple[ast.AST, str]]:
        """String literals in code; see `string_constants`."""
        return [(n, v) for n, v, part in self._string_table if fstring_parts or not part]


_SKIP_FIELDS = frozenset({"ctx", "type_ignores"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def all_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node below `tree` (breadth first), without expression contexts: a faster
    `list(ast.walk(tree))`."""
    out = [tree]
    index = 0
    node_type = ast.AST
    while index < len(out):
        node = out[index]
        index += 1
        kind = type(node)
        fields = _FIELDS.get(kind)
        if fields is None:
            fields = _FIELDS[kind] = tuple(f for f in kind._fields if f not in _SKIP_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, node_type):
                        out.append(item)
            elif isinstance(value, node_type):
                out.append(value)
    return out


def parse_python(lines: list[str]) -> ast.Module | None:
    """Parse the lines as joined with `\\n` so AST line numbers index `lines` exactly."""
    try:
        return ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def string_constants(tree: ast.AST, fstring_parts: bool = False) -> list[tuple[ast.AST, str]]:
    """String literals in code, docstrings skipped.

    An f-string gives its literal prefix (up to the first placeholder) followed by `\x00`,
    which marks "continues with a runtime value"; with `fstring_parts` it also gives each
    literal part on its own. Literal parts are never given as plain strings: `f"{d}/x"`
    does not contain the absolute path `/x`. (Checks use the cached `PySource.strings`.)
    """
    return [(n, v) for n, v, part in _strings(all_nodes(tree)) if fstring_parts or not part]


def _strings(nodes: list[ast.AST]) -> Iterator[tuple[ast.AST, str, bool]]:
    """(node, value, is_fstring_part) for the string literals among `nodes`."""
    skip: set[int] = set()
    for node in nodes:
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if (
                body
                and type(body[0]) is ast.Expr
                and type(body[0].value) is ast.Constant
                and isinstance(body[0].value.value, str)
            ):
                skip.add(id(body[0].value))
        elif type(node) is ast.JoinedStr:
            skip |= {id(v) for v in node.values}
    for node in nodes:
        if type(node) is ast.JoinedStr:
            values = node.values
            prefix = []
            for value in values:
                if type(value) is ast.Constant and isinstance(value.value, str):
                    prefix.append(value.value)
                else:
                    break
            if prefix and len(prefix) < len(values):
                yield node, "".join(prefix) + "\x00", False
            elif prefix:  # an f-string without placeholders is a plain string
                yield node, "".join(prefix), False
                continue
            for value in values:
                if type(value) is ast.Constant and isinstance(value.value, str):
                    yield value, value.value, True
        elif type(node) is ast.Constant and isinstance(node.value, str) and id(node) not in skip:
            yield node, node.value, False


def locate(lines: list[str], first: int, last: int, needle: str) -> int:
    """The first line in [first, last] (1-based) that contains `needle`, else `first`."""
    if needle:
        for number in range(max(first, 1), min(last, len(lines)) + 1):
            if needle in lines[number - 1]:
                return number
    return first


# ---------------------------------------------------------------------------------------------
# Python packages: distribution names -> importable top-level names

# Distributions whose import name differs from the distribution name.
DIST_TO_IMPORTS: dict[str, tuple[str, ...]] = {
    "scikit-learn": ("sklearn",),
    "sklearn": ("sklearn",),
    "scikit-image": ("skimage",),
    "pyyaml": ("yaml",),
    "ruamel-yaml": ("ruamel",),
    "pillow": ("PIL",),
    "pil": ("PIL",),
    "opencv-python": ("cv2",),
    "opencv-python-headless": ("cv2",),
    "opencv-contrib-python": ("cv2",),
    "opencv-contrib-python-headless": ("cv2",),
    "beautifulsoup4": ("bs4",),
    "python-dateutil": ("dateutil",),
    "attrs": ("attr", "attrs"),
    "protobuf": ("google",),
    "biopython": ("Bio", "BioSQL"),
    "python-dotenv": ("dotenv",),
    "pycryptodome": ("Crypto",),
    "pycryptodomex": ("Cryptodome",),
    "pyzmq": ("zmq",),
    "pyjwt": ("jwt",),
    "psycopg2-binary": ("psycopg2",),
    "psycopg-binary": ("psycopg",),
    "mysqlclient": ("MySQLdb",),
    "mysql-connector-python": ("mysql",),
    "pymupdf": ("fitz", "pymupdf"),
    "faiss-cpu": ("faiss",),
    "faiss-gpu": ("faiss",),
    "tensorflow-cpu": ("tensorflow",),
    "typing-extensions": ("typing_extensions",),
    "msgpack-python": ("msgpack",),
    "python-levenshtein": ("Levenshtein",),
    "levenshtein": ("Levenshtein",),
    "pyserial": ("serial",),
    "pyusb": ("usb",),
    "python-magic": ("magic",),
    "python-multipart": ("multipart", "python_multipart"),
    "python-docx": ("docx",),
    "python-pptx": ("pptx",),
    "openpyxl": ("openpyxl",),
    "google-generativeai": ("google",),
    "grpcio": ("grpc",),
    "grpcio-tools": ("grpc_tools",),
    "pywin32": ("win32api", "win32con"),
    "setuptools": ("setuptools", "pkg_resources", "_distutils_hack"),
    "markdown": ("markdown",),
    "dnspython": ("dns",),
    "pyopenssl": ("OpenSSL",),
    "py-cpuinfo": ("cpuinfo",),
    "scipy": ("scipy",),
    "torch": ("torch",),
    "pytorch": ("torch",),
    "jax": ("jax",),
    "jaxlib": ("jaxlib",),
    "tree-sitter": ("tree_sitter",),
    "duckdb": ("duckdb",),
    "rdkit": ("rdkit",),
    "rdkit-pypi": ("rdkit",),
    "pysam": ("pysam",),
    "gitpython": ("git",),
    "pygithub": ("github",),
    "websocket-client": ("websocket",),
    "discord-py": ("discord",),
    "ipython": ("IPython",),
    "jupyter": ("IPython", "ipykernel", "notebook", "nbformat", "nbconvert"),
    "llama-cpp-python": ("llama_cpp",),
    "sentence-transformers": ("sentence_transformers",),
    "umap-learn": ("umap",),
    "hdbscan": ("hdbscan",),
    "shapely": ("shapely",),
    "pyproj": ("pyproj",),
    "netcdf4": ("netCDF4",),
    "h5py": ("h5py",),
    "tables": ("tables",),
    "xlrd": ("xlrd",),
    "lxml": ("lxml",),
    "docker": ("docker",),
    "kubernetes": ("kubernetes",),
    "pytest-asyncio": ("pytest_asyncio",),
    "pytest-timeout": ("pytest_timeout",),
    "pytest-json-ctrf": ("pytest_json_ctrf",),
}

# Dependencies a distribution always brings along (so importing them is fine).
TRANSITIVE: dict[str, tuple[str, ...]] = {
    "pandas": ("numpy", "python-dateutil", "pytz", "tzdata", "six"),
    "scipy": ("numpy",),
    "scikit-learn": ("numpy", "scipy", "joblib", "threadpoolctl"),
    "scikit-image": ("numpy", "scipy", "networkx", "pillow", "imageio", "tifffile", "packaging"),
    "matplotlib": (
        "numpy",
        "pillow",
        "pyparsing",
        "cycler",
        "kiwisolver",
        "python-dateutil",
        "packaging",
        "fonttools",
        "contourpy",
    ),
    "seaborn": ("pandas", "matplotlib", "numpy"),
    "statsmodels": ("numpy", "scipy", "pandas", "patsy", "packaging"),
    "requests": ("urllib3", "idna", "certifi", "charset-normalizer"),
    "httpx": ("httpcore", "anyio", "idna", "certifi", "sniffio", "h11"),
    "torch": ("filelock", "jinja2", "networkx", "sympy", "typing-extensions", "fsspec"),
    "torchvision": ("torch", "numpy", "pillow"),
    "transformers": (
        "numpy",
        "tokenizers",
        "huggingface-hub",
        "safetensors",
        "regex",
        "requests",
        "pyyaml",
        "tqdm",
        "packaging",
        "filelock",
    ),
    "datasets": ("numpy", "pandas", "pyarrow", "requests", "tqdm", "huggingface-hub", "fsspec"),
    "pytest": ("pluggy", "iniconfig", "packaging", "_pytest", "py"),
    "flask": ("werkzeug", "jinja2", "itsdangerous", "click", "markupsafe", "blinker"),
    "fastapi": ("starlette", "pydantic", "typing-extensions", "anyio"),
    "pydantic": ("pydantic-core", "typing-extensions", "annotated-types"),
    "jinja2": ("markupsafe",),
    "xgboost": ("numpy", "scipy"),
    "lightgbm": ("numpy", "scipy"),
    "sympy": ("mpmath",),
    "uvicorn": ("click", "h11"),
    "nltk": ("click", "joblib", "regex", "tqdm"),
    "opencv-python": ("numpy",),
    "opencv-python-headless": ("numpy",),
    "biopython": ("numpy",),
    "plotly": ("packaging",),
    "networkx": (),
    "pyarrow": ("numpy",),
    "numba": ("numpy", "llvmlite"),
    "tensorflow": ("numpy", "protobuf", "keras", "h5py", "absl-py", "grpcio"),
    "keras": ("numpy", "h5py", "absl-py"),
    "jax": ("numpy", "jaxlib", "ml-dtypes", "opt-einsum", "scipy"),
    "anndata": ("numpy", "pandas", "h5py", "scipy"),
    "scanpy": ("anndata", "numpy", "pandas", "scipy", "matplotlib", "seaborn", "scikit-learn"),
    "boto3": ("botocore", "jmespath", "s3transfer"),
    "openai": ("httpx", "pydantic", "anyio", "distro", "tqdm"),
    "anthropic": ("httpx", "pydantic", "anyio", "distro"),
    "pytest-asyncio": ("pytest",),
    "pytest-cov": ("pytest", "coverage"),
    "pytest-json-ctrf": ("pytest",),
    "aiohttp": ("yarl", "multidict", "aiosignal", "frozenlist", "attrs"),
    "polars": (),
    "rich": ("pygments", "markdown-it-py"),
    "typer": ("click", "rich", "typing-extensions"),
    "uv": (),  # a binary wheel without Requires-Dist
}

# Images that are known to ship Python packages beyond the standard library.
IMAGE_PACKAGES: dict[str, tuple[str, ...]] = {
    "pytorch/pytorch": ("torch", "torchvision", "numpy", "pillow"),
    "tensorflow/tensorflow": ("tensorflow", "numpy"),
    "jupyter/scipy-notebook": ("numpy", "scipy", "pandas", "matplotlib", "scikit-learn", "seaborn"),
    "jupyter/datascience-notebook": ("numpy", "scipy", "pandas", "matplotlib", "scikit-learn"),
}

# Base images whose Python packages are just pip/setuptools (or none): a third-party import
# not installed on top of them is surely missing.
PLAIN_IMAGES = re.compile(
    r"^(?:docker\.io/)?(?:library/)?(?:python|ubuntu|debian|alpine|buildpack-deps|fedora|"
    r"centos|rockylinux|almalinux|amazonlinux|archlinux|node|golang|rust|openjdk|eclipse-temurin|"
    r"ghcr\.io/astral-sh/uv|astral/uv|gcc|busybox)(?:[:@]|$)"
)

ALWAYS_IMPORTABLE = frozenset({"pip", "setuptools", "pkg_resources", "_distutils_hack", "wheel"})


def normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# Distributions the table names as what others pull in: known to it as well.
_TABLE_LEAVES = frozenset(normalize_dist(d) for deps in TRANSITIVE.values() for d in deps)


def dist_is_resolved(dist: str) -> bool:
    """True when what `dist` provides and pulls in is known (installed metadata or the table)."""
    dist = normalize_dist(dist)
    return (
        installed_requires(dist) is not None
        or dist in TRANSITIVE
        or dist in DIST_TO_IMPORTS
        or dist in _TABLE_LEAVES
    )


def import_names(dist: str, depth: int = 0) -> set[str]:
    """Lower-cased import names a distribution (and what it always pulls in) provides:
    from installed metadata (`distributions.installed`), the table, and its spelling
    (`rcsb-api` -> `rcsbapi`, `mailman3` -> `mailman`)."""
    dist = normalize_dist(dist)
    names = {n.lower() for n in DIST_TO_IMPORTS.get(dist, ())} | set(installed_imports(dist))
    base = dist.replace("-", "_")
    names.add(base)
    names.add(base.replace("_", ""))
    if re.search(r"[a-z]\d+$", base):  # a major version in the name: mailman3, jinja2-like
        names.add(re.sub(r"\d+$", "", base))
    for prefix in ("python_", "py"):
        if base.startswith(prefix) and len(base) > len(prefix) + 1:
            names.add(base[len(prefix) :])
    for suffix in ("_python", "_py", "_binary", "_headless", "_cpu", "_gpu", "_lite"):
        if base.endswith(suffix):
            names.add(base[: -len(suffix)])
    if "-" in dist:
        names.add(dist.split("-", 1)[0])
    if depth < 3:
        required = installed_requires(dist)
        for dep in TRANSITIVE.get(dist, ()) if required is None else required:
            names |= import_names(dep, depth + 1)
    return names


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
        words = strip_wrappers(words)
        if not words:
            continue
        head = words[0].rsplit("/", 1)[-1]
        rest = words[1:]
        if head.startswith("python") and rest[:2] == ["-m", "pip"]:
            head, rest = "pip", rest[2:]
        if head == "uv" and rest[:1] == ["pip"]:
            head, rest = "pip", rest[1:]
        if re.fullmatch(r"pip[\d.]*", head) and rest[:1] == ["install"]:
            packages, reqs, local, offline = _pip_args(rest[1:])
            found.append(InstallCommand("pip", packages, reqs, local, offline))
        elif head in ("uv", "poetry", "pdm", "rye", "hatch") and rest[:1] == ["add"]:
            packages, reqs, local, offline = _pip_args(rest[1:])
            found.append(InstallCommand("uv", packages, reqs, local, offline))
        elif head in ("uvx", "uv", "pipx"):
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
                tool_words = rest if head == "uvx" else rest[2:]
                # The tool itself is the first word that is not an option or an option value.
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
                    name = requirement_name(word.split("@", 1)[0])
                    if name:
                        withs.append(name)
                    break
            if head == "pipx" and rest[:1] == ["install"]:
                withs += [n for w in rest[1:] if (n := requirement_name(w))]
            if withs or head == "uvx":
                found.append(InstallCommand("uv", withs, [], False, offline))
        elif head in ("conda", "mamba", "micromamba") and rest[:1] == ["install"]:
            packages = []
            skip = False
            for word in rest[1:]:
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
            found.append(InstallCommand("conda", packages, [], False, False))
        elif head in ("apt-get", "apt", "apk", "yum", "dnf") and (
            "install" in rest[:3] or "add" in rest[:1]
        ):
            packages = []
            for word in rest:
                match = re.match(r"^(?:python3?|py3)-([A-Za-z0-9._-]+?)(?:=.*)?$", word)
                if match:
                    packages.append(match.group(1))
                elif re.fullmatch(r"[a-z][a-z0-9-]*[a-z]\d", word.split("=", 1)[0]):
                    packages.append(word.split("=", 1)[0][:-1])  # Debian's mailman3: `mailman`
            found.append(InstallCommand("apt", packages, [], False, False))
    return found


# ---------------------------------------------------------------------------------------------
# Dockerfile

_ABS_TOKEN = re.compile(
    r"(?<![\w.:/$~}@%-])(?<![\w}]['\"])/[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+*-]*)*"
)


def absolute_tokens(text: str) -> list[str]:
    """Absolute path tokens in free text: not URLs, not `$VAR/...`, `${VAR}/...`,
    `"$VAR"/...` or `~/...`."""
    return [m.group(0) for m in _ABS_TOKEN.finditer(text)]


# ---------------------------------------------------------------------------------------------
# The context


def skipped_path(entry: str) -> str:
    """The path of a `skipped_files` entry ("path: reason" or "path (reason)")."""
    return entry.split(": ", 1)[0].split(" (", 1)[0].strip()


class TaskContext:
    """A loaded task plus the parsed forms the checks share (each built at most once)."""

    def __init__(self, task: LoadedTask) -> None:
        self.task = task
        self._lines: dict[str, list[str]] = {f.path: f.text.splitlines() for f in task.files}
        self.files: dict[str, TaskFile] = {f.path: f for f in task.files}
        self.unseen_requirements: list[str] = []  # -r files the Dockerfile installs, not loaded
        self.shared: dict[str, Any] = {}  # what one check computes once for the others

    # -- files ----------------------------------------------------------------------------------

    def lines(self, path: str) -> list[str]:
        if path == "task.toml" and path not in self._lines:
            return self.toml_lines
        return self._lines.get(path, [])

    def role_files(self, *roles: str) -> list[TaskFile]:
        return [f for f in self.task.files if f.role in roles]

    @cached_property
    def toml_lines(self) -> list[str]:
        """task.toml as loaded, or read from task.root when the loader did not deliver it."""
        loaded = self.files.get("task.toml")
        if loaded is not None:
            return self._lines["task.toml"]
        try:
            data = read_regular(
                self.task.root / "task.toml", self.task.root, max_bytes=MAX_CONFIG_BYTES
            )
        except OSError:  # missing, a link leaving the task, a FIFO, too large
            return []
        return data.decode("utf-8", errors="replace").splitlines()

    @cached_property
    def instruction(self) -> TaskFile | None:
        return self.files.get("instruction.md") or next(
            iter(self.task.by_role("instruction")), None
        )

    @cached_property
    def task_basenames(self) -> set[str]:
        names = {p.rsplit("/", 1)[-1] for p in self.files}
        for entry in self.task.skipped_files:
            names.add(skipped_path(entry).rsplit("/", 1)[-1])
        return names

    def is_shell(self, f: TaskFile) -> bool:
        if f.path.endswith(SHELL_SUFFIXES):
            return True
        first = f.text[:64]
        return (
            first.startswith("#!")
            and ("sh" in first.split("\n", 1)[0])
            and "python" not in first.split("\n", 1)[0]
        )

    def is_python(self, f: TaskFile) -> bool:
        if f.path.endswith(".py"):
            return True
        first = f.text[:64].split("\n", 1)[0]
        return first.startswith("#!") and "python" in first

    # -- shell ----------------------------------------------------------------------------------

    @cached_property
    def shell_scripts(self) -> dict[str, ShellScript]:
        """Parsed shell scripts of the solution and tests, by path."""
        return {
            f.path: shared_script(
                f.path, f.text, script_path=runtime_path(f.path), cwd=self.workdir
            )
            for f in self.role_files(*CODE_ROLES)
            if self.is_shell(f)
        }

    @cached_property
    def workdir(self) -> str:
        """Where the task's scripts start: `[environment] workdir`, the last WORKDIR, /app."""
        configured = self.environment_section.get("workdir")
        if isinstance(configured, str) and configured.startswith("/"):
            return configured
        return self.docker.workdir or "/app"

    # -- python ---------------------------------------------------------------------------------

    @cached_property
    def python_sources(self) -> list[PySource]:
        """Parsed Python of the solution and tests: .py files and Python heredocs."""
        sources: list[PySource] = []
        for f in self.role_files(*CODE_ROLES):
            if self.is_python(f):
                tree = parse_python(self._lines[f.path])
                if tree is not None:
                    sources.append(PySource(f.path, f.role, tree, 0, f.text))
        for path, script in self.shell_scripts.items():
            role = self.files[path].role
            for heredoc in script.heredocs:
                if heredoc.kind != "python":
                    continue
                tree = parse_python(heredoc.body)
                if tree is not None:
                    sources.append(
                        PySource(
                            path,
                            role,
                            tree,
                            heredoc.first_body_line - 1,
                            "\n".join(heredoc.body),
                            heredoc.target,
                        )
                    )
        return sources

    @cached_property
    def unparsable_python(self) -> list[str]:
        parsed = {s.file for s in self.python_sources}
        return [
            f.path
            for f in self.role_files(*CODE_ROLES)
            if self.is_python(f) and f.path not in parsed
        ]

    # -- environment ----------------------------------------------------------------------------

    @cached_property
    def docker(self) -> DockerInfo:
        for path in ("environment/Dockerfile", "Dockerfile"):
            if path in self.files:
                return shared_dockerfile(path, self.files[path].text)
        for f in self.role_files("environment"):
            name = f.path.rsplit("/", 1)[-1]
            if (
                name == "Dockerfile"
                or name.startswith("Dockerfile.")
                or name.endswith(".Dockerfile")
            ):
                return shared_dockerfile(f.path, f.text)
        return DockerInfo()

    @cached_property
    def environment_section(self) -> dict[str, Any]:
        section = self.task.config.get("environment")
        return section if isinstance(section, dict) else {}

    @cached_property
    def docker_image(self) -> str | None:
        image = self.environment_section.get("docker_image")
        return image if isinstance(image, str) and image.strip() else None

    @cached_property
    def requirement_files(self) -> list[TaskFile]:
        return [
            f
            for f in self.role_files("environment")
            if re.search(r"(?:^|/)requirements[^/]*\.(?:txt|in)$", f.path)
        ]

    @cached_property
    def has_environment(self) -> bool:
        """True when something defines the runtime: a Dockerfile, requirements, an image."""
        return bool(
            self.docker.present
            or self.requirement_files
            or self.docker_image
            or any(
                f.path.rsplit("/", 1)[-1]
                in ("pyproject.toml", "environment.yml", "environment.yaml")
                for f in self.role_files("environment")
            )
        )

    @cached_property
    def environment_packages(self) -> tuple[set[str], list[str]]:
        """Distribution names the environment installs, and apt python3-* import names."""
        dists: list[str] = []
        apt_imports: list[str] = []
        req_texts: dict[str, str] = {
            f.path.rsplit("/", 1)[-1]: f.text for f in self.role_files("environment")
        }
        for f in self.requirement_files:
            dists += _requirements_closure(f.text, req_texts)
        for _, install in self.docker.installs:
            if install.tool == "apt":
                apt_imports += install.packages
                continue
            dists += install.packages
            for ref in install.requirement_files:
                text = req_texts.get(ref.rsplit("/", 1)[-1])
                if text is not None:
                    dists += _requirements_closure(text, req_texts)
                else:
                    self.unseen_requirements.append(ref)
        for f in self.role_files("environment"):
            name = f.path.rsplit("/", 1)[-1]
            if name == "pyproject.toml":
                dists += _pyproject_dependencies(f.text)
            elif name in ("environment.yml", "environment.yaml"):
                dists += re.findall(r"^\s*-\s*([A-Za-z0-9][A-Za-z0-9._-]*)", f.text, re.M)
        for image in self.docker.base_images + ([self.docker_image] if self.docker_image else []):
            for key, packages in IMAGE_PACKAGES.items():
                if image.split(":", 1)[0].endswith(key):
                    dists += packages
        return set(dists), apt_imports

    @cached_property
    def unresolved_environment_dists(self) -> list[str]:
        """Distributions the environment installs whose dependencies are not known here."""
        dists, _ = self.environment_packages
        return sorted(d for d in dists if not dist_is_resolved(d))

    @cached_property
    def environment_imports(self) -> set[str]:
        dists, apt = self.environment_packages
        names: set[str] = {n.lower() for n in apt}
        names |= {"pil" for n in apt if n.lower() == "pil"}
        names |= {"cv2" for n in apt if n.lower() == "opencv"}
        for dist in dists:
            names |= import_names(dist)
        return names

    def script_installs(self, role: str) -> list[tuple[str, int, InstallCommand]]:
        """Package installs in the shell scripts of one role: (file, line, install)."""
        found = []
        for path, script in self.shell_scripts.items():
            if self.files[path].role != role:
                continue
            for command in script.commands:
                for simple in command.simple:
                    for install in find_installs_in([simple.words]):
                        install.requirement_files = [
                            self.resolve_runtime(ref, simple.cwd)
                            for ref in install.requirement_files
                        ]
                        found.append((path, command.line, install))
        return found

    def resolve_runtime(self, ref: str, cwd: str | None) -> str:
        """A path a script names, made absolute against the directory it runs in."""
        if ref.startswith("/") or cwd is None or "$" in ref:
            return ref
        return posixpath.normpath(posixpath.join(cwd, ref))

    def task_file_at(self, runtime: str) -> TaskFile | None:
        """The task file that is at an absolute runtime path (/tests/x, /solution/x), if any."""
        for prefix in ("/tests/", "/solution/"):
            if runtime.startswith(prefix):
                return self.files.get(runtime[1:])
        workdir = self.workdir.rstrip("/") + "/"
        if runtime.startswith(workdir):  # the image's working directory holds environment/
            return self.files.get("environment/" + runtime[len(workdir) :])
        return None

    def role_imports(self, role: str) -> set[str]:
        names: set[str] = set()
        req_texts = {f.path.rsplit("/", 1)[-1]: f.text for f in self.task.files}
        for _, _, install in self.script_installs(role):
            for dist in install.packages:
                names |= import_names(dist)
            for ref in install.requirement_files:
                found = self.task_file_at(ref)
                text = found.text if found is not None else None
                if text is not None:
                    for dist in _requirements_closure(text, req_texts):
                        names |= import_names(dist)
        return names

    @cached_property
    def environment_is_opaque(self) -> bool:
        """The image installs something whose package list this check cannot read (a local
        project, `uv sync`, a requirements file that was not loaded)."""
        _ = self.environment_packages
        return self.docker.opaque_install or bool(self.unseen_requirements)

    @cached_property
    def unknown_base_image(self) -> str | None:
        """The first base image (FROM, or `docker_image`) whose contents are not known here:
        anything but the plain official images (python, debian, ubuntu, ...)."""
        images = list(self.docker.base_images)
        if self.docker_image and not self.docker.present:
            images.append(self.docker_image)
        for image in images:
            if image and not PLAIN_IMAGES.match(image):
                return image
        return None

    @cached_property
    def base_image_is_plain(self) -> bool:
        if not self.docker.present:
            return self.docker_image is None
        return all(PLAIN_IMAGES.match(image) for image in self.docker.base_images if image)


def _requirements_closure(text: str, by_name: dict[str, str]) -> list[str]:
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


def _pyproject_dependencies(text: str) -> list[str]:
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


# ---------------------------------------------------------------------------------------------
# task.toml lines

_TOML_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(
    r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*="
)
_INLINE_KEY = re.compile(r"[{,]\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")


def _toml_key_parts(key: str) -> list[str]:
    parts = re.findall(r"\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+", key)
    return [p.strip("\"'") for p in parts]


def toml_key_lines(lines: list[str]) -> dict[str, int]:
    """Dotted key (and table) paths of a task.toml text -> 1-based line of first appearance.

    Arrays of tables get their index (`steps[0].agent`), as `toml_schema.unknown_keys` names
    them. Keys of one-line inline tables are included (`environment.tpu.type`).
    """
    found = KeyLines()
    table: list[str] = []
    array_counts: dict[str, int] = {}
    in_multiline = ""
    for number, line in enumerate(lines, 1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = ""
            continue
        header = _TOML_HEADER.match(line)
        if header:
            parts = _toml_key_parts(header.group(2))
            dotted = ".".join(parts)
            if header.group(1) == "[[":
                index = array_counts.get(dotted, 0)
                array_counts[dotted] = index + 1
                parts = parts[:-1] + [f"{parts[-1]}[{index}]"]
            table = _resolve_table(parts, array_counts)
            found.setdefault(".".join(table), number)
            continue
        key = _TOML_KEY.match(line)
        if not key:
            continue
        path = ".".join(table + _toml_key_parts(key.group(1)))
        found.setdefault(path, number)
        rest = line[key.end() :]
        for quote in ('"""', "'''"):
            if rest.count(quote) % 2 == 1:
                in_multiline = quote
        if "{" in rest:
            for inner in _INLINE_KEY.finditer(rest):
                found.setdefault(f"{path}.{inner.group(1).strip(chr(34))}", number)
    return found


def _resolve_table(parts: list[str], array_counts: dict[str, int]) -> list[str]:
    """Give a sub-table of an array of tables its parent's current index: [steps.agent]."""
    resolved: list[str] = []
    for index, part in enumerate(parts):
        resolved.append(part)
        prefix = ".".join(p.split("[", 1)[0] for p in resolved)
        if index < len(parts) - 1 and prefix in array_counts and "[" not in part:
            resolved[-1] = f"{part}[{array_counts[prefix] - 1}]"
    return resolved


class KeyLines(dict[str, int]):
    """`toml_key_lines` output that also indexes the keys without array indexes (built once),
    so looking up many keys stays linear in their number."""

    @cached_property
    def plain(self) -> dict[str, int]:
        index: dict[str, int] = {}
        for key, line in self.items():
            index.setdefault(_ARRAY_INDEX.sub("", key), line)
        return index


_ARRAY_INDEX = re.compile(r"\[\d+\]")


def toml_line_for(key_lines: dict[str, int], dotted: str) -> int | None:
    """The line of a dotted key, trying the exact path, then without array indexes."""
    if dotted in key_lines:
        return key_lines[dotted]
    plain = _ARRAY_INDEX.sub("", dotted)
    if isinstance(key_lines, KeyLines):
        return key_lines.plain.get(plain)
    for key, line in key_lines.items():
        if _ARRAY_INDEX.sub("", key) == plain:
            return line
    return None
