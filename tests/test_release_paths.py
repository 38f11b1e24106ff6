"""The release scrubber replaces whole host paths only, however the run directory was named.

A real build-and-find run (scripted reference agents) of a pack whose README holds the word
"run" and the paths /tmp/... and /root/... is released twice with HOME=/root: once named
`run` from its parent folder, once by its absolute path. Both releases must be byte for byte
the same, pass `verify-release`, keep that text as written, and carry no host path of the
run. The working directory /tmp (as $CWD) is checked on the scrubber itself.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from metaeval.protocols.buildfind.release.scrub import Scrubber

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "examples" / "buildfind-reference.yaml"
HOSTILE_TEXT = (
    "Every run and rerun writes to /tmp/out.txt and reads /root/.profile and /var/tmp/cache;"
    " run-time notes (file:///tmp/x) stay.\n"
)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "METAEVAL_DEBUG"} | {"HOME": "/root"}
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=env,
    )


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def releases():
    if importlib.util.find_spec("mlcroissant") is None:
        pytest.fail("the `release` extra (mlcroissant) is required: pip install -e '.[release]'")
    base = Path(tempfile.mkdtemp(prefix="metaeval-release-", dir="/tmp"))
    try:
        pack = base / "pack"
        shutil.copytree(CONFIG.parent / "buildfind-pack", pack)
        with (pack / "README.md").open("a") as handle:
            handle.write(HOSTILE_TEXT)
        config = base / "config.yaml"
        config.write_text(CONFIG.read_text().replace("pack: buildfind-pack", f"pack: {pack}"))
        run = base / "run"
        made = cli("buildfind", "run", str(config), "-o", str(run), cwd=base)
        assert made.returncode == 0, made.stdout + made.stderr
        outs = {}
        for how, name in (("relative", "run"), ("absolute", str(run))):
            out = base / how / "release"
            result = cli("buildfind", "release", name, "-o", str(out), cwd=base)
            assert result.returncode == 0, result.stdout + result.stderr
            outs[how] = out
        yield run, outs
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_relative_and_absolute_names_give_identical_releases(releases) -> None:
    _, outs = releases
    relative, absolute = tree(outs["relative"]), tree(outs["absolute"])
    assert sorted(relative) == sorted(absolute)
    differing = [name for name in relative if relative[name] != absolute[name]]
    assert not differing, differing
    tarballs = [(out.parent / "release.tar.gz").read_bytes() for out in outs.values()]
    assert tarballs[0] == tarballs[1]


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_each_release_verifies(releases, how: str) -> None:
    _, outs = releases
    result = cli("buildfind", "verify-release", str(outs[how]), cwd=outs[how].parent)
    assert result.returncode == 0, result.stdout + result.stderr


def test_text_survives_and_host_paths_do_not(releases) -> None:
    run, outs = releases
    files = tree(outs["relative"])
    assert files["pack/README.md"].endswith(HOSTILE_TEXT.encode())
    assert b"in this run;" in files["LICENSES.md"]
    assert b"mean_tokens_per_run" in files["tables/finder_calibration.csv"]
    assert b"$RUN_DIR" not in files["LICENSES.md"]
    leaked = [name for name, data in files.items() if str(run).encode() in data]
    assert not leaked, leaked
    assert any(b"$RUN_DIR" in data or b"$PACK_DIR" in data for data in files.values())


def test_scrubber_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/root")
    monkeypatch.chdir("/tmp")
    run = tmp_path / "run"
    scrub = Scrubber(Path(os.path.relpath(run, "/tmp")), None)
    kept = [
        "run rerun run-time run.",
        "write /tmp/out.txt and /root/.profile",  # top-level folders alone are no host path
        f"/mnt{run}",  # preceded by a path character: another path
        f"{run}x/a {run}.bak {run}-old",  # followed by a name character: another name
    ]
    for text in kept:
        assert scrub.text(text) == text, text
    assert scrub.text(f"see {run}/a, file://{run}/b '{run}' {run}.") == (
        "see $RUN_DIR/a, file://$RUN_DIR/b '$RUN_DIR' $RUN_DIR."
    )
