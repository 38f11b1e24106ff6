"""Check 4: `tests/test.sh` must leave a reward in `/logs/verifier/`.

Harbor scores a trial by reading `/logs/verifier/reward.txt` (a number) or
`/logs/verifier/reward.json` after `tests/test.sh` has run. A verifier that never writes
either file gives every agent the same missing reward, so the task cannot tell a correct
solution from an empty one: an EVAL-MISMATCH (the evaluator does not measure what the task
asks), Bug, High.

Accepted ways to write the reward:

- a literal `/logs/verifier/reward.txt` / `reward.json` in a test.sh command, also through
  variables the script assigns itself (`LOGS=/logs/verifier; echo 1 > "$LOGS/reward.txt"`);
- a reward path built from a variable the script does not define (`$VERIFIER_LOGS/reward.txt`)
  or a relative one: it may well be right, so it is not reported;
- a helper in `tests/` that test.sh calls (by file name, or any `tests/*.py` when test.sh runs
  pytest, which loads conftest.py and the test modules) and that mentions the reward file,
  followed transitively;
- Harbor's Reward Kit (`rewardkit`), which writes `reward.json` itself.

A reward written only to some other absolute directory (`/tmp/reward.txt`) is reported too,
as Harbor never reads it.
"""

from __future__ import annotations

import re

from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.static.finding_builder import evidence_line, make_finding
from metaeval.protocols.audit.static.shell import parse_shell
from metaeval.protocols.audit.static.shell_script import ShellScript
from metaeval.protocols.audit.static.task_context import TaskContext

TEST_SH = "tests/test.sh"
REWARD_DIR = "/logs/verifier"
_REWARD = re.compile(r"reward\.(?:txt|json)\b")
_REWARD_TOKEN = re.compile(r"([^\s<>|;&(]*)reward\.(?:txt|json)\b")
_SETUP = re.compile(r"\binstall\b|\bcurl\b|\bwget\b|\bsource\b|^export\b|^set\b")
# What runs the tests, most specific first (cited when the reward is never written).
_RUNNERS = (
    re.compile(r"\bpytest\b"),
    re.compile(r"\bpython[\d.]*\s"),
    re.compile(r"(?:^|[\s;&|])(?:uvx|uv run|node|npm test|go test|cargo test|make|java)\b"),
    re.compile(r"(?:^|[\s;&|])(?:bash|sh)\s+\S"),
)


def check_reward_written(ctx: TaskContext) -> list[Finding]:
    test_sh = ctx.files.get(TEST_SH)
    if test_sh is None:  # a missing test.sh is reported by the task.toml/missing-files check
        return []
    script = ctx.shell_scripts.get(TEST_SH) or parse_shell(TEST_SH, ctx.lines(TEST_SH))
    wrong = _reward_targets(script)
    if wrong is None:
        return []
    helpers, uncertain = _helpers(ctx, script)
    for path in helpers:
        if _helper_writes_reward(ctx, path):
            return []
    if wrong:
        line, token = wrong[0]
        return [_wrong_place_finding(ctx, line, token)]
    return [_never_written_finding(ctx, script, test_sh.truncated or uncertain)]


def _reward_targets(script: ShellScript) -> list[tuple[int, str]] | None:
    """(line, resolved path) of each reward file test.sh writes outside /logs/verifier; None
    when it writes the reward where Harbor reads it (or in a way this check cannot follow:
    rewardkit, a variable, a relative path, a heredoc)."""
    wrong: list[tuple[int, str]] = []
    for command in script.commands:
        if "rewardkit" in command.text:
            return None
        if not _REWARD.search(command.text):
            continue
        expanded = script.expand(command.text)
        for match in _REWARD_TOKEN.finditer(expanded):
            token = match.group(0).replace('"', "").replace("'", "")
            if REWARD_DIR + "/" in token or "$" in token or not token.startswith("/"):
                return None
            wrong.append((command.line, token))
    for heredoc in script.heredocs:
        body = "\n".join(heredoc.body)
        if _REWARD.search(body) and (REWARD_DIR in body or heredoc.kind == "python"):
            return None
    return wrong


def _wrong_place_finding(ctx: TaskContext, line: int, token: str) -> Finding:
    return make_finding(
        ctx,
        subcategory="EVAL-MISMATCH",
        severity="High",
        finding_type="Bug",
        title=f"test.sh writes the reward to {token}, not to {REWARD_DIR}/",
        description=(
            f"tests/test.sh writes its reward to `{token}`, but Harbor reads the reward "
            f"only from `{REWARD_DIR}/reward.txt` or `{REWARD_DIR}/reward.json`. The "
            "score the verifier computes is lost, so every trial gets the same missing "
            "reward and correct and incorrect agents are judged alike."
        ),
        recommendation=(
            f"Write the reward to `{REWARD_DIR}/reward.txt` (e.g. `echo 1 > "
            f"{REWARD_DIR}/reward.txt` on success, `echo 0` otherwise)."
        ),
        confidence=0.85,
        evidence=[evidence_line(ctx, TEST_SH, line)],
    )


def _never_written_finding(ctx: TaskContext, script: ShellScript, truncated: bool) -> Finding:
    """test.sh writes no reward; `truncated`: part of the verifier was not seen."""
    cite = _runner_line(script, ctx.lines(TEST_SH))
    return make_finding(
        ctx,
        subcategory="EVAL-MISMATCH",
        severity="High",
        finding_type="Bug" if not truncated else "Warning",
        title="test.sh never writes /logs/verifier/reward.txt or reward.json",
        description=(
            "tests/test.sh runs the checks but neither it nor any helper it calls writes "
            f"`{REWARD_DIR}/reward.txt` or `{REWARD_DIR}/reward.json`, the only places "
            "Harbor reads a score from. The outcome of the tests never reaches the "
            "harness, so a correct agent and an empty attempt get the same (missing) "
            "reward."
            + (
                " Part of the verifier was not available to this check (truncated or "
                "unloaded helper), so the reward may be written there."
                if truncated
                else ""
            )
        ),
        recommendation=(
            "After the test run, write the result: e.g. `if [ $? -eq 0 ]; then echo 1 > "
            f"{REWARD_DIR}/reward.txt; else echo 0 > {REWARD_DIR}/reward.txt; fi`."
        ),
        confidence=0.9 if not truncated else 0.45,
        evidence=[evidence_line(ctx, TEST_SH, cite)] if cite else [Evidence(file=TEST_SH)],
    )


def _helpers(ctx: TaskContext, script: ShellScript) -> tuple[list[str], bool]:
    """tests/ files that test.sh calls, transitively; and whether a called file is missing."""
    tests_files = {p: f for p, f in ctx.files.items() if p.startswith("tests/") and p != TEST_SH}
    by_name: dict[str, list[str]] = {}
    for path in tests_files:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    found: list[str] = []
    uncertain = False
    queue: list[str] = [TEST_SH]
    seen = {TEST_SH}
    while queue:
        current = queue.pop(0)
        text = ctx.files[current].text if current in ctx.files else ""
        if current == TEST_SH:
            text = "\n".join(c.text for c in script.commands)
            if re.search(r"\bpytest\b", text):
                for path in tests_files:
                    if path.endswith(".py") and path not in seen:
                        seen.add(path)
                        found.append(path)
                        queue.append(path)
        for name, paths in by_name.items():
            if name in text and re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text):
                for path in paths:
                    if path not in seen:
                        seen.add(path)
                        found.append(path)
                        queue.append(path)
        if current == TEST_SH:
            for ref in re.findall(r"/tests/([\w./-]+\.(?:py|sh|bash))\b", text):
                if (
                    ref.rsplit("/", 1)[-1] not in by_name
                    and ref.rsplit("/", 1)[-1] not in ctx.task_basenames
                ):
                    uncertain = True
    uncertain = uncertain or any(ctx.files[p].truncated for p in found)
    return found, uncertain


def _helper_writes_reward(ctx: TaskContext, path: str) -> bool:
    f = ctx.files[path]
    if not _REWARD.search(f.text):
        return False
    if ctx.is_python(f):
        sources = [s for s in ctx.python_sources if s.file == path]
        if not sources:
            return True  # unparsable: trust the text
        return any(_REWARD.search(v) for s in sources for _, v in s.strings(fstring_parts=True))
    script = ctx.shell_scripts.get(path)
    if script is not None:
        return any(_REWARD.search(c.text) for c in script.commands) or any(
            _REWARD.search("\n".join(h.body)) for h in script.heredocs
        )
    return True


def _runner_line(script: ShellScript, lines: list[str]) -> int | None:
    """The line that runs the tests (to cite), else the last command line."""
    commands = [c for c in script.commands if not _SETUP.search(c.text)]
    for runner in _RUNNERS:
        for command in commands:
            if runner.search(command.text):
                for number in range(command.line, min(command.end, len(lines)) + 1):
                    if runner.search(lines[number - 1]):
                        return number
                return command.line
    if script.commands:
        return script.commands[-1].line
    return next((i + 1 for i, line in enumerate(lines) if line.strip()), None)
