"""Readable help for every metaeval command, whatever Typer version renders it.

Recent Typer versions print metavars as Python types (``<list[str]>``, ``<int range>``,
``<bool>``) and give every boolean option an automatic ``--no-...`` twin, so an option named
``--no-execution`` shows up as ``--no-execution / --no-no-execution [default:
no-no-execution]``. `TidyGroup` (the top-level command class) walks the whole command tree
once it is built and fixes every parameter in one place, so options added later get the same
treatment:

- metavars are upper-case words (``TEXT``, ``INTEGER``, ``NUMBER``, ``PATH``, or the
  argument's name); ranges stay visible as ``[x>=1]``;
- a boolean option that is off by default is a plain flag: no ``--no-...`` twin and no
  ``[default: ...]``; one that is on by default keeps its ``--no-...`` form to turn it off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import typer.core

_WORDS = {int: "INTEGER", float: "NUMBER", str: "TEXT", Path: "PATH", bool: ""}


def _python_type(param: Any) -> Any:
    """The annotated Python type of a Typer parameter (list[X] -> X), else None."""
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    args = getattr(annotation, "__args__", None)
    if args and getattr(annotation, "__origin__", None) is list:
        annotation = args[0]
    return annotation


def _metavar(param: Any) -> str:
    if getattr(param, "is_flag", False):
        return ""
    descriptor = getattr(param, "type_descriptor", None)
    choices = getattr(descriptor, "choices", None) or getattr(
        getattr(param, "type", None), "choices", None
    )
    if choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in choices) + "]"
    annotation = _python_type(param)
    if isinstance(annotation, type):
        for base, word in _WORDS.items():
            if issubclass(annotation, base):
                return word
    kind = getattr(param, "type", None)  # Typer versions built on click types
    if isinstance(kind, click.types.IntParamType):
        return "INTEGER"
    if isinstance(kind, click.types.FloatParamType):
        return "NUMBER"
    if isinstance(kind, click.Path):
        return "PATH"
    return "TEXT"


def tidy_param(param: Any) -> None:
    """Plain metavar; off-by-default boolean options become single flags."""
    if param.param_type_name == "argument":
        # name column: the upper-case name; type column: the same words as options
        word = _metavar(param)
        if param.metavar is None:
            param.metavar = (param.name or "ARG").upper()
        if hasattr(param, "display_type_rich"):
            param.display_type_rich = lambda ctx, _word=word: _word
            param.display_type = lambda ctx, _word=word: _word
    elif param.metavar is None:
        param.metavar = _metavar(param)
    if getattr(param, "is_flag", False) and not param.default:
        param.secondary_opts = []
        param.show_default = False


def tidy_command(command: Any) -> None:
    """Tidy a command's parameters (and its lazily made ``--help``) and, for a group, every
    subcommand's. Duck-typed: recent Typer versions ship their own copy of click."""
    for param in command.params:
        tidy_param(param)
    make_help = getattr(command, "get_help_option", None)
    if make_help is not None and not getattr(make_help, "_tidy", False):

        def get_help_option(ctx: Any, _make: Any = make_help) -> Any:
            option = _make(ctx)
            if option is not None:
                tidy_param(option)
            return option

        get_help_option._tidy = True  # type: ignore[attr-defined]
        command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        tidy_command(sub)


class TidyGroup(typer.core.TyperGroup):
    """The top-level group: tidies the help of the whole command tree once it is built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tidy_command(self)
