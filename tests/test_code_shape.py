"""scripts/code_shape.py on small made-up packages: module and folder sizes, long functions,
cycles, layer breaks, and the exit code of the gate."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "code_shape.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("code_shape", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["code_shape"] = module
    spec.loader.exec_module(module)
    return module


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_package(tmp_path: Path) -> Path:
    root = tmp_path / "metaeval"
    write(root, "__init__.py", "")
    write(root, "sandbox/__init__.py", "")
    # a lazy import inside a function still closes the cycle a <-> b
    write(root, "sandbox/a.py", "from metaeval.sandbox import b\n")
    write(root, "sandbox/b.py", "def f():\n    from metaeval.sandbox.a import x\n")
    # sandbox -> tasks runs up a layer; the TYPE_CHECKING import never runs
    write(
        root,
        "sandbox/c.py",
        "from typing import TYPE_CHECKING\nfrom metaeval.tasks import t\n"
        "if TYPE_CHECKING:\n    from metaeval.protocols.audit import run\n",
    )
    write(root, "tasks/__init__.py", "")
    write(root, "tasks/t.py", "from metaeval.sandbox.c import y\n")  # down: fine
    write(root, "protocols/__init__.py", "")
    write(root, "protocols/audit/__init__.py", "")
    write(root, "protocols/audit/run.py", "from metaeval.protocols.improve import loop\n")
    write(root, "protocols/improve/__init__.py", "")
    body = "".join(f"    x{i} = {i}\n" for i in range(61))  # 1 + 61 lines: over 60
    write(root, "protocols/improve/loop.py", "def long():\n" + body + "\n" * 400)
    return root


def test_cycles_breaks_and_sizes_of_a_made_up_package(tmp_path: Path) -> None:
    shape = load()
    modules = shape.scan(make_package(tmp_path))
    # c -> t -> c is a cycle too (t imports c back), besides a <-> b
    assert shape.cycles(modules) == [
        ["metaeval.sandbox.a", "metaeval.sandbox.b"],
        ["metaeval.sandbox.c", "metaeval.tasks.t"],
    ]
    assert shape.layer_breaks(modules) == [
        ("metaeval.protocols.audit.run", "metaeval.protocols.improve.loop"),  # across protocols
        ("metaeval.sandbox.c", "metaeval.tasks.t"),  # up a layer
    ]
    loop = modules["metaeval.protocols.improve.loop"]
    assert loop.long_functions == [("long", 62)]
    assert loop.lines == 62 + 400


def test_the_table_on_the_made_up_package(tmp_path: Path, capsys) -> None:
    shape = load()
    assert shape.main([str(make_package(tmp_path))]) == 1  # cycles and layer breaks fail
    out = capsys.readouterr().out
    assert "| modules over 700 lines (largest: 462) | 0 |" in out
    assert "| functions over 60 lines (for review) | 1 |" in out
    assert "| import cycles between files (lazy imports included) | 2 |" in out
    assert "| imports running down-to-up | 2 |" in out
    assert "metaeval.sandbox.a <-> metaeval.sandbox.b" in out  # offenders printed on failure
    assert "400" not in out  # no gate near a module's usual size


def clean_package(tmp_path: Path) -> Path:
    """A package that keeps every rule: sandbox below tasks, no cycle."""
    root = tmp_path / "metaeval"
    write(root, "__init__.py", "")
    write(root, "sandbox/__init__.py", "")
    write(root, "sandbox/a.py", "X = 1\n")
    write(root, "tasks/__init__.py", "")
    write(root, "tasks/t.py", "from metaeval.sandbox.a import X\n")
    return root


def test_a_long_function_is_listed_for_review_and_does_not_fail(tmp_path: Path, capsys) -> None:
    shape = load()
    root = clean_package(tmp_path)
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    write(root, "tasks/long.py", "def long_one():\n" + body)
    assert shape.main([str(root)]) == 0
    out = capsys.readouterr().out
    assert "| functions over 60 lines (for review) | 1 |" in out
    assert "     81 metaeval.tasks.long.long_one" in out


def test_a_module_over_700_lines_fails(tmp_path: Path, capsys) -> None:
    shape = load()
    root = clean_package(tmp_path)
    write(root, "tasks/at_limit.py", "x = 1\n" * 700)
    assert shape.main([str(root)]) == 0
    write(root, "tasks/big.py", "x = 1\n" * 701)
    assert shape.main([str(root)]) == 1
    out = capsys.readouterr().out
    assert "| modules over 700 lines (largest: 701) | 1 |" in out
    assert "    701 metaeval/tasks/big.py" in out


def test_a_folder_over_20_modules_fails_unless_listed_to_split(tmp_path: Path, capsys) -> None:
    shape = load()
    root = clean_package(tmp_path)
    for i in range(19):  # with a.py: 20 modules; __init__.py is the folder, not a module
        write(root, f"sandbox/m{i}.py", "")
    write(root, "sandbox/inner/__init__.py", "")  # a subpackage counts in its own folder
    for i in range(3):
        write(root, f"sandbox/inner/n{i}.py", "")
    assert shape.folder_sizes(root, shape.scan(root))["sandbox"] == 20
    assert shape.main([str(root)]) == 0
    write(root, "sandbox/m19.py", "")
    assert shape.main([str(root)]) == 1
    out = capsys.readouterr().out
    assert "| folders over 20 modules, not listed to split | 1 |" in out
    assert "     21 sandbox\n" in out

    modules = shape.scan(root)
    listed = shape.check(root, modules, to_split=("sandbox", "tasks"))
    assert not listed.broken and listed.crowded == []
    assert listed.to_split == [("sandbox", 21), ("tasks", 1)]
    assert shape.check(root, modules).crowded == [("sandbox", 21)]


def test_a_listed_folder_back_within_the_limit_is_reported(tmp_path: Path, capsys) -> None:
    shape = load()
    root = clean_package(tmp_path)
    shape.FOLDERS_TO_SPLIT = ("tasks",)
    assert shape.main([str(root)]) == 0
    out = capsys.readouterr().out
    assert "      1 tasks  (within the limit now: remove it from the list)" in out


def test_every_folder_listed_to_split_exists_and_buildfind_is_split() -> None:
    """Every entry of FOLDERS_TO_SPLIT names a folder of src/metaeval (no stale path)."""
    shape = load()
    root = SCRIPT.parents[1] / "src" / "metaeval"
    sizes = shape.folder_sizes(root, shape.scan(root))
    for folder in shape.FOLDERS_TO_SPLIT:
        assert folder in sizes, folder
    assert "protocols/buildfind" not in shape.FOLDERS_TO_SPLIT
    assert sizes["protocols/buildfind"] <= shape.MAX_FOLDER_MODULES


def test_a_module_no_layer_claims_is_listed_not_fatal(tmp_path: Path, capsys) -> None:
    shape = load()
    root = clean_package(tmp_path)
    write(root, "oddity.py", "from metaeval.tasks import t\n")
    assert shape.main([str(root), "--details"]) == 0
    out = capsys.readouterr().out
    assert "| modules in no declared layer (add them to LAYERS) | 1 |" in out
    assert out.rstrip().endswith("modules in no declared layer\n  metaeval.oddity")
    assert "| imports running down-to-up | 0 |" in out  # its import is not judged
