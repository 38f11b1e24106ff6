"""Model options on the command line, as Inspect AI spells them.

`-M key=value` (repeatable) passes a provider option to every model the command creates;
values are parsed as JSON where they parse (`-M max_connections=4` is a number,
`-M base_url=http://127.0.0.1:8000/v1` stays a string). `--model-base-url`,
`--model-timeout` and `--max-connections` are shorthands for `-M base_url=`, `-M timeout_s=`
and `-M max_connections=`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from metaeval.errors import ConfigError

Pull = Annotated[
    str,
    typer.Option(
        help="Pull task images before their build/run: never (default: offline, only "
        "images the engine holds), missing (pull those it lacks), always."
    ),
]
"""`--pull`, one meaning for `audit run` and `improve run` (`metaeval.tasks.image_pull`)."""

ModelArgs = Annotated[
    list[str] | None,
    typer.Option(
        "-M",
        "--model-arg",
        metavar="KEY=VALUE",
        help="Provider option for every model, e.g. -M base_url=http://127.0.0.1:8000/v1 "
        "(repeatable; values are read as JSON where they parse).",
    ),
]
ModelBaseUrl = Annotated[
    str | None,
    typer.Option(
        "--model-base-url",
        metavar="URL",
        help="Base URL of a compatible server (same as -M base_url=URL).",
    ),
]
ModelTimeout = Annotated[
    float | None,
    typer.Option(
        "--model-timeout",
        metavar="SECONDS",
        min=0.001,
        help="Seconds one model call may take before it is retried (network providers; "
        "default 120).",
    ),
]
MaxConnections = Annotated[
    int | None,
    typer.Option(
        "--max-connections",
        metavar="N",
        min=1,
        help="At most N concurrent calls per provider endpoint (default: as many as "
        "--concurrency; rate limits lower it adaptively).",
    ),
]

ALIASES = {"timeout": "timeout_s", "max_concurrency": "max_connections"}


def parse_model_args(pairs: list[str] | None) -> dict[str, Any]:
    """`["key=value", ...]` as options; values are JSON where they parse, else strings."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"expected KEY=VALUE, got {pair!r}", field="-M")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        options[ALIASES.get(key, key)] = value
    return options


def model_options(
    model_args: list[str] | None,
    base_url: str | None = None,
    timeout: float | None = None,
    max_connections: int | None = None,
) -> dict[str, Any]:
    """All model options of a command: -M pairs, then the shorthands (which win)."""
    options = parse_model_args(model_args)
    if base_url is not None:
        options["base_url"] = base_url
    if timeout is not None:
        options["timeout_s"] = timeout
    if max_connections is not None:
        options["max_connections"] = max_connections
    return options


def apply_model_options(
    model_args: list[str] | None,
    base_url: str | None = None,
    timeout: float | None = None,
    max_connections: int | None = None,
) -> dict[str, Any]:
    """Parse the command's model options and give them to every model this process creates."""
    from metaeval.models.registry import set_command_line_options

    options = model_options(model_args, base_url, timeout, max_connections)
    set_command_line_options(options)
    return options


AllowHostEnv = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host-env",
        metavar="NAME",
        help="Let the environment.env / verifier.env / solution.env tables of task.toml read "
        "the host variable NAME through ${NAME} in the task's trials (repeatable; none by "
        "default: a reference then takes its ${NAME:-default} or stays unset).",
    ),
]


def host_env_names(names: list[str]) -> tuple[str, ...]:
    """The --allow-host-env names, checked and without repeats (ConfigError on a bad one)."""
    from metaeval.tasks.limits import ENV_NAME

    for name in names:
        if ENV_NAME.fullmatch(name) is None:
            raise ConfigError(
                f"--allow-host-env {name!r} is not a variable name (letters, digits, _)",
                field="allow_host_env",
            )
    return tuple(dict.fromkeys(names))
