"""JSON Schemas of the files a user writes, generated from the pydantic models that read
them; `metaeval schema` lists them and `metaeval schema NAME` prints one.

The loaders stay the authority (they also check what a schema cannot: files that exist,
task ids of a pack or suite); a file that fails its schema fails its loader too. The gold
file is read by its own parser (`audit/gold.py`), so its schema comes from the small models
below, with the subcategory codes and their meanings taken from the taxonomy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ConfigDict, Field

from metaeval.console import make_console
from metaeval.errors import ConfigError

DIALECT = "https://json-schema.org/draft/2020-12/schema"
out = make_console(markup=False)


class GoldIssueEntry(BaseModel):
    """One known, independently fixable defect of a task."""

    model_config = ConfigDict(extra="forbid", title="gold issue")

    id: str = Field(min_length=1, description="Unique within its task.")
    description: str = Field(min_length=1, description="What is wrong, in a sentence or two.")
    category: str = Field(description="A subcategory code of the taxonomy (listed below).")
    evidence: str = Field(default="", description="Optional: where the defect shows.")


class GoldTaskEntry(BaseModel):
    """The known issues of one task; an empty list marks a known-clean task."""

    model_config = ConfigDict(extra="forbid", title="gold task")

    issues: list[GoldIssueEntry]


class GoldFile(BaseModel):
    """gold.json: the known issues of an audit benchmark, by task id (`audit score --gold`)."""

    model_config = ConfigDict(extra="forbid", title="audit gold file")

    provenance: str = Field(
        default="", description="Where the issues come from (a paper's table, a review)."
    )
    tasks: dict[str, GoldTaskEntry]


def _gold() -> dict[str, Any]:
    from metaeval.protocols.audit.findings import EXTENSIONS, SUBCATEGORIES, TAXONOMY

    meaning = {
        sub: text
        for table in (TAXONOMY, EXTENSIONS)
        for subs in table.values()
        for sub, text in subs.items()
    }
    schema = GoldFile.model_json_schema()
    schema["$defs"]["GoldIssueEntry"]["properties"]["category"] = {
        "description": "A subcategory code of the taxonomy.",
        "oneOf": [{"const": code, "description": meaning.get(code, "")} for code in SUBCATEGORIES],
    }
    return schema


def _model(load: Callable[[], type[BaseModel]]) -> Callable[[], dict[str, Any]]:
    return lambda: load().model_json_schema()


def _buildfind_config() -> type[BaseModel]:
    from metaeval.protocols.buildfind.config import RunConfig

    return RunConfig


def _improve(name: str) -> Callable[[], type[BaseModel]]:
    def load() -> type[BaseModel]:
        from metaeval.protocols.improve import boundary, config, profiles, suites
        from metaeval.protocols.improve.matrix.config import MatrixConfig

        models: dict[str, type[BaseModel]] = {
            "manifest": config.ExperimentManifest,
            "sut": config.SutConfig,
            "suite": suites.SuiteConfig,
            "suite-manifest": suites.SuiteManifest,
            "profile": profiles.SystemProfile,
            "boundary": boundary.MutationBoundary,
            "matrix": MatrixConfig,
        }
        return models[name]

    return load


SCHEMAS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "audit-gold": ("gold.json: known issues per task, for `audit score --gold`", _gold),
    "buildfind-config": ("a build-and-find run config (YAML)", _model(_buildfind_config)),
    "improve-manifest": ("an improve experiment manifest (JSON)", _model(_improve("manifest"))),
    "improve-sut": ("an improve SUT config: meta-agent and profiles", _model(_improve("sut"))),
    "improve-suite": ("an improve suite config: slice and budget", _model(_improve("suite"))),
    "improve-suite-manifest": (
        "a suite directory's suite.json: its splits of task ids",
        _model(_improve("suite-manifest")),
    ),
    "improve-profile": (
        "an improve system profile: how a server is launched",
        _model(_improve("profile")),
    ),
    "improve-boundary": (
        "a mutation boundary (`improve check-patch --boundary`)",
        _model(_improve("boundary")),
    ),
    "improve-matrix": (
        "an improve matrix config: lanes x benchmark sets (`improve matrix`)",
        _model(_improve("matrix")),
    ),
}


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) called `name`; ConfigError for an unknown name."""
    if name not in SCHEMAS:
        raise ConfigError(f"unknown schema '{name}' (known: {', '.join(SCHEMAS)})", field="name")
    return {"$schema": DIALECT, "$id": f"metaeval:{name}", **SCHEMAS[name][1]()}


def schema_cmd(
    name: Annotated[str | None, typer.Argument(help="A schema name; none: list them.")] = None,
) -> None:
    """Print the JSON Schema of a file you write (gold.json, run configs, manifests...)."""
    if name is None:
        width = max(map(len, SCHEMAS))
        for key, (what, _) in SCHEMAS.items():
            out.print(f"{key:<{width}}  {what}", highlight=False, soft_wrap=True)
        return
    typer.echo(json.dumps(schema(name), indent=2, ensure_ascii=False))
