"""The `metaeval` command line."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from rich.markup import escape
from rich.table import Table

from metaeval import __version__
from metaeval.cli_help import TidyGroup
from metaeval.cli_options import MaxConnections, ModelArgs, ModelBaseUrl, ModelTimeout
from metaeval.console import escape_log_output, make_console
from metaeval.errors import MetaevalError, operator_fault
from metaeval.schemas import schema_cmd
from metaeval.view.cli import view as view_cmd

app = typer.Typer(
    help="metaeval: meta-level evaluations of AI coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=TidyGroup,
)
out = make_console()
err = make_console(stderr=True)


def _register_protocols() -> None:
    from metaeval.protocols.audit.cli import audit_app
    from metaeval.protocols.buildfind.cli import buildfind_app
    from metaeval.protocols.improve.cli import improve_app

    apps = (("audit", audit_app), ("buildfind", buildfind_app), ("improve", improve_app))
    for name, sub_app in apps:
        for command in sub_app.registered_commands:
            if command.callback is not None:
                command.callback = user_errors(command.callback)
        app.add_typer(sub_app, name=name)


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn MetaevalError into one red line on stderr and exit code 2; Ctrl-C into exit 130."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MetaevalError as exc:
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            if operator_fault(exc) is not None:  # e.g. a manifest that found the disk full
                err.print(RESUME_HINT, markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except (typer.Exit, typer.Abort, click.ClickException):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug or an unhandled input: one line, no trace
            raise typer.Exit(report_crash(exc)) from None
        except KeyboardInterrupt:
            err.print(
                "interrupted: records written so far are kept; run the same command to resume"
            )
            # Job threads may still be inside native code (llama.cpp); finalizing the interpreter
            # under them can crash. Every record is already fsynced, so leave at once.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)

    return wrapper


DEBUG_ENV = "METAEVAL_DEBUG"
_debug = False


RESUME_HINT = (
    "hint: records written so far are intact; fix that (free space, make the output "
    "writable, rename the file), then run the same command again: it resumes where it stopped"
)


def report_crash(exc: BaseException) -> int:
    """One line for an unexpected exception (the traceback only when debugging); exit code 1.

    A fault of the machine the operator can fix (a full disk, a read-only output, a file name
    that is not UTF-8: `errors.operator_fault`) is no bug: its own line naming the file, the
    hint that rerunning resumes, exit code 2."""
    if _debug or os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        import traceback

        err.print(traceback.format_exc(), markup=False, highlight=False, soft_wrap=True)
    fault = operator_fault(exc)
    if fault is not None:
        err.print(f"[bold red]error:[/] {escape(fault)}", highlight=False, soft_wrap=True)
        err.print(RESUME_HINT, markup=False, highlight=False, soft_wrap=True)
        return 2
    lines = str(exc).strip().splitlines() or [""]
    detail = lines[0][:300] + (" ..." if len(lines) > 1 or len(lines[0]) > 300 else "")
    err.print(
        f"[bold red]error:[/] unexpected {type(exc).__name__}: {escape(detail)}",
        highlight=False,
        soft_wrap=True,
    )
    err.print(
        f"hint: records written so far are kept; rerun with --debug (or {DEBUG_ENV}=1) "
        "for the traceback and report it as a bug",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return 1


@app.command()
def version() -> None:
    """Print the metaeval version."""
    out.print(__version__)


def _print_version(value: bool) -> None:
    if value:
        from metaeval.agents.cli.doctor import component_versions

        out.print(f"metaeval {__version__}", highlight=False)
        for name, found in component_versions():
            out.print(f"  {name}: {found}", highlight=False, markup=False)
        raise typer.Exit()


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help=f"Print tracebacks of unexpected errors (or {DEBUG_ENV}=1)."),
    ] = False,
    executor: Annotated[
        str,
        typer.Option(
            envvar="METAEVAL_EXECUTOR",
            help="Where jobs run: 'local' (this process) or 'ray' (a Ray cluster).",
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            envvar="METAEVAL_RAY_ADDRESS",
            help="Ray cluster to join (host:port or ray://...); default: start a local Ray.",
        ),
    ] = None,
) -> None:
    """metaeval: meta-level evaluations of AI coding agents."""
    from metaeval.engine.executor import BACKENDS, select_backend

    global _debug
    _debug = debug
    escape_log_output()
    if executor not in BACKENDS:
        err.print(f"[bold red]error:[/] --executor: choose one of {', '.join(BACKENDS)}")
        raise typer.Exit(2)
    select_backend(executor, ray_address)


@app.command()
@user_errors
def models() -> None:
    """List model providers and whether each is usable on this machine."""
    from metaeval.models.registry import DEFAULT_MODEL, list_providers

    table = Table("provider", "usable", "why", title=f"Model providers (default: {DEFAULT_MODEL})")
    for info in list_providers():
        table.add_row(info.name, "yes" if info.usable else "no", info.reason)
    out.print(table)


@app.command()
def doctor(
    strict: Annotated[bool, typer.Option(help="Exit 1 when any check fails.")] = False,
) -> None:
    """Check bubblewrap, git, the local model, the llama.cpp build, the container engine and
    the agent CLIs (each run once through the gateway; METAEVAL_DOCTOR_LIVE=0 skips those
    runs). Optional parts that are absent show as missing, not as a failure."""
    from metaeval.agents.cli.doctor import optional_summary, status_text
    from metaeval.doctor import doctor_checks

    checks = doctor_checks()
    table = Table("check", "status", "detail", title="metaeval doctor")
    for name, passed, detail in checks:
        table.add_row(name, status_text(name, passed, detail), escape(detail))
    out.print(table)
    if optional_summary(checks):
        out.print(optional_summary(checks), markup=False, highlight=False)
    if strict and not all(passed for name, passed, _ in checks if "(optional)" not in name):
        raise typer.Exit(1)


@app.command()
@user_errors
def demo(
    run_dir: Annotated[Path, typer.Option(help="Run directory (re-running resumes).")] = Path(
        "runs/demo"
    ),
    model: Annotated[str, typer.Option(help="provider/model name.")] = "local/smollm2",
    part: Annotated[str, typer.Option(help="all | qa | audit | buildfind | improve")] = "all",
    concurrency: Annotated[int, typer.Option(min=1, help="Jobs run at once.")] = 1,
    new_layer: Annotated[
        str | None, typer.Option(help="Start a new evidence layer after a prompt or spec change.")
    ] = None,
    questions: Annotated[
        Path | None, typer.Option(help="A question bank (YAML) about the bundled repository.")
    ] = None,
    model_arg: ModelArgs = None,
    model_base_url: ModelBaseUrl = None,
    model_timeout: ModelTimeout = None,
    max_connections: MaxConnections = None,
) -> None:
    """Run the demos of all three protocols on bundled examples; re-running resumes.

    Parts, fast ones first: the audit's checks of the example benchmark (seconds), a scripted
    improve run, toolloop Q&A on a bundled repository, the audit's model cells, and a small
    build-and-find with the model as finder."""
    from metaeval.cli_options import apply_model_options
    from metaeval.demo.parts import PARTS, DemoParts
    from metaeval.errors import ConfigError

    apply_model_options(model_arg, model_base_url, model_timeout, max_connections)

    if part not in PARTS:
        raise ConfigError(f"unknown part '{part}' ({', '.join(PARTS)})", field="part")
    DemoParts(run_dir, model, concurrency, new_layer, questions).run(part)


_register_protocols()


def _register_gateway() -> None:
    from metaeval.gateway.cli import serve

    app.command(name="serve")(user_errors(serve))


_register_gateway()
app.command(name="view")(user_errors(view_cmd))
app.command(name="schema")(user_errors(schema_cmd))


def main() -> None:
    """Console entry point."""
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - commands not wrapped by user_errors
        sys.exit(report_crash(exc))
    finally:
        # The command is over and everything it wrote is closed and synced (records never rely
        # on a finalizer). Freezing the heap spares the interpreter's last full garbage
        # collection at exit (0.05-0.1 s after a large run); objects outside reference cycles
        # are still freed, and the system closes whatever is left.
        gc.freeze()


if __name__ == "__main__":
    main()
