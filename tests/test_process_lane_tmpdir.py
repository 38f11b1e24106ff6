"""A process lane starts its workers whatever the length of TMPDIR: multiprocessing puts its
fork server's socket under it, and a long TMPDIR passed the AF_UNIX path limit, so every
static audit cell failed ("AF_UNIX path too long")."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import os, tempfile
    from metaeval.engine.process_lane import ProcessLane

    lane = ProcessLane(1)
    try:
        print(lane.call(os.getpid) != os.getpid(), flush=True)
    finally:
        lane.close()
    print(tempfile.gettempdir() == os.environ["TMPDIR"], flush=True)
    """
)


def test_workers_start_under_a_tmpdir_too_long_for_a_socket(tmp_path: Path) -> None:
    long_tmp = tmp_path / ("d" * 60) / ("e" * 60)
    long_tmp.mkdir(parents=True)
    env = {**os.environ, "TMPDIR": str(long_tmp)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # the call ran in another process, and the process's own TMPDIR is unchanged
    assert done.stdout.split() == ["True", "True"], done.stdout
    assert "AF_UNIX" not in done.stderr
