"""A workspace whose commands run in a Harbor task's container-like root, at /app.

An agent solving a Harbor task expects the task's container: its files at `/app` (the working
directory), an empty `/logs/agent`, no `/tests` and no `/solution`. `TaskRootWorkspace` gives
any metaeval agent exactly that, through the same bubblewrap root the execution checks use
(`harbor_root.build_harbor_root_argv`): the host directory `path` is bound writable at /app,
and what an agent CLI needs beyond the task (its install directory read-only, a private
writable home, its gateway socket) is bound at its own path, as the policy allows. Without a
usable bubblewrap nothing runs: the command comes back failed, saying why; it never runs
unsandboxed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from metaeval.sandbox.bwrap import sandbox_env
from metaeval.sandbox.process import DEFAULT_MAX_OUTPUT_BYTES, ExecResult, run_process
from metaeval.sandbox.python_env import sandbox_path
from metaeval.sandbox.workspace import Workspace, _shell_argv
from metaeval.tasks.harbor_root import APP_DIR, build_harbor_root_argv, harbor_sandbox_unavailable


class TaskRootWorkspace(Workspace):
    """`path` (host) is the task's /app; `logs` (host) is bound at /logs/verifier and should be
    a scratch directory the verifier never reads (the agent must not leave a reward)."""

    def __init__(self, path: Path, logs: Path) -> None:
        super().__init__(path)
        self.logs = Path(logs).resolve()

    def __repr__(self) -> str:
        return f"TaskRootWorkspace({str(self.path)!r})"

    def resolve(self, rel: str | os.PathLike[str]) -> Path:
        """As `Workspace.resolve`, and a path under /app (how the task names its files) is
        the same path in the workspace, so file tools and the shell agree."""
        text = os.fspath(rel)
        if text == APP_DIR or text.startswith(APP_DIR + "/"):
            rel = str(self.path) + text[len(APP_DIR) :]
        return super().resolve(rel)

    def write_file(self, path: str, data: bytes) -> str:
        """As `Workspace.write_file`; the path returned is the one the agent sees (/app/...)."""
        target = Path(super().write_file(path, data))
        return APP_DIR + "/" + target.relative_to(self.path).as_posix()

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout_s: float = 60,
        memory_mb: int | None = 2048,
        network: bool = False,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        extra_ro_binds: Sequence[Path] = (),
        extra_rw_binds: Sequence[Path] = (),
        memory_cgroup_mb: int | None = None,
    ) -> ExecResult:
        """Run `command` in the task root with /app as working directory (see `Workspace.exec`
        for the arguments). Host paths the workspace's transcript may name (`self.path`) are
        not visible inside: the agent sees /app."""
        reason = harbor_sandbox_unavailable()
        if reason is not None:
            return ExecResult(returncode=None, stderr=f"metaeval: {reason}\n", sandboxed=False)
        prefix = build_harbor_root_argv(
            app_dir=self.path,
            logs_dir=self.logs,
            network=network,
            extra_ro_binds=[(Path(p), str(Path(p).resolve())) for p in extra_ro_binds],
            extra_rw_binds=[(Path(p), str(Path(p).resolve())) for p in extra_rw_binds],
            status_fd=True,
        )
        explicit = {"PATH": sandbox_path(), "PWD": APP_DIR}
        explicit.update(env or {})
        return run_process(
            [*prefix, *_shell_argv(command)],
            cwd=self.path,
            env=sandbox_env(explicit, home="/tmp"),
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            stdin=stdin,
            max_output_bytes=max_output_bytes,
            sandboxed=True,
            memory_cgroup_mb=memory_cgroup_mb,
        )
