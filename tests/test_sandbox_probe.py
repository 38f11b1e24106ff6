"""The bubblewrap probe under mount churn: other processes (containers, other sandboxes) make
and remove mounts all the time. A probe that binds `/` recursively fails when a submount
vanishes during its bind ("Can't bind mount /oldroot/ on /newroot/"), and a failed probe turned
the sandbox off for a whole process. The probe must bind only what real sandboxes bind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.sandbox.policy import bwrap_binary, probe


def _can_mount(tmp_path: Path) -> bool:
    target = tmp_path / "m"
    target.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "none", str(target)], capture_output=True)
    if done.returncode != 0:
        return False
    subprocess.run(["umount", str(target)], check=True)
    return True


@pytest.mark.bwrap
def test_the_probe_holds_while_mounts_come_and_go(tmp_path: Path) -> None:
    binary = bwrap_binary()
    if binary is None or os.geteuid() != 0 or not _can_mount(tmp_path):
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1" and binary is None:
            pytest.fail("METAEVAL_REQUIRE_BWRAP=1 but bwrap is not installed")
        pytest.skip("needs bwrap and root to make mounts")
    mounts = [tmp_path / f"churn{i}" for i in range(8)]
    for path in mounts:
        path.mkdir()
    loop = "; ".join(f"mount -t tmpfs none {p}; umount {p}" for p in mounts)
    churn = subprocess.Popen(["sh", "-c", f"while true; do {loop}; done"])
    try:
        results = [probe(binary, userns=False) for _ in range(25)]
    finally:
        churn.kill()
        churn.wait()
        for path in mounts:
            subprocess.run(["umount", str(path)], capture_output=True)
    failures = [reason for works, reason in results if not works]
    assert failures == [], failures[:3]


@pytest.mark.bwrap
def test_a_probe_that_cannot_work_says_why(tmp_path: Path) -> None:
    """A bwrap that always fails is judged unusable, with its own last error line."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\nprint('bwrap: no namespaces here', file=sys.stderr)\nsys.exit(1)\n"
    )
    fake.chmod(0o755)
    works, reason = probe(str(fake), userns=False)
    assert works is False and reason == "bwrap: no namespaces here"


@pytest.mark.bwrap
def test_a_probe_that_fails_once_is_tried_again(tmp_path: Path) -> None:
    """One failed attempt (a mount that vanished meanwhile) does not turn the sandbox off: the
    real bwrap runs on the second attempt."""
    binary = bwrap_binary()
    if binary is None:
        pytest.skip("needs bwrap")
    marker = tmp_path / "failed-once"
    fake = tmp_path / "bwrap"
    fake.write_text(
        f"#!{sys.executable}\nimport os, sys\nfrom pathlib import Path\n"
        f"marker = Path({str(marker)!r})\n"
        "if not marker.exists():\n"
        "    marker.touch()\n"
        '    print("bwrap: Can\'t bind mount /oldroot/ on /newroot/", file=sys.stderr)\n'
        "    sys.exit(1)\n"
        f"os.execv({binary!r}, [{binary!r}, *sys.argv[1:]])\n"
    )
    fake.chmod(0o755)
    assert probe(str(fake), userns=False) == (True, "")
    assert marker.exists()
