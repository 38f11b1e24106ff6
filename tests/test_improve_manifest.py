"""One manifest and a suite are enough: the paper's B.1 manifests validate, an inline SUT,
suite directory and default target/budget/output resolve, `-M` sets the models, and
`metaeval improve init` scaffolds an experiment that runs end to end (issues 28.5, 29.3-4)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.improve.config import ExperimentManifest
from metaeval.protocols.improve.init_target import init_target
from metaeval.protocols.improve.plan import build_plan
from metaeval.protocols.improve.profiles import TOOLLOOP_TARGET
from metaeval.protocols.improve.resolve import resolve_manifest, with_models
from metaeval.schemas import schema

ROOT = Path(__file__).resolve().parents[1]
B1 = Path(__file__).parent / "fixtures" / "aie_bench_b1"
TERMINAL = ROOT / "examples" / "improve-suites" / "terminal"
DOCS = ROOT / "docs" / "formats" / "improve.md"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _validator(name: str):
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft202012Validator(schema(name))


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "metaeval.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.mark.parametrize("name", ["optimize_only.json", "held_out.json"])
def test_the_papers_b1_manifests_validate_with_the_documented_defaults(name: str) -> None:
    text = (B1 / name).read_text()
    manifest = ExperimentManifest.model_validate_json(text, strict=True)
    assert manifest.baseline.repo == Path("target")  # default: `target` beside the manifest
    assert manifest.target_budget is None and manifest.output is None  # filled at resolution
    assert manifest.baseline.base_commit == (
        "8f9fa8f8dfcfdadb5a7559fe5268c8d36f163c7" if name == "optimize_only.json" else "HEAD"
    )
    assert list(_validator("improve-manifest").iter_errors(json.loads(text))) == []


def _b1_tree(tmp_path: Path) -> Path:
    """The files the held-out fragment names, beside it, and a `target` repository."""
    root = tmp_path / "exp"
    root.mkdir()
    shutil.copy(B1 / "held_out.json", root / "manifest.json")
    (root / "sut.json").write_text(json.dumps({"meta_agent": {"agent": "scripted"}}))
    shutil.copytree(TERMINAL, root / "terminal")
    for file, split, steps in (("suite.json", "optimize", 12), ("held-out.json", "held_out", 9)):
        config = {"name": split, "tasks_dir": "terminal", "split_id": split}
        (root / file).write_text(json.dumps({**config, "max_steps_per_task": steps}))
    init_target("toolloop", root / "target")
    return root


def test_the_held_out_fragment_resolves_with_defaults_where_metaeval_needs_more(
    tmp_path, monkeypatch
):
    root = _b1_tree(tmp_path)
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the default bundle goes under the current directory
    resolved = resolve_manifest(root / "manifest.json")
    assert resolved.sum_profile == TOOLLOOP_TARGET  # the SUT config names no target profile
    assert resolved.manifest.baseline.repo == root / "target"
    assert resolved.target_budget.max_steps_per_task == 12  # the optimize suite config's
    assert resolved.target_budget.task_timeout_s == 600.0  # the suite config's default
    # runs/<experiment> under the current directory, named after the manifest's directory
    assert resolved.output == elsewhere / "runs" / "exp"
    assert resolved.sut.contract == "edit/1" and resolved.sut.name == "sut"
    written = resolved.to_json()
    assert written["target_budget"] == {"max_steps_per_task": 12, "task_timeout_s": 600.0}
    assert written["output"] == str(elsewhere / "runs" / "exp")


def test_an_inline_sut_profile_boundary_and_a_suite_directory_need_no_other_file(tmp_path):
    root = tmp_path / "exp"
    shutil.copytree(TERMINAL, root / "suite")
    init_target("toolloop", root / "target")
    profile = TOOLLOOP_TARGET.model_dump(mode="json")
    manifest = {
        "mode": "recursive_search",
        "sut": {"meta_agent": {"agent": "scripted"}, "max_steps": 7, "sum_profile": profile},
        "evaluation": {"optimize": {"suite_config": "suite", "split_id": "optimize"}},
        "trial_budget": 1,
        "mutation_policy": {"boundary": {"allowed_paths": ["prompts.py"]}},
        "output": "out",
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    plan, resolved_manifest = build_plan(root / "manifest.json")
    assert resolved_manifest.sut.meta_agent.agent == "scripted" and plan.meta_limits.max_steps == 7
    assert [t.name for t in plan.optimize_tasks] == json.loads(
        (TERMINAL / "suite.json").read_text()
    )["splits"]["optimize"]
    assert plan.episode_limits.max_steps == 30  # a suite directory: the suite config defaults
    assert plan.boundary.mutable_root == "target_agent"  # narrowed from the profile's
    assert plan.boundary.allowed_paths == ["prompts.py"]
    resolved = plan.documents["resolved_manifest.json"]
    assert resolved["sut"]["sut_config"] is None
    assert set(resolved["files"]) == {"manifest", "optimize_suite"}  # suite.json is hashed
    assert resolved["files"]["optimize_suite"]["path"] == str(root / "suite" / "suite.json")


def test_an_inline_sut_error_names_the_manifest_and_the_field(tmp_path):
    path = tmp_path / "manifest.json"
    data = json.loads((B1 / "held_out.json").read_text())
    data["sut"] = {"meta_agent": {"agent": "scripted", "modle": "x"}}
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as error:
        resolve_manifest(path)
    assert error.value.file is not None and error.value.file.endswith("manifest.json")
    assert error.value.field == "sut.inline.meta_agent.modle"


def test_model_flags_set_the_target_and_the_meta_agent(tmp_path):
    root = _b1_tree(tmp_path)
    (root / "sut.json").write_text(json.dumps({"meta_agent": {"agent": "toolloop"}}))
    resolved = resolve_manifest(root / "manifest.json")
    both = with_models(resolved, "local/smollm2")
    assert (
        both.manifest.sum.model == "local/smollm2" and both.sut.meta_agent.model == "local/smollm2"
    )
    split = with_models(resolved, "local/smollm2", target_model="none")
    assert split.manifest.sum.model == "none" and split.sut.meta_agent.model == "local/smollm2"
    only_meta = with_models(resolved, meta_model="openai/gpt-4o")
    assert only_meta.manifest.sum.model == resolved.manifest.sum.model
    (root / "sut.json").write_text(json.dumps({"meta_agent": {"agent": "scripted"}}))
    scripted = with_models(resolve_manifest(root / "manifest.json"), "local/smollm2")
    assert scripted.sut.meta_agent.model is None  # a scripted meta-agent has no model
    assert scripted.manifest.sum.model == "local/smollm2"


@pytest.mark.bwrap
def test_init_scaffolds_an_experiment_that_runs_end_to_end_and_refuses_another_model(tmp_path):
    dest = tmp_path / "my-experiment"
    made = _cli("improve", "init", str(dest))
    assert made.returncode == 0, made.stderr
    files = sorted(p.relative_to(dest).as_posix() for p in dest.iterdir())
    assert files == ["manifest.json", "suite", "target"]  # one manifest, one suite
    manifest = json.loads((dest / "manifest.json").read_text())
    assert list(_validator("improve-manifest").iter_errors(manifest)) == []
    suite = json.loads((dest / "suite" / "suite.json").read_text())
    assert list(_validator("improve-suite-manifest").iter_errors(suite)) == []

    ran = _cli("improve", "run", str(dest / "manifest.json"), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    # the bundle lands in ./runs like every other command's run, named after the experiment
    bundle = tmp_path / "runs" / "my-experiment"
    assert f"bundle: {bundle}" in " ".join(ran.stdout.split())
    assert not (dest / "runs").exists()
    ledger = [json.loads(line) for line in (bundle / "trial_ledger.jsonl").read_text().splitlines()]
    # the scripted meta-agent's first step adds recipes for the two optimize tasks (2/2 pass
    # from 0/2), its second disables them (0/2, below its parent's 2/2)
    assert [(e["decision"], e["optimize_score"]) for e in ledger] == [
        ("promoted", 1.0),
        ("rejected", 0.0),
    ]
    again = _cli("improve", "run", str(dest / "manifest.json"), "-M", "local/smollm2", cwd=tmp_path)
    assert again.returncode == 2
    assert "setting 'models' changed" in again.stderr and "local/smollm2" in again.stderr
    assert _cli("improve", "init", str(dest)).returncode == 2  # never over an experiment


def _doc_examples() -> list[tuple[str, str]]:
    """(schema name, JSON text) of every example in docs/formats/improve.md, each announced
    by an `<!-- schema: NAME -->` line before its code block."""
    text = DOCS.read_text()
    found = re.findall(r"<!-- schema: ([a-z-]+) -->\s*```json\n(.*?)```", text, re.S)
    return [(name, body) for name, body in found]


def test_every_example_in_the_format_docs_validates_against_its_schema() -> None:
    examples = _doc_examples()
    names = {name for name, _ in examples}
    assert {
        "improve-manifest",
        "improve-suite",
        "improve-suite-manifest",
        "improve-boundary",
        "improve-profile",
        "improve-sut",
    } <= names
    for name, body in examples:
        errors = [e.message for e in _validator(name).iter_errors(json.loads(body))]
        assert errors == [], (name, body, errors)
