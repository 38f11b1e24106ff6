"""Sandbox layer: workspaces and sandboxed command execution (bubblewrap when available)."""

from metaeval.sandbox.bwrap import (
    build_bwrap_argv,
    bwrap_available,
    fallback_forced,
    sandbox_env,
    use_bwrap,
)
from metaeval.sandbox.process import DEFAULT_MAX_OUTPUT_BYTES, ExecResult, run_process
from metaeval.sandbox.process_group import kill_process_group
from metaeval.sandbox.workspace import (
    STRIPPED_DIR_NAMES,
    PathEscapeError,
    ReadOnlyWorkspaceError,
    Workspace,
    WorkspaceError,
    exec_in,
)

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "STRIPPED_DIR_NAMES",
    "ExecResult",
    "PathEscapeError",
    "ReadOnlyWorkspaceError",
    "Workspace",
    "WorkspaceError",
    "build_bwrap_argv",
    "bwrap_available",
    "exec_in",
    "fallback_forced",
    "kill_process_group",
    "run_process",
    "sandbox_env",
    "use_bwrap",
]
