"""Where the baseline target came from, as the bundle states it (`resolved_manifest.json`,
key `target_source`).

`metaeval improve init-target` writes `target.json` into the target repository: for
mini-swe-agent it names the PyPI release the source was copied from (`init_target.MINI_VERSION`,
verified against the wheel's RECORD hashes). The paper pins a git commit of mini-swe-agent
(AIE Bench Appendix B.1) that it does not publish with the repository it names; metaeval pins
the release instead because its bytes can be verified offline from an installed wheel. A
repository without `target.json` (the toolloop family, or a user's own target) is stated as
such, with the baseline commit that pins it either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metaeval.protocols.improve.gitops import GitError, git

PAPER_PIN = (
    "AIE Bench pins mini-swe-agent by a git commit of its submodule; metaeval pins the PyPI "
    "release named here, verified file by file against the wheel RECORD"
)
"""How metaeval's pin relates to the paper's, written beside a mini-swe-agent source."""


def target_source(repo: Path, commit: str) -> dict[str, Any]:
    """The provenance of the target at `commit`: `target.json` of that commit, the commit, and
    (for mini-swe-agent) how the pin differs from the paper's."""
    try:
        text = git(repo, "show", f"{commit}:target.json")
        provenance: Any = json.loads(text)
    except (GitError, ValueError):
        provenance = None
    if not isinstance(provenance, dict):
        return {"baseline_commit": commit, "provenance": None, "pinned_by": "baseline commit"}
    source = {"baseline_commit": commit, "provenance": provenance}
    if provenance.get("family") == "mini-swe-agent":
        source["pinned_by"] = (
            f"PyPI release {provenance.get('distribution')}=={provenance.get('version')}"
        )
        source["versus_paper"] = PAPER_PIN
    else:
        source["pinned_by"] = "baseline commit"
    return source
