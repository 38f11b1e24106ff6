"""Mutation boundary: real patches from real git, hand-written adversarial ones, narrowing."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.improve.boundary import (
    MutationBoundary,
    boundary_from_profile,
    load_boundary,
    narrow,
)
from metaeval.protocols.improve.patch_check import check_patch, check_patch_cli
from metaeval.protocols.improve.patch_verdict import REASON_CODES, PatchVerdict
from metaeval.protocols.improve.profiles import SystemProfile

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

FIXTURES = Path(__file__).parent / "fixtures" / "patches"

BOUNDARY = MutationBoundary(
    mutable_root="agent",
    allowed_paths=["core.py", "prompts", "tools/*.sh", "assets"],
)
BINARY_OK = BOUNDARY.model_copy(update={"allow_binary": True})
ROOT_ALL = MutationBoundary(mutable_root=".", allowed_paths=["."])


def _git_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("GIT_"):
            del env[key]
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        HOME=str(home),
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
        LC_ALL="C",
    )
    return env


class Repo:
    """A scaffold repository: `agent/` is the mutable root, `bench/` is benchmark code."""

    def __init__(self, root: Path):
        self.root = root
        self.env = _git_env(root.parent)
        root.mkdir()
        self.git("init", "-q", ".")
        self.write("agent/core.py", "def run():\n    return 1\n")
        self.write("agent/other.py", "x = 1\n")
        self.write("agent/prompts/system.md", "You are an agent.\nBe brief.\n")
        self.write("agent/tools/run.sh", "#!/bin/sh\necho run\n")
        self.write("bench/score.py", "def score():\n    return 0\n")
        self.write("README.md", "scaffold\n")
        os.symlink("system.md", root / "agent/prompts/current")
        os.symlink("../../bench", root / "agent/prompts/outside")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "base")

    def git(self, *args: str, stdin: str | None = None, check: bool = True):
        return subprocess.run(
            ["git", *args],
            cwd=self.root,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            check=check,
        )

    def write(self, rel: str, content: str | bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    def diff(self, *flags: str) -> str:
        """Stage everything, return `git diff --cached FLAGS`, then restore the base commit."""
        self.git("add", "-A")
        out = self.git("diff", "--cached", "--no-color", "--no-ext-diff", *flags).stdout
        self.git("reset", "-q", "--hard")
        self.git("clean", "-fdq")
        return out

    def apply_check(self, patch: str) -> subprocess.CompletedProcess:
        return self.git("apply", "--check", "-p1", "-", stdin=patch, check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "scaffold")


def codes(verdict: PatchVerdict) -> set[str]:
    return {r.code for r in verdict.reasons}


def reasons_for(verdict: PatchVerdict, code: str) -> list:
    return [r for r in verdict.reasons if r.code == code]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# ---------------------------------------------------------------------------------------------
# Accepted patches (and git agrees they apply)
# ---------------------------------------------------------------------------------------------


def test_in_boundary_edit_is_accepted_and_applies(repo: Repo) -> None:
    repo.write("agent/core.py", "def run():\n    return 2\n")
    repo.write("agent/prompts/system.md", "You are an agent.\nBe thorough.\n")
    patch = repo.diff()
    verdict = check_patch(patch, BOUNDARY)
    assert verdict.accepted, verdict.reasons
    assert verdict.reasons == []
    assert [(f.path, f.change) for f in verdict.files] == [
        ("agent/core.py", "modify"),
        ("agent/prompts/system.md", "modify"),
    ]
    assert verdict.files[0].old_mode == verdict.files[0].new_mode == "100644"
    assert repo.apply_check(patch).returncode == 0


def test_new_file_inside_is_accepted_and_applies(repo: Repo) -> None:
    repo.write("agent/prompts/extra/planner.md", "Plan first.\n")
    repo.write("agent/tools/lint.sh", "#!/bin/sh\nruff check\n")
    patch = repo.diff()
    verdict = check_patch(patch, BOUNDARY)
    assert verdict.accepted, verdict.reasons
    assert {(f.path, f.change, f.new_mode) for f in verdict.files} == {
        ("agent/prompts/extra/planner.md", "add", "100644"),
        ("agent/tools/lint.sh", "add", "100644"),
    }
    assert repo.apply_check(patch).returncode == 0


def test_chmod_inside_roots_is_accepted_and_applies(repo: Repo) -> None:
    (repo.root / "agent/tools/run.sh").chmod(0o755)
    patch = repo.diff()
    assert "old mode 100644\nnew mode 100755\n" in patch
    verdict = check_patch(patch, BOUNDARY)
    assert verdict.accepted, verdict.reasons
    (f,) = verdict.files
    assert (f.path, f.change, f.old_mode, f.new_mode) == (
        "agent/tools/run.sh",
        "modify",
        "100644",
        "100755",
    )
    assert repo.apply_check(patch).returncode == 0


def test_rename_and_delete_inside_are_accepted(repo: Repo) -> None:
    repo.git("mv", "agent/prompts/system.md", "agent/prompts/base.md")
    (repo.root / "agent/tools/run.sh").unlink()
    patch = repo.diff("-M")
    verdict = check_patch(patch, BOUNDARY)
    assert verdict.accepted, verdict.reasons
    changes = {(f.change, f.old_path, f.path) for f in verdict.files}
    assert ("rename", "agent/prompts/system.md", "agent/prompts/base.md") in changes
    assert ("delete", None, "agent/tools/run.sh") in changes
    assert repo.apply_check(patch).returncode == 0


def test_quoted_and_spaced_names_from_git(repo: Repo) -> None:
    repo.write("agent/prompts/naïve.md", "unicode name\n")
    repo.write("agent/prompts/with space.md", "spaced name\n")
    patch = repo.diff()
    assert '"b/agent/prompts/na\\303\\257ve.md"' in patch  # git quotes with octal escapes
    assert "+++ b/agent/prompts/with space.md\t" in patch  # and tab-terminates spaced names
    verdict = check_patch(patch, BOUNDARY)
    assert verdict.accepted, verdict.reasons
    assert {f.path for f in verdict.files} == {
        "agent/prompts/naïve.md",
        "agent/prompts/with space.md",
    }
    assert repo.apply_check(patch).returncode == 0


def test_hand_quoted_header_is_unquoted(repo: Repo) -> None:
    patch = (
        'diff --git "a/agent/prompts/with space.md" "b/agent/prompts/with space.md"\n'
        "new file mode 100644\n"
        "--- /dev/null\n"
        '+++ "b/agent/prompts/with space.md"\n'
        "@@ -0,0 +1 @@\n"
        "+hello\n"
    )
    verdict = check_patch(patch, BOUNDARY)
    assert verdict.accepted, verdict.reasons
    assert verdict.files[0].path == "agent/prompts/with space.md"
    assert repo.apply_check(patch).returncode == 0


def test_control_character_in_quoted_name_is_unsafe(repo: Repo) -> None:
    repo.write("agent/prompts/tab\there.md", "x\n")
    patch = repo.diff()
    assert '"b/agent/prompts/tab\\there.md"' in patch
    verdict = check_patch(patch, BOUNDARY)
    assert not verdict.accepted
    assert codes(verdict) == {"unsafe_path"}
    assert verdict.files[0].path == "agent/prompts/tab\there.md"


def test_plain_unified_diff_without_git_header(repo: Repo, tmp_path: Path) -> None:
    old, new = tmp_path / "a/agent", tmp_path / "b/agent"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    (old / "core.py").write_text("def run():\n    return 1\n")
    (new / "core.py").write_text("def run():\n    return 3\n")
    out = subprocess.run(
        ["diff", "-u", "a/agent/core.py", "b/agent/core.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    ).stdout
    assert out.startswith("--- a/agent/core.py\t")  # timestamps after a tab
    verdict = check_patch(out, BOUNDARY)
    assert verdict.accepted, verdict.reasons
    assert [(f.path, f.change) for f in verdict.files] == [("agent/core.py", "modify")]
    assert repo.apply_check(out).returncode == 0

    # the same format pointed at benchmark code is rejected
    outside = out.replace("agent/core.py", "bench/score.py")
    assert codes(check_patch(outside, BOUNDARY)) == {"outside_boundary"}


def test_git_patch_with_headers_stripped_is_read_too(repo: Repo) -> None:
    repo.write("bench/score.py", "def score():\n    return 100\n")
    patch = repo.diff()
    plain = "".join(
        line for line in patch.splitlines(keepends=True) if not line.startswith(("diff ", "index "))
    )
    assert plain.startswith("--- a/bench/score.py\n")
    verdict = check_patch(plain, BOUNDARY)
    assert codes(verdict) == {"outside_boundary"}
    assert reasons_for(verdict, "outside_boundary")[0].path == "bench/score.py"


def test_format_patch_output_is_accepted(repo: Repo) -> None:
    repo.write("agent/core.py", "def run():\n    return 5\n")
    repo.git("commit", "-q", "-am", "tweak")
    mail = repo.git("format-patch", "-1", "--stdout").stdout
    repo.git("reset", "-q", "--hard", "HEAD~1")
    assert mail.startswith("From ") and "\n-- \n" in mail
    verdict = check_patch(mail, BOUNDARY)
    assert verdict.accepted, verdict.reasons
    assert repo.apply_check(mail).returncode == 0


# ---------------------------------------------------------------------------------------------
# Adversarial patches
# ---------------------------------------------------------------------------------------------


def test_git_config_edit_is_git_metadata(repo: Repo) -> None:
    verdict = check_patch(fixture("git_config.patch"), ROOT_ALL)
    assert not verdict.accepted
    assert codes(verdict) == {"git_metadata"}
    assert reasons_for(verdict, "git_metadata")[0].path == ".git/config"
    # with the scaffold boundary it is also outside the roots
    assert codes(check_patch(fixture("git_config.patch"), BOUNDARY)) == {
        "git_metadata",
        "outside_boundary",
    }


@pytest.mark.parametrize(
    "name",
    [
        "agent/prompts/.git/hooks/pre-commit",  # nested repository inside an allowed dir
        "agent/prompts/.GIT/config",  # case-insensitive file systems
        "agent/prompts/.git./config",  # NTFS drops trailing dots
        "agent/prompts/.g\u200cit/config",  # HFS+ ignores zero-width joiners
        "agent/prompts/GIT~1/config",  # NTFS short name
        "agent/prompts/.gitmodules",
        "agent/prompts/.gitattributes",
    ],
)
def test_git_metadata_variants_inside_allowed_dir(name: str) -> None:
    patch = (
        f"diff --git a/{name} b/{name}\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        f"+++ b/{name}\n"
        "@@ -0,0 +1 @@\n"
        "+x\n"
    )
    verdict = check_patch(patch, BOUNDARY)
    assert codes(verdict) == {"git_metadata"}, verdict.reasons


def test_gitattributes_from_real_git_is_rejected(repo: Repo) -> None:
    repo.write("agent/prompts/.gitattributes", "*.md filter=evil\n")
    repo.write("agent/prompts/.gitignore", "*.tmp\n")
    verdict = check_patch(repo.diff(), BOUNDARY)
    assert codes(verdict) == {"git_metadata"}
    assert [r.path for r in verdict.reasons] == ["agent/prompts/.gitattributes"]  # .gitignore ok


def test_symlink_created_is_rejected(repo: Repo) -> None:
    os.symlink("../../bench/score.py", repo.root / "agent/prompts/link.md")
    patch = repo.diff()
    assert "new file mode 120000" in patch
    verdict = check_patch(patch, BOUNDARY)
    assert codes(verdict) == {"symlink"}
    assert reasons_for(verdict, "symlink")[0].path == "agent/prompts/link.md"
    assert verdict.files[0].new_mode == "120000"


def test_symlink_retargeted_is_rejected(repo: Repo) -> None:
    link = repo.root / "agent/prompts/current"
    link.unlink()
    os.symlink("../../bench/score.py", link)
    patch = repo.diff()
    assert "index " in patch and " 120000\n" in patch  # the only mode git writes
    verdict = check_patch(patch, BOUNDARY)
    assert codes(verdict) == {"symlink"}


def test_file_replaced_by_symlink_is_rejected(repo: Repo) -> None:
    target = repo.root / "agent/prompts/system.md"
    target.unlink()
    os.symlink("../../bench/score.py", target)
    patch = repo.diff()
    assert "deleted file mode 100644" in patch and "new file mode 120000" in patch
    assert codes(check_patch(patch, BOUNDARY)) == {"symlink"}


def test_odd_symlink_mode_bits_are_still_symlinks() -> None:
    patch = (
        "diff --git a/agent/prompts/l b/agent/prompts/l\n"
        "new file mode 120777\n"
        "--- /dev/null\n"
        "+++ b/agent/prompts/l\n"
        "@@ -0,0 +1 @@\n"
        "+/etc/passwd\n"
    )
    assert codes(check_patch(patch, BOUNDARY)) == {"symlink"}


def test_symlink_without_mode_lines_needs_the_worktree(repo: Repo) -> None:
    patch = fixture("symlink_retarget_no_mode.patch")
    assert check_patch(patch, BOUNDARY).accepted  # the text alone says nothing about links
    assert repo.apply_check(patch).returncode == 0  # ... and git would rewrite the link
    verdict = check_patch(patch, BOUNDARY, worktree=repo.root)
    assert codes(verdict) == {"symlink"}


def test_write_through_symlinked_directory_needs_the_worktree(repo: Repo) -> None:
    patch = fixture("through_symlink_dir.patch")
    assert check_patch(patch, BOUNDARY).accepted
    verdict = check_patch(patch, BOUNDARY, worktree=repo.root)
    assert codes(verdict) == {"symlink"}
    assert "agent/prompts/outside" in verdict.reasons[0].detail
    assert repo.apply_check(patch).returncode != 0  # git refuses too: beyond a symbolic link


def test_file_outside_roots_is_rejected(repo: Repo) -> None:
    repo.write("bench/score.py", "def score():\n    return 100\n")
    repo.write("agent/other.py", "x = 2\n")  # inside the mutable root, not allowed
    repo.write("agent/tools/nested/x.sh", "echo\n")  # `*` does not cross `/`
    verdict = check_patch(repo.diff(), BOUNDARY)
    assert codes(verdict) == {"outside_boundary"}
    assert {r.path for r in verdict.reasons} == {
        "bench/score.py",
        "agent/other.py",
        "agent/tools/nested/x.sh",
    }


def test_traversal_is_rejected() -> None:
    verdict = check_patch(fixture("traversal.patch"), BOUNDARY)
    assert not verdict.accepted
    assert codes(verdict) == {"path_traversal", "outside_boundary"}
    assert {r.path for r in reasons_for(verdict, "path_traversal")} == {
        "agent/prompts/../../bench/score.py",
        "../escaped.txt",
    }
    details = " ".join(r.detail for r in reasons_for(verdict, "path_traversal"))
    assert "resolves outside the repository root" in details


def test_traversal_that_stays_inside_is_still_rejected() -> None:
    patch = (
        "--- a/agent/prompts/../prompts/system.md\n"
        "+++ b/agent/prompts/../prompts/system.md\n"
        "@@ -1 +1 @@\n"
        "-You are an agent.\n"
        "+You are a better agent.\n"
    )
    assert codes(check_patch(patch, BOUNDARY)) == {"path_traversal"}


def test_absolute_paths_are_rejected() -> None:
    verdict = check_patch(fixture("absolute.patch"), BOUNDARY)
    assert not verdict.accepted
    assert {r.path for r in reasons_for(verdict, "absolute_path")} == {
        "/tmp/evil.sh",
        "/tmp/core.py",
    }
    assert "outside_boundary" in codes(verdict)


def test_rename_from_inside_to_outside(repo: Repo) -> None:
    (repo.root / "bench").mkdir(exist_ok=True)
    repo.git("mv", "agent/core.py", "bench/core.py")
    patch = repo.diff("-M")
    assert "rename from agent/core.py\nrename to bench/core.py\n" in patch
    verdict = check_patch(patch, BOUNDARY)
    assert codes(verdict) == {"outside_boundary"}
    (reason,) = verdict.reasons
    assert reason.path == "bench/core.py" and "rename destination" in reason.detail
    (f,) = verdict.files
    assert (f.change, f.old_path, f.path) == ("rename", "agent/core.py", "bench/core.py")


def test_rename_from_outside_to_inside(repo: Repo) -> None:
    repo.git("mv", "bench/score.py", "agent/prompts/score.py")
    verdict = check_patch(repo.diff("-M"), BOUNDARY)
    (reason,) = verdict.reasons
    assert reason.code == "outside_boundary" and reason.path == "bench/score.py"
    assert "rename source" in reason.detail


def test_copy_from_outside_to_inside(repo: Repo) -> None:
    shutil.copy(repo.root / "bench/score.py", repo.root / "agent/prompts/score.py")
    patch = repo.diff("-C", "--find-copies-harder")
    assert "copy from bench/score.py\ncopy to agent/prompts/score.py\n" in patch
    verdict = check_patch(patch, BOUNDARY)
    (reason,) = verdict.reasons
    assert reason.code == "outside_boundary" and reason.path == "bench/score.py"
    assert "copy source" in reason.detail
    (f,) = verdict.files
    assert (f.change, f.old_path, f.path) == ("copy", "bench/score.py", "agent/prompts/score.py")


def test_chmod_plus_x_outside_roots(repo: Repo) -> None:
    (repo.root / "bench/score.py").chmod(0o755)
    patch = repo.diff()
    verdict = check_patch(patch, BOUNDARY)
    assert codes(verdict) == {"outside_boundary", "mode_change_outside_boundary"}
    (mode,) = reasons_for(verdict, "mode_change_outside_boundary")
    assert mode.path == "bench/score.py" and "makes the file executable" in mode.detail


def test_chmod_minus_x_outside_roots(repo: Repo) -> None:
    (repo.root / "bench/score.py").chmod(0o755)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "x")
    (repo.root / "bench/score.py").chmod(0o644)
    verdict = check_patch(repo.diff(), BOUNDARY)
    (mode,) = reasons_for(verdict, "mode_change_outside_boundary")
    assert "changes the file mode" in mode.detail


def test_binary_rejected_unless_allowed(repo: Repo) -> None:
    blob = bytes(range(256)) * 8
    repo.write("agent/assets/logo.bin", blob)
    patch = repo.diff("--binary")
    assert "GIT binary patch\nliteral 2048\n" in patch
    verdict = check_patch(patch, BOUNDARY)
    assert codes(verdict) == {"binary_patch"}
    assert verdict.files[0].binary

    allowed = check_patch(patch, BINARY_OK)
    assert allowed.accepted, allowed.reasons
    assert repo.apply_check(patch).returncode == 0


def test_binary_modification_with_delta_is_read(repo: Repo) -> None:
    blob = bytes(range(256)) * 64
    repo.write("agent/assets/big.bin", blob)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "blob")
    repo.write("agent/assets/big.bin", blob[:-10] + b"\x00" * 10)
    patch = repo.diff("--binary")
    verdict = check_patch(patch, BINARY_OK)
    assert verdict.accepted, verdict.reasons
    assert repo.apply_check(patch).returncode == 0


def test_binary_without_data(repo: Repo) -> None:
    repo.write("agent/assets/logo.bin", b"\x00\x01\x02")
    patch = repo.diff()  # no --binary: "Binary files ... differ"
    assert "Binary files /dev/null and b/agent/assets/logo.bin differ" in patch
    assert codes(check_patch(patch, BOUNDARY)) == {"binary_patch"}
    assert codes(check_patch(patch, BINARY_OK)) == {"malformed"}


def test_corrupt_binary_data_is_malformed(repo: Repo) -> None:
    repo.write("agent/assets/logo.bin", bytes(range(256)))
    patch = repo.diff("--binary")
    lines = patch.split("\n")
    k = lines.index("GIT binary patch") + 2
    lines[k] = lines[k][:-5] + "~~~~~"  # break the base85 / zlib data
    verdict = check_patch("\n".join(lines), BINARY_OK)
    assert "malformed" in codes(verdict)


def test_benchmark_owned_context_is_rejected(repo: Repo) -> None:
    repo.write(".aie_bench_recursive/mutation_boundary.json", '{"allowed_paths": ["."]}\n')
    patch = repo.diff()
    verdict = check_patch(patch, ROOT_ALL)  # even when the whole repo is mutable
    assert codes(verdict) == {"benchmark_owned"}
    assert codes(check_patch(patch, BOUNDARY)) == {"benchmark_owned", "outside_boundary"}


def test_gitlink_is_rejected() -> None:
    verdict = check_patch(fixture("gitlink.patch"), ROOT_ALL)
    assert codes(verdict) == {"gitlink"}
    assert verdict.files[0].old_mode == "160000"


def test_unsupported_mode_is_rejected() -> None:
    patch = "diff --git a/agent/core.py b/agent/core.py\nold mode 100644\nnew mode 100777\n"
    assert codes(check_patch(patch, BOUNDARY)) == {"unsupported_mode"}


@pytest.mark.parametrize("text", ["", "\n", "   \n\t\n"])
def test_empty_patch(text: str) -> None:
    verdict = check_patch(text, BOUNDARY)
    assert not verdict.accepted
    assert [r.code for r in verdict.reasons] == ["empty_patch"]


@pytest.mark.parametrize(
    "text",
    [
        "I improved the agent by making it smarter.\n",
        "diff --git a/agent/core.py b/agent/core.py\n",  # header only, no change
        "diff --git a/agent/core.py b/agent/core.py\n"  # hunk header without counts' spacing
        "--- a/agent/core.py\n+++ b/agent/core.py\n@@ -1 +1@@\n-a\n+b\n",
        "diff --git a/agent/core.py b/agent/core.py\n"  # hunk longer than declared
        "--- a/agent/core.py\n+++ b/agent/core.py\n@@ -1 +1 @@\n-a\n+b\n+c\n",
        "diff --git a/agent/core.py b/agent/core.py\n"  # a line that is not ' ', '-', '+'
        "--- a/agent/core.py\n+++ b/agent/core.py\n@@ -1,2 +1,2 @@\n-a\n*b\n+b\n",
        "@@ -1 +1 @@\n-a\n+b\n",  # fragment without a header
        "diff --git a/agent/core.py b/agent/core.py\n"  # final line without newline
        "--- a/agent/core.py\n+++ b/agent/core.py\n@@ -1 +1 @@\n-a\n+b",
        "--- core.py\n+++ core.py\n@@ -1 +1 @@\n-a\n+b\n",  # no prefix: git would guess -p0
        "diff --git a/agent/core.py b/agent/core.py\n"  # new file that removes lines
        "new file mode 100644\n--- /dev/null\n+++ b/agent/core.py\n@@ -1 +1 @@\n-a\n+b\n",
    ],
)
def test_malformed_patches(text: str) -> None:
    verdict = check_patch(text, BOUNDARY)
    assert not verdict.accepted
    assert "malformed" in codes(verdict), verdict.reasons


def test_truncated_hunk_is_malformed(repo: Repo) -> None:
    patch = fixture("truncated.patch")
    verdict = check_patch(patch, BOUNDARY)
    assert codes(verdict) == {"malformed"}
    assert "truncated" in verdict.reasons[0].detail
    assert repo.apply_check(patch).returncode != 0  # git agrees it is corrupt


def test_header_names_that_disagree_with_the_body(repo: Repo) -> None:
    """git follows `---`/`+++`, not the diff --git line: both names must be checked."""
    patch = fixture("header_mismatch.patch")
    assert repo.apply_check(patch).returncode == 0  # the attack works on git itself
    verdict = check_patch(patch, BOUNDARY)
    assert not verdict.accepted
    assert {"malformed", "outside_boundary"} <= codes(verdict)
    assert "bench/score.py" in {r.path for r in reasons_for(verdict, "outside_boundary")}


def test_different_names_without_rename_header(repo: Repo) -> None:
    """git turns this into a rename of agent/core.py onto bench/score.py."""
    patch = (
        "diff --git a/agent/core.py b/bench/score.py\n"
        "--- a/agent/core.py\n"
        "+++ b/bench/score.py\n"
        "@@ -1,2 +1,2 @@\n"
        " def run():\n"
        "-    return 1\n"
        "+    return 2\n"
    )
    verdict = check_patch(patch, BOUNDARY)
    assert {"malformed", "outside_boundary"} <= codes(verdict)
    assert reasons_for(verdict, "outside_boundary")[0].path == "bench/score.py"


def test_patch_too_large() -> None:
    patch = fixture("through_symlink_dir.patch")
    small = BOUNDARY.model_copy(update={"max_patch_bytes": 40})
    verdict = check_patch(patch, small)
    assert codes(verdict) == {"patch_too_large"}
    assert check_patch(patch, BOUNDARY.model_copy(update={"max_patch_bytes": len(patch)})).accepted


def test_new_files_and_deletions_can_be_forbidden(repo: Repo) -> None:
    strict = BOUNDARY.model_copy(update={"allow_new_files": False, "allow_deletions": False})
    repo.write("agent/prompts/new.md", "x\n")
    (repo.root / "agent/tools/run.sh").unlink()
    repo.git("mv", "agent/core.py", "agent/prompts/core.py")
    verdict = check_patch(repo.diff("-M"), strict)
    assert codes(verdict) == {"new_file_not_allowed", "deletion_not_allowed"}
    assert {r.path for r in reasons_for(verdict, "new_file_not_allowed")} == {
        "agent/prompts/new.md",
        "agent/prompts/core.py",
    }
    assert {r.path for r in reasons_for(verdict, "deletion_not_allowed")} == {
        "agent/tools/run.sh",
        "agent/core.py",
    }


def test_traditional_diff_from_empty_may_create_a_file() -> None:
    strict = BOUNDARY.model_copy(update={"allow_new_files": False})
    patch = "--- a/agent/prompts/x.md\n+++ b/agent/prompts/x.md\n@@ -0,0 +1 @@\n+x\n"
    assert codes(check_patch(patch, strict)) == {"new_file_not_allowed"}
    assert check_patch(patch, BOUNDARY).accepted


def test_every_violation_is_listed(repo: Repo) -> None:
    repo.write("bench/score.py", "def score():\n    return 100\n")  # outside
    (repo.root / "bench/score.py").chmod(0o755)  # +x outside
    os.symlink("/etc/passwd", repo.root / "agent/prompts/pw.md")  # symlink
    repo.write("agent/assets/blob.bin", bytes(range(256)))  # binary
    repo.write(".aie_bench_recursive/optimizer_context.md", "mine now\n")  # benchmark-owned
    repo.write("agent/core.py", "def run():\n    return 9\n")  # fine on its own
    patch = repo.diff("--binary") + fixture("git_config.patch") + fixture("traversal.patch")
    verdict = check_patch(patch, BOUNDARY)
    assert not verdict.accepted
    assert codes(verdict) == {
        "outside_boundary",
        "mode_change_outside_boundary",
        "symlink",
        "binary_patch",
        "benchmark_owned",
        "git_metadata",
        "path_traversal",
    }
    assert set(verdict.codes) <= set(REASON_CODES)
    assert "agent/core.py" not in {r.path for r in verdict.reasons}
    assert len(verdict.files) == 8


def test_stray_lines_after_a_hunk_are_malformed(repo: Repo) -> None:
    repo.write("agent/core.py", "def run():\n    return 2\n")
    patch = repo.diff() + "+import os\n"
    assert "malformed" in codes(check_patch(patch, BOUNDARY))


def test_verdict_round_trips_as_json(repo: Repo) -> None:
    repo.write("bench/score.py", "x\n")
    verdict = check_patch(repo.diff(), BOUNDARY)
    again = PatchVerdict.model_validate_json(verdict.to_json())
    assert again == verdict
    data = json.loads(verdict.to_json())
    assert data["accepted"] is False
    assert data["reasons"][0]["code"] == "outside_boundary"


# ---------------------------------------------------------------------------------------------
# Boundary model, loading, profiles
# ---------------------------------------------------------------------------------------------


def test_glob_semantics() -> None:
    b = MutationBoundary(mutable_root="agent", allowed_paths=["**/*.md", "tools/*.sh"])
    assert b.allows("agent/a/b/c.md")
    assert b.allows("agent/c.md")
    assert b.allows("agent/tools/run.sh")
    assert not b.allows("agent/tools/sub/run.sh")
    assert not b.allows("agent/core.py")
    assert not b.allows("other/c.md")
    assert MutationBoundary(mutable_root="", allowed_paths=["."]).allows("anything/at/all")


def test_boundary_normalizes_and_round_trips(tmp_path: Path) -> None:
    b = MutationBoundary(
        mutable_root="./agent/", allowed_paths=["prompts/", "./core.py", "prompts"]
    )
    assert b.mutable_root == "agent"
    assert b.allowed_paths == ["prompts", "core.py"]
    path = tmp_path / "sum_boundary.json"
    path.write_text(b.to_json())
    assert load_boundary(path) == b
    assert json.loads(b.to_json())["allow_binary"] is False


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ('{"mutable_root": "agent", "allowed_paths": ["core.py"], "extra": 1}', "extra"),
        ('{"mutable_root": "agent", "allowed_paths": ["../bench"]}', "allowed_paths.0"),
        ('{"mutable_root": "/abs", "allowed_paths": ["."]}', "mutable_root"),
        ('{"mutable_root": "a*", "allowed_paths": ["."]}', "mutable_root"),
        ('{"mutable_root": "agent", "allowed_paths": []}', "allowed_paths"),
        ('{"allowed_paths": ["."], "max_patch_bytes": 0}', "max_patch_bytes"),
        ('{"allowed_paths": ["."], "allow_binary": "maybe"}', "allow_binary"),
    ],
)
def test_load_boundary_errors_name_file_and_field(tmp_path: Path, content: str, field: str) -> None:
    path = tmp_path / "boundary.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as err:
        load_boundary(path)
    assert err.value.file == str(path)
    assert err.value.field is not None and err.value.field.startswith(field.split(".")[0])
    assert str(path) in str(err.value)


def test_load_boundary_bad_json_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="invalid JSON") as err:
        load_boundary(bad)
    assert err.value.file == str(bad)
    with pytest.raises(ConfigError) as err:
        load_boundary(tmp_path / "missing.json")
    assert err.value.file == str(tmp_path / "missing.json")
    arr = tmp_path / "arr.json"
    arr.write_text("[]")
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        load_boundary(arr)


def test_boundary_from_profile() -> None:
    profile = SystemProfile(
        name="mini-swe-agent",
        command=["python", "-m", "agent"],
        mutable_root="agent",
        allowed_mutation_paths=["core.py", "prompts"],
    )
    b = boundary_from_profile(profile)
    assert (b.mutable_root, b.allowed_paths, b.allow_binary) == (
        "agent",
        ["core.py", "prompts"],
        False,
    )

    with pytest.raises(ConfigError) as err:
        boundary_from_profile(profile.model_copy(update={"mutable_root": None}))
    assert err.value.field == "mutable_root"
    with pytest.raises(ConfigError) as err:
        boundary_from_profile(profile.model_copy(update={"allowed_mutation_paths": []}))
    assert err.value.field == "allowed_mutation_paths"
    with pytest.raises(ConfigError) as err:
        boundary_from_profile(profile.model_copy(update={"allowed_mutation_paths": ["../x"]}))
    assert err.value.field == "allowed_mutation_paths"


# ---------------------------------------------------------------------------------------------
# narrow(): an experiment may narrow the boundary, never widen it
# ---------------------------------------------------------------------------------------------

BASE = MutationBoundary(
    mutable_root="agent",
    allowed_paths=["core.py", "prompts", "tools/*.sh"],
    allow_binary=True,
    max_patch_bytes=10_000,
)


def test_narrowing_is_accepted() -> None:
    override = MutationBoundary(
        mutable_root="agent/prompts",
        allowed_paths=["system.md", "extra"],
        allow_binary=False,
        allow_new_files=False,
        max_patch_bytes=5_000,
    )
    assert narrow(BASE, override) == override
    same = narrow(BASE, BASE.model_copy())
    assert same == BASE
    # equal glob, literal under a glob, sub-path of a glob
    narrow(BASE, {"allowed_paths": ["tools/*.sh", "tools/lint.sh", "prompts/**/*.md"]})


def test_partial_override_inherits_from_base() -> None:
    result = narrow(BASE, {"max_patch_bytes": 100})
    assert result.allowed_paths == BASE.allowed_paths and result.max_patch_bytes == 100
    deeper = narrow(BASE, {"mutable_root": "agent/prompts"})
    assert deeper.allowed_paths == ["."]
    assert deeper.allows("agent/prompts/x.md") and not deeper.allows("agent/core.py")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"allowed_paths": ["tools"]}, "allowed_paths"),  # parent of a glob
        ({"allowed_paths": ["tools/*"]}, "allowed_paths"),  # wider glob
        ({"allowed_paths": ["tools/a*.sh"]}, "allowed_paths"),  # contained, but not provably
        ({"allowed_paths": ["."]}, "allowed_paths"),
        ({"allowed_paths": ["other.py"]}, "allowed_paths"),
        ({"mutable_root": ".", "allowed_paths": ["agent/core.py"]}, "mutable_root"),
        ({"mutable_root": "bench"}, "mutable_root"),
        ({"max_patch_bytes": 20_000}, "max_patch_bytes"),
        ({"max_patch_bytes": None}, "max_patch_bytes"),
    ],
)
def test_widening_is_rejected(override: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        narrow(BASE, override, source="manifest.json")
    assert err.value.field == field
    assert err.value.file == "manifest.json"
    assert field in str(err.value)


@pytest.mark.parametrize("flag", ["allow_binary", "allow_new_files", "allow_deletions"])
def test_flags_can_only_be_turned_off(flag: str) -> None:
    base = BASE.model_copy(update={flag: False})
    with pytest.raises(ConfigError) as err:
        narrow(base, {flag: True})
    assert err.value.field == flag
    assert getattr(narrow(BASE, {flag: False}), flag) is False


def test_narrow_lists_every_widening() -> None:
    with pytest.raises(ConfigError) as err:
        narrow(
            BASE.model_copy(update={"allow_binary": False}),
            {"allow_binary": True, "max_patch_bytes": None},
        )
    assert err.value.field == "allow_binary"
    assert "max_patch_bytes" in str(err.value)


def test_narrow_rejects_invalid_override() -> None:
    with pytest.raises(ConfigError) as err:
        narrow(BASE, {"allowed_paths": ["../bench"]}, source="policy.json")
    assert err.value.field and err.value.field.startswith("allowed_paths")
    with pytest.raises(ConfigError) as err:
        narrow(BASE, {"bogus": 1})
    assert err.value.field == "bogus"


def test_narrowed_boundary_enforces_the_narrower_rule(repo: Repo) -> None:
    narrowed = narrow(BOUNDARY, {"mutable_root": "agent/prompts"})
    repo.write("agent/core.py", "def run():\n    return 2\n")
    assert check_patch(repo.diff(), BOUNDARY).accepted
    repo.write("agent/core.py", "def run():\n    return 2\n")
    assert codes(check_patch(repo.diff(), narrowed)) == {"outside_boundary"}


# ---------------------------------------------------------------------------------------------
# CLI helper
# ---------------------------------------------------------------------------------------------


def test_cli_accepts_and_rejects(repo: Repo, tmp_path: Path) -> None:
    boundary = tmp_path / "boundary.json"
    boundary.write_text(BOUNDARY.to_json())
    repo.write("agent/core.py", "def run():\n    return 2\n")
    good = tmp_path / "good.patch"
    good.write_text(repo.diff())
    out = io.StringIO()
    assert check_patch_cli(boundary, good, out=out) == 0
    assert out.getvalue().startswith("accepted: 1 file(s) changed")
    assert "modify: agent/core.py" in out.getvalue()

    bad = tmp_path / "bad.patch"
    bad.write_text(fixture("git_config.patch") + fixture("traversal.patch"))
    out = io.StringIO()
    assert check_patch_cli(boundary, bad, out=out) == 1
    lines = out.getvalue().splitlines()
    assert lines[0] == f"rejected: {len(lines) - 1} reason(s)"
    assert any(line.startswith("git_metadata: .git/config: ") for line in lines)
    assert any(line.startswith("path_traversal: ../escaped.txt: ") for line in lines)
    assert sum(line.startswith("outside_boundary: ") for line in lines) == 3


def test_cli_prints_to_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    boundary = tmp_path / "boundary.json"
    boundary.write_text(BOUNDARY.to_json())
    empty = tmp_path / "empty.patch"
    empty.write_text("")
    assert check_patch_cli(boundary, empty) == 1
    assert capsys.readouterr().out == "rejected: 1 reason(s)\nempty_patch: the patch is empty\n"


def test_cli_unreadable_files_are_config_errors(tmp_path: Path) -> None:
    boundary = tmp_path / "boundary.json"
    boundary.write_text(BOUNDARY.to_json())
    with pytest.raises(ConfigError) as err:
        check_patch_cli(boundary, tmp_path / "nope.patch")
    assert err.value.file == str(tmp_path / "nope.patch")
    with pytest.raises(ConfigError) as err:
        check_patch_cli(tmp_path / "nope.json", FIXTURES / "git_config.patch")
    assert err.value.file == str(tmp_path / "nope.json")
    with pytest.raises(ConfigError):
        check_patch_cli(boundary, tmp_path)  # a directory is not a patch


# ---------------------------------------------------------------------------------------------
# The parser reads what git reads
# ---------------------------------------------------------------------------------------------


def git_numstat_paths(repo: Repo, patch: str) -> list[str] | None:
    """The post-image names `git apply` reads from a patch (None if git cannot parse it)."""
    proc = repo.git("apply", "--numstat", "-z", "-", stdin=patch, check=False)
    if proc.returncode != 0:
        return None
    return [entry.split("\t", 2)[2] for entry in proc.stdout.split("\0") if entry]


def _real_patches(repo: Repo) -> list[str]:
    patches = []
    repo.write("agent/core.py", "def run():\n    return 2\n")
    repo.write("agent/prompts/naïve.md", "x\n")
    repo.write("agent/prompts/with space.md", "y\n")
    patches.append(repo.diff())
    repo.git("mv", "agent/prompts/system.md", "agent/prompts/base.md")
    (repo.root / "agent/tools/run.sh").chmod(0o755)
    patches.append(repo.diff("-M"))
    shutil.copy(repo.root / "agent/core.py", repo.root / "agent/prompts/core_copy.py")
    (repo.root / "agent/tools/run.sh").unlink()
    patches.append(repo.diff("-C", "--find-copies-harder"))
    repo.write("agent/assets/a.bin", bytes(range(200)))
    patches.append(repo.diff("--binary"))
    return patches


def test_parser_names_match_git_apply(repo: Repo) -> None:
    patches = _real_patches(repo)
    patches += [fixture(p.name) for p in sorted(FIXTURES.glob("*.patch"))]
    patches.append(repo.git("format-patch", "--root", "-1", "--stdout").stdout)
    for patch in patches:
        git_paths = git_numstat_paths(repo, patch)
        verdict = check_patch(patch, BINARY_OK)
        if git_paths is None:  # git cannot read it: neither may we accept it
            assert not verdict.accepted
            continue
        assert [f.path for f in verdict.files] == git_paths, patch


_INSERTS = [
    "diff --git a/bench/score.py b/bench/score.py",
    "--- a/bench/score.py",
    "+++ b/bench/score.py",
    "rename from agent/core.py",
    "rename to bench/core.py",
    "copy from bench/score.py",
    "copy to agent/prompts/s.py",
    "new mode 100755",
    "old mode 100644",
    "new file mode 120000",
    "deleted file mode 100644",
    "index 0000000..1111111 120000",
    "@@ -1 +1 @@",
    "@@ -0,0 +1 @@",
    "\\ No newline at end of file",
    "",
    "-    return 0",
    "+    return 100",
    " def score():",
    "Binary files a/x and b/x differ",
]


def _mutate(rng, patch: str) -> str:
    lines = patch.split("\n")
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(lines))
        op = rng.randrange(6)
        if op == 0:
            lines.insert(k, rng.choice(_INSERTS))
        elif op == 1 and len(lines) > 1:
            del lines[k]
        elif op == 2:
            lines.insert(k, lines[k])
        elif op == 3 and k + 1 < len(lines):
            lines[k], lines[k + 1] = lines[k + 1], lines[k]
        elif op == 4:
            lines[k] = lines[k].replace("agent/core.py", "bench/score.py")
        else:
            lines[k] = lines[k].replace("agent/prompts", "agent/prompts/../../bench")
    return "\n".join(lines)


def test_fuzz_accepted_patches_only_touch_the_boundary(repo: Repo) -> None:
    """Seeded fuzz. Whenever we accept a mutated patch and git applies it, every path git
    changed must be inside the boundary and nothing may have become a symlink."""
    import random

    rng = random.Random(20240611)
    seeds = _real_patches(repo) + [fixture("header_mismatch.patch"), fixture("traversal.patch")]
    accepted_and_applied = 0
    for _ in range(250):
        patch = _mutate(rng, rng.choice(seeds))
        verdict = check_patch(patch, BINARY_OK, worktree=repo.root)
        if not verdict.accepted:
            continue
        applied = repo.git("apply", "-p1", "-", stdin=patch, check=False)
        if applied.returncode == 0:
            accepted_and_applied += 1
            status = repo.git("status", "--porcelain=v1", "-z", "--untracked-files=all").stdout
            changed = [e[3:] for e in status.split("\0") if len(e) > 3 and e[2] == " "]
            for path in changed:
                assert BINARY_OK.allows(path), (path, patch)
                assert not (repo.root / path).is_symlink(), (path, patch)
        repo.git("reset", "-q", "--hard")
        repo.git("clean", "-fdq")
    assert accepted_and_applied > 10  # the fuzz did exercise the accept path


def test_huge_names_are_bounded() -> None:
    """A name with many spaces must not blow up the timestamp-reading expansion."""
    name = "agent/prompts/" + "x " * 200_000
    patch = f"--- a/{name}\n+++ b/{name}\n@@ -0,0 +1 @@\n+x\n"
    verdict = check_patch(patch, BOUNDARY)
    assert "malformed" in codes(verdict)
    header = f"diff --git a/{name} b/{name}\nnew file mode 100644\n"
    assert "malformed" in codes(check_patch(header, BOUNDARY))


def test_nul_in_quoted_name_with_worktree(repo: Repo) -> None:
    patch = (
        'diff --git "a/agent/prompts/a\\000b" "b/agent/prompts/a\\000b"\n'
        "new file mode 100644\n"
        "--- /dev/null\n"
        '+++ "b/agent/prompts/a\\000b"\n'
        "@@ -0,0 +1 @@\n"
        "+x\n"
    )
    assert codes(check_patch(patch, BOUNDARY, worktree=repo.root)) == {"unsafe_path"}
