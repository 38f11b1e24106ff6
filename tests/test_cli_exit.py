"""The console entry point freezes the heap when a command ends, whatever its exit code, so
the interpreter skips its final full garbage collection (see `metaeval.cli.main`)."""

from __future__ import annotations

import gc
import sys

import pytest

from metaeval import cli


@pytest.mark.parametrize(("argv", "code"), [(["--help"], 0), (["no-such-command"], 2)])
def test_main_freezes_the_heap_on_every_exit(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], code: int
) -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr(sys, "argv", ["metaeval", *argv])
    try:
        with pytest.raises(SystemExit) as exited:
            cli.main()
        assert exited.value.code == code
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
