"""scripts/code_shape.py on a small made-up package: sizes, long functions, cycles, layer breaks."""

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
    assert shape.main([str(make_package(tmp_path))]) == 0
    table = capsys.readouterr().out
    assert "| modules over 400 lines | 1 |" in table
    assert "| functions over 60 lines | 1 |" in table
    assert "| import cycles between files (lazy imports included) | 2 |" in table
    assert "| imports running down-to-up | 2 |" in table


def test_a_module_no_layer_claims_is_listed_not_fatal(tmp_path: Path, capsys) -> None:
    shape = load()
    root = make_package(tmp_path)
    write(root, "oddity.py", "from metaeval.protocols.improve import loop\n")
    assert shape.main([str(root), "--details"]) == 0
    out = capsys.readouterr().out
    assert "| modules in no declared layer (add them to LAYERS) | 1 |" in out
    assert out.rstrip().endswith("modules in no declared layer\n  metaeval.oddity")
    assert "| imports running down-to-up | 2 |" in out  # its import is not judged
