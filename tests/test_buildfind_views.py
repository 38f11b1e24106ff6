"""Restricted finder views: glob rules, presets, config errors, and what the real tools see."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metaeval.agents.scripted import ScriptedAgent
from metaeval.agents.types import Limits, Task
from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.config import load_config
from metaeval.protocols.buildfind.views.specs import PRESETS, ViewSpec, restricted_clone
from metaeval.sandbox.bwrap import bwrap_available
from metaeval.sandbox.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
PHRASE = "ONLY-IN-THE-README-7f3c"
TEST_PHRASE = "ONLY-IN-THE-TESTS-91ab"


def keeps(view: ViewSpec, paths: list[str]) -> list[str]:
    return [p for p in paths if view.keeps(p)]


def test_presets_keep_what_their_names_say():
    paths = [
        "README.md",
        "docs/readme.rst",
        "README",
        "READMEfoo.md",
        "pkg/core.py",
        "pkg/_util.rs",
        "tests/test_core.py",
        "pkg/tests/helpers.py",
        "pkg/core_test.go",
        "web/app.spec.ts",
        "conftest.py",
        "pyproject.toml",
        "Cargo.toml",
        ".github/workflows/ci.yml",
        "Makefile",
        "requirements-dev.txt",
        "notes.txt",
    ]
    assert keeps(PRESETS["readme_only"], paths) == ["README.md", "docs/readme.rst", "README"]
    assert keeps(PRESETS["source_only"], paths) == ["pkg/core.py", "pkg/_util.rs"]
    assert keeps(PRESETS["tests_only"], paths) == [
        "tests/test_core.py",
        "pkg/tests/helpers.py",
        "pkg/core_test.go",
        "web/app.spec.ts",
        "conftest.py",
    ]
    assert keeps(PRESETS["config_only"], paths) == [
        "pyproject.toml",
        "Cargo.toml",
        ".github/workflows/ci.yml",
        "Makefile",
        "requirements-dev.txt",
    ]


def test_custom_globs_anchor_on_slashes_and_stay_in_segments():
    view = ViewSpec(name="src_py", include=["src/**/*.py", "docs/*"], exclude=["*_private.py"])
    paths = [
        "src/a.py",
        "src/x/y/b.py",
        "lib/src/c.py",
        "src/x/secret_private.py",
        "docs/a.md",
        "docs/a/b.md",
        "src/a.pyc",
    ]
    assert keeps(view, paths) == ["src/a.py", "src/x/y/b.py", "docs/a.md"]
    bracket = ViewSpec(name="b", include=["[!t]*.py"])
    assert keeps(bracket, ["a.py", "t.py", "d/t.py", "d/u.py"]) == ["a.py", "d/u.py"]


@pytest.mark.parametrize(
    ("views", "field"),
    [
        ("[nosuch_view]", "views"),
        ("[{name: full, include: ['*']}]", "views.0.name"),
        ("[{name: x, include: []}]", "views.0.include"),
        ("[{name: x, include: ['../*']}]", "views.0.include"),
        ("[{name: x, include: ['[ab']}]", "views.0.include"),
        ("[readme_only, readme_only]", "(top level)"),
    ],
)
def test_bad_views_in_a_config_name_the_file_and_field(tmp_path, views, field):
    text = (ROOT / "examples" / "buildfind-reference.yaml").read_text()
    config = tmp_path / "run.yaml"
    config.write_text(text + f"views: {views}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    message = str(caught.value)
    assert str(config) in message and field in message


def test_presets_and_globs_load_from_a_config(tmp_path):
    text = (ROOT / "examples" / "buildfind-reference.yaml").read_text()
    config = tmp_path / "run.yaml"
    config.write_text(text + "views: [tests_only, {name: mine, include: ['*.md']}]\n")
    loaded = load_config(config)
    assert [v.name for v in loaded.views] == ["tests_only", "mine"]
    assert loaded.views[0].include == PRESETS["tests_only"].include


def _artifact(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__pycache__").mkdir()
    (root / "README.md").write_text(f"# Design\nThe store fsyncs in groups. {PHRASE}\n")
    (root / "pkg" / "core.py").write_text("def put(key, value):\n    return (key, value)\n")
    (root / "tests" / "test_core.py").write_text(f"# {TEST_PHRASE}\ndef test_put(): pass\n")
    (root / "pkg" / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"\x00\x01" + b"x" * 8)
    os.symlink("../README.md", root / "pkg" / "alias.py")  # a .py name that leads to the README
    return root


def test_source_only_clone_hides_readme_and_tests_from_the_real_tools(tmp_path):
    if not bwrap_available():
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail("METAEVAL_REQUIRE_BWRAP=1 but bubblewrap cannot run here")
        pytest.skip("bubblewrap cannot run here: bash would not be sandboxed")
    source = _artifact(tmp_path / "artifact")
    workspace, info = restricted_clone(source, tmp_path / "work" / "clone", PRESETS["source_only"])
    assert info["kept_files"] == ["pkg/core.py"]
    assert sorted(info["hidden_files"]) == ["README.md", "tests/test_core.py"]
    assert workspace.read_only and workspace.list_files() == ["pkg/core.py"]
    assert not (tmp_path / "work" / "clone-view-staging").exists()

    actions = [
        ("list_dir", {"path": "."}),
        ("read_file", {"path": "README.md"}),
        ("read_file", {"path": "pkg/alias.py"}),
        ("read_file", {"path": "../../artifact/README.md"}),
        ("read_file", {"path": str(source / "README.md")}),
        ("grep", {"pattern": "ONLY-IN", "path": "."}),
        ("bash", {"command": "cat README.md tests/test_core.py; ls -laR; grep -r ONLY-IN . "}),
        ("bash", {"command": f"cat {source / 'README.md'} {source / 'tests' / 'test_core.py'}"}),
        ("read_file", {"path": "pkg/core.py"}),
        ("submit", {"answer": "{}"}),
    ]
    task = Task(id="t", instruction="inspect", allow_write=False)
    result = ScriptedAgent(actions).run(task, workspace, Limits(max_steps=20, time_limit_s=120))
    outputs = [e.text for e in result.transcript if e.type == "tool_result"]
    assert len(outputs) == len(actions)  # one result per call, submit included
    seen = "\n".join(outputs)
    assert PHRASE not in seen and TEST_PHRASE not in seen
    assert "def put(key, value)" in outputs[-2]  # the kept file is readable
    assert "alias.py" not in outputs[0] and "README" not in outputs[0]
    workspace.remove()

    # The same calls on the full view's clone do reach both phrases (the probe can fail).
    full = Workspace.read_only_clone(source, tmp_path / "work" / "full")
    result = ScriptedAgent(actions).run(task, full, Limits(max_steps=20, time_limit_s=120))
    seen = "\n".join(e.text for e in result.transcript if e.type == "tool_result")
    assert PHRASE in seen and TEST_PHRASE in seen
    full.remove()


def test_an_empty_view_leaves_an_empty_workspace(tmp_path):
    source = _artifact(tmp_path / "artifact")
    view = ViewSpec(name="nothing", include=["*.nomatch"])
    workspace, info = restricted_clone(source, tmp_path / "clone", view)
    assert workspace.list_files() == [] and info["kept_files"] == []
    assert len(info["hidden_files"]) == 4  # README, core.py, the alias link, the test file
    workspace.remove()
