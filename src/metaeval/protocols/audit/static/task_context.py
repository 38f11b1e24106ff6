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

import posixpath
import re
from functools import cached_property
from typing import Any

from metaeval.protocols.audit.static.dockerfile import DockerInfo
from metaeval.protocols.audit.static.installs import (
    InstallCommand,
    find_installs_in,
    pyproject_dependencies,
    requirements_closure,
)
from metaeval.protocols.audit.static.packages import (
    IMAGE_PACKAGES,
    PLAIN_IMAGES,
    dist_is_resolved,
    import_names,
)
from metaeval.protocols.audit.static.parse_cache import shared_dockerfile, shared_script
from metaeval.protocols.audit.static.python_source import PySource, parse_python
from metaeval.protocols.audit.static.shell_script import ShellScript, runtime_path
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile
from metaeval.tasks.safe_files import read_regular
from metaeval.tasks.task_dirs import MAX_CONFIG_BYTES

CODE_ROLES = ("solution", "tests")
SHELL_SUFFIXES = (".sh", ".bash")


_ABS_TOKEN = re.compile(
    r"(?<![\w.:/$~}@%-])(?<![\w}]['\"])/[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+*-]*)*"
)


def absolute_tokens(text: str) -> list[str]:
    """Absolute path tokens in free text: not URLs, not `$VAR/...`, `${VAR}/...`,
    `"$VAR"/...` or `~/...`."""
    return [m.group(0) for m in _ABS_TOKEN.finditer(text)]


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
            dists += requirements_closure(f.text, req_texts)
        for _, install in self.docker.installs:
            if install.tool == "apt":
                apt_imports += install.packages
                continue
            dists += install.packages
            for ref in install.requirement_files:
                text = req_texts.get(ref.rsplit("/", 1)[-1])
                if text is not None:
                    dists += requirements_closure(text, req_texts)
                else:
                    self.unseen_requirements.append(ref)
        for f in self.role_files("environment"):
            name = f.path.rsplit("/", 1)[-1]
            if name == "pyproject.toml":
                dists += pyproject_dependencies(f.text)
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
                    for dist in requirements_closure(text, req_texts):
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
