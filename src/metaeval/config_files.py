"""The one reader of files a user writes: manifests, run configs, suites, boundaries, packs.

Every user file goes through here, so every one is read the same strict way:

- the file must be a regular file (never a FIFO or device) of at most `MAX_CONFIG_BYTES`;
- JSON refuses duplicate keys (Python's parser would keep the last one silently);
- YAML uses a SafeLoader that also refuses duplicate keys, and a document whose aliases
  would expand it by more than `MAX_ALIAS_NODES` values (a "billion laughs");
- validation into a pydantic model turns the first problem into one `ConfigError` naming the
  file and the field, spelled the way pydantic spells a location (`suites.0.path`), with an
  unknown key reported before anything else (a typo also makes the intended key "missing").

Records metaeval wrote itself are read elsewhere (`records/`); this module is for input.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from metaeval.errors import ConfigError
from metaeval.records.nofollow import read_capped
from metaeval.tasks.safe_json import MAX_JSON_DEPTH, json_type, nested_deeper_than

M = TypeVar("M", bound=BaseModel)

MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""A user file larger than this is refused before parsing (YAML takes seconds per MiB)."""

YAML_SUFFIXES = (".yaml", ".yml")


class FieldProblem(ValueError):
    """Raised inside a validator that knows which sub-field is at fault.

    `validate` appends `field` to the location pydantic reports, so a cross-field check on
    a parent model can still name the exact key.
    """

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


# --- YAML ----------------------------------------------------------------------------------


class StrictYamlLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys instead of keeping the last one."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:  # unhashable key: the normal constructor reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
    return loader.construct_mapping(node, deep=True)


StrictYamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


MAX_ALIAS_NODES = 100_000
"""How many nodes a YAML document's aliases may add once expanded (a "billion laughs" of a few
hundred bytes would add 10**9; everything downstream, JSON dumps and validation, expands them)."""


def _alias_growth(root: yaml.Node, where: str) -> None:
    """Refuse a document whose aliases, expanded, add more than `MAX_ALIAS_NODES` nodes (or
    that refers to itself). Each distinct node is visited once (sizes are memoised), so this
    takes time in the document's length, not in its expanded size."""
    size: dict[int, int] = {}
    distinct = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if done:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in children)
            if size[key] - distinct > MAX_ALIAS_NODES:
                raise ConfigError(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES} extra values; "
                    "refused (an alias bomb?)",
                    file=where,
                )
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise ConfigError("invalid YAML: an alias refers to itself", file=where)
        open_nodes.add(key)
        distinct += 1
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in size)


def parse_yaml(text: str, where: str) -> Any:
    """The value of a YAML document; ConfigError naming `where` (with line and column), or when
    its aliases would expand it past `MAX_ALIAS_NODES`."""
    loader = StrictYamlLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _alias_growth(node, where)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        if mark is not None:
            message = f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
        else:
            message = f"invalid YAML: {problem}"
        raise ConfigError(message, file=where) from None
    except RecursionError:
        raise ConfigError("invalid YAML: nested too deeply", file=where) from None
    finally:
        loader.dispose()


# --- JSON ----------------------------------------------------------------------------------


class _DuplicateKey(ValueError):
    """Not JSON although Python's parser would take it (a repeated key, NaN, Infinity)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise _DuplicateKey(f"{name} is not valid JSON")


def parse_json(text: str, where: str) -> Any:
    """The value of a JSON document, duplicate keys and NaN/Infinity refused (neither is
    JSON; Python's parser accepts both); ConfigError naming `where`."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant)
    except _DuplicateKey as exc:
        raise ConfigError(f"invalid JSON: {exc}", file=where) from None
    except RecursionError:
        raise ConfigError("invalid JSON: nested too deeply", file=where) from None
    except json.JSONDecodeError as exc:
        message = f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise ConfigError(message, file=where) from None
    except ValueError as exc:
        raise ConfigError(f"invalid JSON: {exc}", file=where) from None
    if nested_deeper_than(value, MAX_JSON_DEPTH):
        raise ConfigError(f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels", file=where)
    return value


# --- files ---------------------------------------------------------------------------------


def read_text(path: Path | str, *, max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The UTF-8 text of a user file that must be a regular file of at most `max_bytes`."""
    path = Path(path)
    try:
        # the user's own link is followed, to a regular file only (`nofollow.read_capped`)
        data = read_capped(path, max_bytes, follow_link=True)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    if data is None:
        raise ConfigError("cannot read: No such file or directory", file=str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(path)
        ) from None


def parse_text(text: str, where: str, *, yaml_syntax: bool) -> Any:
    """Parse `text` as YAML or JSON (duplicate keys refused either way)."""
    return parse_yaml(text, where) if yaml_syntax else parse_json(text, where)


def read_mapping(path: Path | str, *, max_bytes: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """A user file's top-level mapping: YAML for `.yaml`/`.yml`, JSON otherwise."""
    path = Path(path)
    text = read_text(path, max_bytes=max_bytes)
    value = parse_text(text, str(path), yaml_syntax=path.suffix.lower() in YAML_SUFFIXES)
    if not isinstance(value, dict):
        raise ConfigError(
            f"expected a mapping at the top level, found {json_type(value)}", file=str(path)
        )
    return value


# --- validation ----------------------------------------------------------------------------


def field_path(loc: Sequence[int | str]) -> str:
    """The one spelling of a field location: pydantic's parts joined by dots (`suites.0.path`)."""
    return ".".join(str(part) for part in loc)


def _describe(error: Any) -> tuple[str, str]:
    """(field path, message) of one pydantic error, with friendlier wording for common types."""
    loc = [str(part) for part in error.get("loc", ())]
    message = str(error.get("msg", "invalid value"))
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, FieldProblem):
        loc.append(cause.field)
        message = str(cause)
    elif error.get("type") == "extra_forbidden":
        message = "unknown field (not part of the schema; a typo?)"
    elif error.get("type") == "missing":
        message = "required field is missing"
    return field_path(loc), message


def validation_error(
    exc: ValidationError, *, file: Path | str | None, prefix: str = ""
) -> ConfigError:
    """One ConfigError for a pydantic ValidationError: the first problem names its field, up
    to two more are listed; unknown keys come first."""
    errors = sorted(exc.errors(), key=lambda e: e.get("type") != "extra_forbidden")
    field, message = _describe(errors[0])
    others = [f"{f or '(top level)'}: {m}" for f, m in map(_describe, errors[1:3])]
    if others:
        message += f" (also: {'; '.join(others)}"
        message += f"; and {len(errors) - 3} more)" if len(errors) > 3 else ")"
    full = ".".join(part for part in (prefix, field) if part)
    return ConfigError(
        message, file=str(file) if file is not None else None, field=full or "(top level)"
    )


def validate(model: type[M], data: Any, *, file: Path | str | None, prefix: str = "") -> M:
    """`data` validated into `model`; a ConfigError naming `file` and the field otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, file=file, prefix=prefix) from None


def load(path: Path | str, model: type[M]) -> M:
    """Read a user file (`read_mapping`) and validate it into `model`."""
    return validate(model, read_mapping(path), file=path)
