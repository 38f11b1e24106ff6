"""`metaeval view [RUN_DIR ...]`: serve the run viewer (it writes only review sheets)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer


def view(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Run directories, bundles, releases, or folders holding them (default: .)."
        ),
    ] = None,
    host: Annotated[
        str,
        typer.Option(help="Address to listen on; anything but loopback needs the printed token."),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port (0: any free port).")
    ] = 7575,
) -> None:
    """Look at runs in a browser: findings with their evidence, build-and-find grids and
    transcripts, improve lineages and trials, diffs of two runs. Writes nothing but an audit
    run's review sheet (the review controls of a finding)."""
    from metaeval.errors import ConfigError
    from metaeval.view.server import start

    chosen = list(paths or [Path(".")])
    for path in chosen:
        if not path.is_dir():
            raise ConfigError("not a directory", file=str(path))
    try:
        server, url, token = start(chosen, host, port)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", field="port"
        ) from exc
    runs = server.viewer.count()
    if token is None:
        print(
            f"metaeval view: {runs} run(s) at {url} (loopback only; writes only review sheets; Ctrl-C stops)",
            flush=True,
        )
    else:
        print(
            f"metaeval view: {runs} run(s) at {url}?token={token}\n"
            f"listening on {host}, not loopback: anyone who can reach it needs this token; "
            "traffic is plain HTTP (writes only review sheets; Ctrl-C stops)",
            flush=True,
        )
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
