"""IMPROVE config layering: SUT config + manifest -> resolved run contract, and every error path."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.improve.base_commit import resolve_base_commit
from metaeval.protocols.improve.config import ExperimentManifest, HeldOut
from metaeval.protocols.improve.contract import RESOLVED_SCHEMA
from metaeval.protocols.improve.manifest_files import load_sut_config, load_system_profile
from metaeval.protocols.improve.resolve import resolve_manifest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "improve"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


# --- helpers ---------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def make_repo(path: Path, commits: int = 1) -> list[str]:
    """A git repo at `path` with `commits` commits; returns their SHAs, oldest first."""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    _git(path, "config", "user.email", "t@example.invalid")
    _git(path, "config", "user.name", "t")
    _git(path, "config", "commit.gpgsign", "false")
    shas = []
    for i in range(commits):
        (path / "target_agent").mkdir(exist_ok=True)
        (path / "target_agent" / "prompt.txt").write_text(f"version {i}\n")
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", f"c{i}")
        shas.append(_git(path, "rev-parse", "HEAD"))
    return shas


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of examples/improve at <tmp>/examples/improve plus the baseline repo it names.

    The example manifest's relative references (`../../runs/improve-target`) land inside tmp.
    """
    root = tmp_path / "examples" / "improve"
    shutil.copytree(EXAMPLES, root)
    make_repo(tmp_path / "runs" / "improve-target")
    return root


def edit_manifest(tree: Path, **changes: Any) -> Path:
    """Apply dotted-path changes (None deletes) to the copied manifest and return its path."""
    path = tree / "manifest.json"
    data = read_json(path)
    for dotted, value in changes.items():
        keys = dotted.split("__")
        node = data
        for key in keys[:-1]:
            node = node[key]
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
    return write_json(path, data)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the examples ------------------------------------------------------------------------------


def test_example_manifest_resolves(tree: Path, tmp_path: Path) -> None:
    repo = tmp_path / "runs" / "improve-target"
    head = _git(repo, "rev-parse", "HEAD")
    r = resolve_manifest(tree / "manifest.json")

    assert r.base_commit == head and r.base_commit_spec == "HEAD"
    assert r.manifest.baseline.repo == repo.resolve()
    assert r.output == (tmp_path / "runs" / "improve-demo").resolve()
    assert r.sut.name == "scripted" and r.sut.contract == "edit/1"
    assert r.sut.meta_agent.agent == "scripted"
    assert r.launch_profile is None
    assert r.sum_profile.mutable_root == "target_agent"
    assert r.sum_profile.allowed_mutation_paths == ["."]  # relative to mutable_root
    assert r.optimize.split_id == "optimize"
    assert r.held_out is not None and r.held_out.split_id == "held_out"
    assert r.manifest.evaluation.held_out.selection_gate == "must_not_regress"
    assert r.manifest.trial_budget == 5
    assert r.manifest.sum.model == "local/smollm2" and r.manifest.sum.base_url is None

    doc = r.to_json()
    assert doc["schema"] == RESOLVED_SCHEMA
    assert set(doc["files"]) == {
        "manifest",
        "sut_config",
        "sum_profile",
        "optimize_suite",
        "held_out_suite",
    }
    assert doc["baseline"] == {
        "id": "baseline",
        "repo": str(repo.resolve()),
        "base_commit": head,
        "base_commit_spec": "HEAD",
    }
    assert doc["sut"]["config"]["sum_profile"] == str(tree / "profiles" / "toolloop_target.json")
    assert doc["sut"]["sum_profile"]["command"][2] == "metaeval.protocols.improve.pact.server"
    assert doc["sut"]["sum_profile"]["cwd"] == "."  # scaffold-relative: kept as written
    held = doc["evaluation"]["held_out"]
    assert held["required"] is True and held["selection_gate"] == "must_not_regress"
    assert held["suite_config"] == str(tree / "suites" / "terminal_held_out.json")
    assert held["suite"]["tasks_dir"] == "../../improve-suites/terminal"
    assert doc["mutation_policy"]["mutable_root"] == "target_agent"
    assert doc["target_budget"] == {"max_steps_per_task": 8, "task_timeout_s": 120.0}
    json.dumps(doc)  # JSON-ready


def test_every_path_in_resolved_manifest_is_absolute(tree: Path) -> None:
    doc = resolve_manifest(tree / "manifest.json").to_json()
    paths = [
        doc["manifest"],
        doc["sut"]["sut_config"],
        doc["sut"]["config"]["sum_profile"],
        doc["baseline"]["repo"],
        doc["evaluation"]["optimize"]["suite_config"],
        doc["evaluation"]["held_out"]["suite_config"],
        doc["output"],
        *(rec["path"] for rec in doc["files"].values()),
    ]
    assert all(Path(p).is_absolute() for p in paths)


def test_hashes_are_sha256_of_the_files(tree: Path) -> None:
    r = resolve_manifest(tree / "manifest.json")
    expected = {
        "manifest": tree / "manifest.json",
        "sut_config": tree / "suts" / "scripted_sut.json",
        "sum_profile": tree / "profiles" / "toolloop_target.json",
        "optimize_suite": tree / "suites" / "terminal_optimize.json",
        "held_out_suite": tree / "suites" / "terminal_held_out.json",
    }
    for role, path in expected.items():
        rec = r.to_json()["files"][role]
        assert rec == {"path": str(path), "sha256": sha256(path)}, role


def test_write_bundle_files(tree: Path, tmp_path: Path) -> None:
    manifest = tree / "manifest.json"
    manifest.write_text(manifest.read_text() + "\n\n")  # odd whitespace must survive verbatim
    r = resolve_manifest(manifest)
    source, resolved = r.write(tmp_path / "bundle")
    assert source.name == "source_manifest.json" and resolved.name == "resolved_manifest.json"
    assert source.read_bytes() == manifest.read_bytes()
    assert read_json(resolved) == r.to_json()
    # deterministic: resolving again yields the same bytes
    assert resolve_manifest(manifest).to_json_text() == resolved.read_text()


def test_relative_paths_follow_their_own_file_not_the_cwd(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    # decoys that a cwd-relative lookup would find instead
    write_json(elsewhere / "suts" / "scripted_sut.json", {"name": "decoy"})
    monkeypatch.chdir(elsewhere)
    r = resolve_manifest(tree / "manifest.json")
    assert r.manifest.sut.sut_config == tree / "suts" / "scripted_sut.json"
    assert r.sut.sum_profile == tree / "profiles" / "toolloop_target.json"  # relative to SUT file
    assert r.optimize.suite_config == tree / "suites" / "terminal_optimize.json"
    assert r.manifest.baseline.repo == (tmp_path / "runs" / "improve-target").resolve()

    # and a relative manifest path given on the command line is relative to the cwd
    monkeypatch.chdir(tree)
    assert resolve_manifest("manifest.json").to_json() == r.to_json()


def test_absolute_references_are_accepted(tmp_path: Path) -> None:
    repo = tmp_path / "target"
    shas = make_repo(repo, commits=2)
    data = read_json(EXAMPLES / "manifest.json")
    data["sut"]["sut_config"] = str(EXAMPLES / "suts" / "toolloop_sut.json")
    data["evaluation"]["optimize"]["suite_config"] = str(
        EXAMPLES / "suites" / "terminal_optimize.json"
    )
    data["evaluation"]["held_out"]["suite_config"] = str(
        EXAMPLES / "suites" / "terminal_held_out.json"
    )
    data["baseline"]["repo"] = str(repo)
    data["baseline"]["base_commit"] = shas[0][:10].upper()
    data["output"] = "out"
    manifest = write_json(tmp_path / "cfg" / "m.json", data)
    r = resolve_manifest(manifest)
    assert r.base_commit == shas[0]  # short, upper-case hex -> full SHA
    assert r.base_commit_spec == shas[0][:10].lower()
    assert r.output == tmp_path / "cfg" / "out"
    assert r.sut.meta_agent.agent == "toolloop" and r.sut.meta_agent.model == "local/smollm2"
    assert r.sut.contract == "edit/1"
    assert "write_file" in r.sut.tool_menu


def test_example_sut_configs_and_profile_load() -> None:
    scripted = load_sut_config(EXAMPLES / "suts" / "scripted_sut.json")
    toolloop = load_sut_config(EXAMPLES / "suts" / "toolloop_sut.json")
    assert scripted.meta_agent.model is None and scripted.launch_profile is None
    assert toolloop.sum_profile == EXAMPLES / "profiles" / "toolloop_target.json"
    profile = load_system_profile(toolloop.sum_profile)
    assert profile.command[-4:] == ["--host", "{host}", "--port", "{port}"]
    assert profile.cwd == Path(".")
    for name in ("terminal_optimize", "terminal_held_out"):
        suite = read_json(EXAMPLES / "suites" / f"{name}.json")
        assert suite["tasks_dir"] == "../../improve-suites/terminal"
        assert suite["split_id"] == name.removeprefix("terminal_")


def test_split_id_defaults_to_the_suite_configs_own(tree: Path) -> None:
    edit_manifest(tree, evaluation__optimize__split_id=None, evaluation__held_out__split_id=None)
    r = resolve_manifest(tree / "manifest.json")
    assert r.optimize.split_id == "optimize"
    assert r.held_out is not None and r.held_out.split_id == "held_out"
    assert r.to_json()["evaluation"]["optimize"]["split_id"] == "optimize"


def test_optimize_only_manifest(tree: Path) -> None:
    edit_manifest(tree, evaluation__held_out={"required": False, "selection_gate": "record_only"})
    r = resolve_manifest(tree / "manifest.json")
    assert r.held_out is None
    assert "held_out_suite" not in r.files
    held = r.to_json()["evaluation"]["held_out"]
    assert held == {
        "required": False,
        "selection_gate": "record_only",
        "suite_config": None,
        "split_id": None,
        "suite": None,
    }
    edit_manifest(tree, evaluation__held_out=None)  # the whole block may be omitted
    assert resolve_manifest(tree / "manifest.json").held_out is None


def test_launch_profile_and_boundary_file_are_resolved_and_hashed(tree: Path) -> None:
    launch = write_json(
        tree / "profiles" / "meta.json", {"name": "meta", "command": ["x", "--port", "{port}"]}
    )
    sut = read_json(tree / "suts" / "toolloop_sut.json")
    sut["launch_profile"] = "../profiles/meta.json"
    sut["meta_agent"] = {"agent": "pact"}  # the lane that runs a launch profile's server
    write_json(tree / "suts" / "toolloop_sut.json", sut)
    boundary = write_json(tree / "boundaries" / "narrow.json", {"allowed": ["target_agent/x"]})
    edit_manifest(
        tree,
        sut__sut_config="suts/toolloop_sut.json",
        mutation_policy={"source": "file", "boundary": "boundaries/narrow.json"},
    )
    r = resolve_manifest(tree / "manifest.json")
    assert r.launch_profile is not None and r.launch_profile.name == "meta"
    assert r.files["launch_profile"].path == launch and r.files["launch_profile"].sha256 == sha256(
        launch
    )
    assert r.boundary == {"allowed": ["target_agent/x"]}
    assert r.files["boundary"].sha256 == sha256(boundary)
    doc = r.to_json()
    assert doc["mutation_policy"]["source"] == "file"
    assert doc["mutation_policy"]["boundary"] == str(boundary)
    assert doc["sut"]["launch_profile"]["name"] == "meta"


# --- error paths -------------------------------------------------------------------------------


def raises(path: Path, *fragments: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        resolve_manifest(path)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return info.value


def test_missing_suite_config_names_manifest_and_field(tree: Path) -> None:
    m = edit_manifest(tree, evaluation__optimize__suite_config="../suites/x.json")
    err = raises(m, "manifest.json", "file not found: ../suites/x.json")
    assert err.field == "evaluation.optimize.suite_config"
    assert err.file is not None and err.file.endswith("manifest.json")
    assert str(err).startswith(f"{err.file}: field 'evaluation.optimize.suite_config': ")


def test_missing_files_at_every_level(tree: Path) -> None:
    m = edit_manifest(tree, sut__sut_config="suts/nope.json")
    assert raises(m, "file not found: suts/nope.json").field == "sut.sut_config"

    m = edit_manifest(tree, sut__sut_config="suts/scripted_sut.json")
    sut = read_json(tree / "suts" / "scripted_sut.json")
    sut["sum_profile"] = "../profiles/missing.json"
    write_json(tree / "suts" / "scripted_sut.json", sut)
    err = raises(m, "scripted_sut.json", "file not found: ../profiles/missing.json")
    assert err.field == "sum_profile" and err.file is not None
    assert err.file.endswith("scripted_sut.json")  # the referencing file, not the manifest

    sut["sum_profile"] = "../profiles/toolloop_target.json"
    sut["launch_profile"] = "../profiles"  # a directory, not a file
    write_json(tree / "suts" / "scripted_sut.json", sut)
    assert raises(m, "not a file").field == "launch_profile"

    sut.pop("launch_profile")
    write_json(tree / "suts" / "scripted_sut.json", sut)
    m = edit_manifest(tree, evaluation__held_out__suite_config="suites/gone.json")
    assert raises(m, "file not found").field == "evaluation.held_out.suite_config"

    m = edit_manifest(
        tree,
        evaluation__held_out__suite_config="suites/terminal_held_out.json",
        mutation_policy={"source": "sum_profile", "boundary": "narrow.json"},
    )
    assert raises(m, "file not found: narrow.json").field == "mutation_policy.boundary"


def test_missing_manifest(tmp_path: Path) -> None:
    raises(tmp_path / "absent.json", "file not found")


def test_typo_in_manifest_names_the_field(tree: Path) -> None:
    data = read_json(tree / "manifest.json")
    data["trial_budgte"] = data.pop("trial_budget")
    m = write_json(tree / "manifest.json", data)
    err = raises(m, "manifest.json", "unknown field", "'trial_budgte'")
    assert err.field == "trial_budgte"  # reported before the consequent "trial_budget missing"

    data["trial_budget"] = data.pop("trial_budgte")
    data["evaluation"]["held_out"]["selction_gate"] = "must_improve"
    write_json(tree / "manifest.json", data)
    err = raises(m, "unknown field")
    assert err.field == "evaluation.held_out.selction_gate"


def test_typo_in_sut_config_names_that_file_and_field(tree: Path) -> None:
    sut = read_json(tree / "suts" / "scripted_sut.json")
    sut["meta_agent"]["modle"] = "local/smollm2"
    write_json(tree / "suts" / "scripted_sut.json", sut)
    err = raises(tree / "manifest.json", "scripted_sut.json", "unknown field")
    assert err.file is not None and err.file.endswith("scripted_sut.json")
    assert err.field == "meta_agent.modle"


def test_typo_in_profile_names_the_profile(tree: Path) -> None:
    profile = read_json(tree / "profiles" / "toolloop_target.json")
    profile["mutable_roots"] = profile.pop("mutable_root")
    write_json(tree / "profiles" / "toolloop_target.json", profile)
    err = raises(tree / "manifest.json", "toolloop_target.json")
    assert err.field == "mutable_roots"


def test_schema_values(tree: Path) -> None:
    m = edit_manifest(tree, trial_budget="5")  # strict: a string is not a number
    assert raises(m, "valid integer").field == "trial_budget"
    m = edit_manifest(tree, trial_budget=0)
    assert raises(m).field == "trial_budget"
    m = edit_manifest(tree, trial_budget=5, mode="grid_search")
    assert raises(m).field == "mode"
    m = edit_manifest(tree, mode="recursive_search", target_budget=None)
    budget = resolve_manifest(m).target_budget  # left out: the optimize suite config's
    assert (budget.max_steps_per_task, budget.task_timeout_s) == (8, 120.0)
    m = edit_manifest(tree, trial_budget=None)
    assert raises(m, "required field is missing").field == "trial_budget"
    m = edit_manifest(tree, trial_budget=5)
    m = edit_manifest(tree, target_budget={"max_steps_per_task": 8, "task_timeout_s": 0})
    assert raises(m).field == "target_budget.task_timeout_s"

    sut = read_json(tree / "suts" / "scripted_sut.json")
    write_json(tree / "suts" / "scripted_sut.json", {**sut, "contract": "diff/2"})
    m = edit_manifest(tree, target_budget={"max_steps_per_task": 8, "task_timeout_s": 60})
    assert raises(m, "scripted_sut.json").field == "contract"
    write_json(tree / "suts" / "scripted_sut.json", {**sut, "tool_menu": ["bash", "bash"]})
    assert raises(m, "duplicate tool").field == "tool_menu"
    bad_agent = {**sut, "meta_agent": {"agent": "aider", "model": None, "options": {}}}
    write_json(tree / "suts" / "scripted_sut.json", bad_agent)
    assert raises(m).field == "meta_agent.agent"


def test_held_out_required_without_suite_config(tree: Path) -> None:
    m = edit_manifest(tree, evaluation__held_out__suite_config=None)
    err = raises(m, "required is true but no suite_config")
    assert err.field == "evaluation.held_out.suite_config"
    with pytest.raises(ValueError):
        HeldOut(required=True)


def test_bad_selection_gate(tree: Path) -> None:
    m = edit_manifest(tree, evaluation__held_out__selection_gate="must_win")
    err = raises(m, "must_not_regress")
    assert err.field == "evaluation.held_out.selection_gate"


def test_gating_gate_without_held_out_is_an_error(tree: Path) -> None:
    m = edit_manifest(
        tree, evaluation__held_out={"required": False, "selection_gate": "must_improve"}
    )
    assert raises(m, "required: true").field == "evaluation.held_out.selection_gate"
    m = edit_manifest(
        tree,
        evaluation__held_out={"required": False, "suite_config": "suites/terminal_held_out.json"},
    )
    assert raises(m, "held-out evaluation is off").field == "evaluation.held_out.suite_config"


def test_held_out_must_differ_from_optimize(tree: Path) -> None:
    m = edit_manifest(
        tree,
        evaluation__held_out__suite_config="suites/terminal_optimize.json",
        evaluation__held_out__split_id="optimize",
    )
    assert raises(m, "same suite and split").field == "evaluation.held_out.split_id"
    # a different file over the same tasks dir and split is the same view too
    m = edit_manifest(
        tree,
        evaluation__held_out__suite_config="suites/terminal_held_out.json",
        evaluation__held_out__split_id="optimize",
    )
    raises(m, "same suite and split")


def test_mutation_policy_checks(tree: Path) -> None:
    m = edit_manifest(tree, mutation_policy={"source": "file"})
    assert raises(m, "no boundary file").field == "mutation_policy.boundary"
    write_json(tree / "b.json", ["not", "an", "object"])
    m = edit_manifest(tree, mutation_policy={"source": "file", "boundary": "b.json"})
    err = raises(m, "expected a JSON object")
    assert err.file is not None and err.file.endswith("b.json")

    profile = read_json(tree / "profiles" / "toolloop_target.json")
    profile.pop("mutable_root")
    write_json(tree / "profiles" / "toolloop_target.json", profile)
    m = edit_manifest(tree, mutation_policy={"source": "sum_profile"})
    err = raises(m, "toolloop_target.json", "no mutable_root")
    assert err.field == "mutable_root"


def test_base_commit_not_in_repo(tree: Path) -> None:
    m = edit_manifest(tree, baseline__base_commit="deadbeef" * 5)
    err = raises(m, "manifest.json", "not found in baseline repository")
    assert err.field == "baseline.base_commit"
    m = edit_manifest(tree, baseline__base_commit="abc1234")
    assert raises(m).field == "baseline.base_commit"


def test_base_commit_must_be_hex_or_head(tree: Path) -> None:
    for bad in ("main", "abc12", "g" * 40, "a" * 41, "head"):
        m = edit_manifest(tree, baseline__base_commit=bad)
        assert raises(m, "hex").field == "baseline.base_commit", bad


def test_baseline_repo_problems(tree: Path, tmp_path: Path) -> None:
    m = edit_manifest(tree, baseline__repo="../../runs/absent")
    assert raises(m, "init-target").field == "baseline.repo"

    plain = tmp_path / "plain"
    plain.mkdir()
    m = edit_manifest(tree, baseline__repo=str(plain))
    assert raises(m, "not a git repository").field == "baseline.repo"

    # a subdirectory of a git repo is not a repo of its own (git -C would find the parent)
    sub = tmp_path / "runs" / "improve-target" / "target_agent"
    m = edit_manifest(tree, baseline__repo=str(sub))
    assert raises(m, "not the root of a git repository").field == "baseline.repo"

    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    m = edit_manifest(tree, baseline__repo=str(empty))
    assert raises(m, "'HEAD' not found").field == "baseline.base_commit"


def test_output_inside_baseline_repo_is_rejected(tree: Path) -> None:
    m = edit_manifest(tree, output="../../runs/improve-target/out")
    assert raises(m, "inside the baseline repository").field == "output"


def test_resolve_base_commit_directly(tmp_path: Path) -> None:
    shas = make_repo(tmp_path / "r", commits=2)
    assert resolve_base_commit(tmp_path / "r", "HEAD") == shas[1]
    assert resolve_base_commit(tmp_path / "r", shas[0][:7]) == shas[0]
    with pytest.raises(ConfigError) as info:
        resolve_base_commit(tmp_path / "r", "0" * 40)
    assert info.value.field == "baseline.base_commit"


def test_invalid_json_reports_line_and_column(tree: Path) -> None:
    manifest = tree / "manifest.json"
    manifest.write_text('{\n  "mode": "recursive_search",\n  "trial_budget": 5,,\n}\n')
    err = raises(manifest, "manifest.json", "invalid JSON at line 3, column 21")
    assert err.file is not None and err.field is None

    sut = tree / "suts" / "scripted_sut.json"
    shutil.copy(EXAMPLES / "manifest.json", manifest)
    sut.write_text('{"name": "scripted",\n "contract": patch}\n')
    err = raises(manifest, "scripted_sut.json", "line 2, column 14")
    assert err.file is not None and err.file.endswith("scripted_sut.json")


def test_other_malformed_files(tree: Path) -> None:
    manifest = tree / "manifest.json"
    manifest.write_text('{"mode": "recursive_search", "mode": "recursive_search"}')
    raises(manifest, "duplicate key 'mode'")
    manifest.write_text("[1, 2]")
    raises(manifest, "expected a JSON object")
    manifest.write_text('{"trial_budget": NaN}')
    raises(manifest, "NaN is not valid JSON")
    manifest.write_bytes(b'{"mode": "\xff"}')
    raises(manifest, "not UTF-8")


def test_manifest_model_matches_the_paper_fragment_shape() -> None:
    """The Appendix B.1 optimize-only fragment validates once repo, output and budget are added."""
    fragment = {
        "mode": "recursive_search",
        "sut": {"sut_config": "../suts/claude_code_haiku_sut.json"},
        "sum": {},
        "baseline": {
            "id": "baseline",
            "repo": "../target",
            "base_commit": "8f9fa8f8dfcfdadb5a7559fe5268c8d36f163c7",
        },
        "evaluation": {
            "optimize": {"suite_config": "../terminalbench_smoke_5.json", "split_id": "optimize"},
            "held_out": {"required": False, "selection_gate": "record_only"},
        },
        "trial_budget": 5,
        "budget_step_timeout_s": 1200,
        "target_budget": {"max_steps_per_task": 30, "task_timeout_s": 600},
        "mutation_policy": {"source": "sum_profile"},
        "output": "runs/x",
    }
    m = ExperimentManifest.model_validate_json(json.dumps(fragment), strict=True)
    assert m.seed == 0 and m.mutation_policy.boundary is None
