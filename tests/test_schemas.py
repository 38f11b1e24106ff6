"""`metaeval schema`: every shipped example validates against the schema of its format (with
`jsonschema`, as a user's editor or CI would), the shipped files in docs/schemas are the
generated ones, and a schema rejects what the loader rejects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from metaeval.protocols.audit.gold import load_gold
from metaeval.protocols.buildfind.config import load_config
from metaeval.protocols.improve.boundary import load_boundary
from metaeval.protocols.improve.manifest_files import load_sut_config, load_system_profile
from metaeval.protocols.improve.matrix.cells import load_matrix
from metaeval.protocols.improve.suites import load_suite_config, load_suite_manifest
from metaeval.schemas import SCHEMAS, schema

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SHIPPED = ROOT / "docs" / "schemas"

# (schema name, example files, the loader that reads them for real)
CASES = [
    ("audit-gold", ["audit-bench/gold.json", "paper/*/gold.json"], load_gold),
    ("buildfind-config", ["buildfind-local.yaml", "buildfind-reference.yaml"], load_config),
    ("improve-manifest", ["improve/manifest*.json"], None),
    ("improve-sut", ["improve/suts/*.json"], load_sut_config),
    ("improve-suite", ["improve/suites/*.json", "improve-suites/*.json"], load_suite_config),
    ("improve-suite-manifest", ["improve-suites/*/suite.json"], None),
    ("improve-profile", ["improve/profiles/*.json"], load_system_profile),
    ("improve-matrix", ["improve/matrix-*.yaml"], load_matrix),
]


def read(path: Path) -> object:
    return (
        yaml.safe_load(path.read_text()) if path.suffix == ".yaml" else json.loads(path.read_text())
    )


def validator(name: str):
    """A draft 2020-12 validator of the schema (jsonschema is not a metaeval dependency:
    without it, the test that asks skips after its own checks)."""
    jsonschema = pytest.importorskip("jsonschema")
    generated = schema(name)
    jsonschema.Draft202012Validator.check_schema(generated)
    return jsonschema.Draft202012Validator(generated)


@pytest.mark.parametrize(("name", "patterns", "loader"), CASES, ids=[c[0] for c in CASES])
def test_every_shipped_example_validates(name, patterns, loader) -> None:
    files = sorted(p for pattern in patterns for p in EXAMPLES.glob(pattern))
    assert files, patterns
    for path in files:  # the loader reads each for real
        if loader is not None:
            loader(path)
        elif name == "improve-suite-manifest":
            load_suite_manifest(path.parent)
    check = validator(name)
    for path in files:
        errors = [e.message for e in check.iter_errors(read(path))]
        assert errors == [], f"{path}: {errors}"


def test_a_boundary_validates_and_loads(tmp_path: Path) -> None:
    boundary = {"mutable_root": "target_agent", "allowed_paths": ["prompts.py", "tools/*.py"]}
    path = tmp_path / "boundary.json"
    path.write_text(json.dumps(boundary))
    assert list(validator("improve-boundary").iter_errors(boundary)) == []
    assert load_boundary(path).allowed_paths == ["prompts.py", "tools/*.py"]
    assert list(validator("improve-boundary").iter_errors({"allowed_paths": []}))


def test_gold_schema_names_the_subcategory_codes_and_rejects_an_unknown_one() -> None:
    check = validator("audit-gold")
    bad = {"tasks": {"t": {"issues": [{"id": "a", "description": "d", "category": "INST-FOO"}]}}}
    assert list(check.iter_errors(bad))
    extra = {"tasks": {"t": {"issues": [], "note": "x"}}}
    assert list(check.iter_errors(extra))
    codes = json.dumps(schema("audit-gold"))
    assert '"const": "INST-INCOMPLETE"' in codes and '"const": "GT-NO-ORACLE"' in codes


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_shipped_schema_files_are_the_generated_ones(name: str) -> None:
    shipped = json.loads((SHIPPED / f"{name}.json").read_text())
    assert shipped == schema(name), f"regenerate: metaeval schema {name} > docs/schemas/{name}.json"


def test_cli_lists_prints_and_refuses_unknown_names() -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "metaeval.cli", "schema", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    listed = run()
    assert listed.returncode == 0 and set(SCHEMAS) <= set(listed.stdout.split())
    printed = run("buildfind-config")
    assert printed.returncode == 0
    data = json.loads(printed.stdout)
    assert {"pack", "builders", "finders", "budgets"} <= set(data["properties"])
    unknown = run("nope")
    assert unknown.returncode == 2 and "unknown schema 'nope'" in unknown.stderr
