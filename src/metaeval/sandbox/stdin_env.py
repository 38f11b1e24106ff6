"""Give a sandboxed shell script extra variables without showing them to the host.

A task phase's variables (task.toml's `[verifier.env]`, `[solution.env]`) may hold a
credential the user allowed. Put in the environment of the process metaeval starts on the
host (bwrap, `podman exec`) they would also steer that host process (`LD_PRELOAD`, an
engine's `CONTAINERS_CONF`); put on its command line they would be readable by every user
of the machine. So they travel on the command's stdin instead, NUL-separated `NAME=value`
pairs, and a short bash prelude inside the sandbox exports them and then runs the script
with stdin from /dev/null (as a phase without variables gets it). The prelude keeps its
state in positional parameters, so no variable of the task can change what it runs.
"""

from __future__ import annotations

from collections.abc import Mapping

# $1: the shell, $2: the script, then one parameter per pair read from stdin
PRELUDE = (
    'while IFS= read -r -d \'\'; do set -- "$@" "$REPLY"; done; unset REPLY; '
    'export -- "${@:3}" 2>/dev/null; exec "$1" -c "$2" </dev/null'
)


def shell_with_env(
    shell: str, script: str, env: Mapping[str, str] | None
) -> tuple[list[str], bytes | None]:
    """(argv, stdin) running `script` with `shell -c` and `env` exported first.

    Without variables this is plain `[shell, "-c", script]` and no stdin. The names must
    be valid shell names and the values free of NUL (`metaeval.tasks.limits` ensures it);
    the prelude needs bash.
    """
    if not env:
        return [shell, "-c", script], None
    for name, value in env.items():
        if "=" in name or "\0" in name or "\0" in value:
            raise ValueError(f"not a passable variable: {name!r}")
    payload = "".join(f"{name}={value}\0" for name, value in env.items())
    data = payload.encode("utf-8", "surrogateescape")  # a host value need not be UTF-8
    return [shell, "-c", PRELUDE, "metaeval-env", shell, script], data
