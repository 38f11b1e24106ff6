"""Population search in improve (issue 41): policies, merge, rounds, final pick on held-out.

The end-to-end tests run the synthetic landscape of tests/search_landscape.py for real (git,
bubblewrap, the toolloop target): four optimize tasks, patch A fixes two, patch B the other
two, and the patches do not apply on top of each other but merge cleanly.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.improve.boundary import MutationBoundary
from metaeval.protocols.improve.bundle import summary_text
from metaeval.protocols.improve.gitops import CONTEXT_DIR, add_worktree, commit_candidate
from metaeval.protocols.improve.proposal import take_patch
from metaeval.protocols.improve.records import MetaOutput
from metaeval.protocols.improve.resolve import resolve_manifest
from metaeval.protocols.improve.run import run_experiment
from metaeval.protocols.improve.search.archive import archive_weights
from metaeval.protocols.improve.search.final_pick import final_pick
from metaeval.protocols.improve.search.merge import (
    MergeConflict,
    merge_into,
    named_second_parent,
)
from metaeval.protocols.improve.search.pareto import pareto_front
from metaeval.protocols.improve.search.policy import choose_parent
from metaeval.protocols.improve.search.population import Node
from metaeval.protocols.improve.search.rounds import rounds
from metaeval.protocols.improve.search.summary import search_items, with_search
from metaeval.protocols.improve.summary_records import RunSummary

sys.path.insert(0, str(Path(__file__).parent))
from search_landscape import LandscapeMetaAgent, landscape  # noqa: E402


def node(
    id: str,
    passed: tuple[str, ...] = (),
    score: float | None = None,
    held: float | None = None,
    parents: tuple[str, ...] = ("baseline",),
    valid: bool = True,
) -> Node:
    return Node(
        id=id,
        commit="c" * 40,
        optimize_score=len(passed) / 4 if score is None else score,
        held_out_score=held,
        trial=None if id == "baseline" else int(id[-1]),
        parents=() if id == "baseline" else parents,
        decision="baseline" if id == "baseline" else "promoted",
        valid=valid,
        passed=frozenset(passed),
    )


# --- the policies, by hand ---------------------------------------------------------------------


def test_pareto_front_keeps_each_half_and_drops_dominated_nodes():
    nodes = [
        node("baseline"),
        node("trial-1", ("t1", "t2")),
        node("trial-2", ("t3", "t4")),
        node("trial-3", ("t1",)),  # dominated by trial-1
        node("trial-4", ("t1", "t2", "t3", "t4"), valid=False),  # invalid: never on the front
    ]
    # t1: trial-1, trial-3; t2: trial-1; t3, t4: trial-2 -> trial-3 dominated by trial-1
    assert pareto_front(nodes) == {"trial-1": 2, "trial-2": 2}
    merged = [*nodes, node("trial-5", ("t1", "t2", "t3", "t4"))]
    assert pareto_front(merged) == {"trial-5": 4}
    assert pareto_front([node("baseline"), node("trial-1")]) == {"baseline": 1, "trial-1": 1}


def test_archive_weights_are_sigmoid_score_over_one_plus_children():
    nodes = [
        node("baseline", score=0.0),
        node("trial-1", score=0.5),
        node("trial-2", score=0.75, parents=("trial-1",)),
        node("trial-3", score=0.0, parents=("trial-1",), valid=False),
    ]
    weights = archive_weights(nodes)
    # baseline: 1 child, score 0; trial-1: 2 children (trial-2 and the invalid trial-3)
    assert weights["baseline"] == pytest.approx(1 / (1 + math.exp(5)) / 2)
    assert weights["trial-1"] == pytest.approx(0.5 / 3)
    assert weights["trial-2"] == pytest.approx(1 / (1 + math.exp(-2.5)))
    assert "trial-3" not in weights


def test_a_seeded_parent_choice_replays_and_records_its_pool():
    nodes = [node("baseline"), node("trial-1", ("t1", "t2")), node("trial-2", ("t3", "t4"))]
    picks = {choose_parent("pareto", nodes, trial, 7).parent_id for trial in range(3, 40)}
    assert picks == {"trial-1", "trial-2"}  # both halves are drawn, the baseline never
    first = choose_parent("archive", nodes, 5, 7)
    assert first == choose_parent("archive", nodes, 5, 7)
    assert first.pool == archive_weights(nodes) and first.seed == 7
    recursive = choose_parent("recursive", nodes, 3, 7)
    assert recursive.parent_id == "trial-2" and recursive.pool == {"trial-2": 1.0}


def test_the_final_pick_is_made_on_held_out_scores():
    nodes = [
        node("baseline", held=0.0),
        node("trial-1", ("t1", "t2", "t3"), held=0.2),  # best on optimize, overfits
        node("trial-2", ("t4",), held=0.8),
    ]
    pick = final_pick("archive", 3, nodes, held_out=True)
    assert pick.picked == "trial-2" and pick.on == "held_out"
    assert [c.id for c in pick.contenders] == ["baseline", "trial-1", "trial-2"]
    assert final_pick("archive", 3, nodes, held_out=False).picked == "trial-1"
    # the front holds trial-1 and trial-2 only; held-out decides between them
    assert final_pick("pareto", 3, nodes, held_out=True).picked == "trial-2"


def test_rounds_are_fixed_by_trial_numbers_so_a_resume_rebuilds_them():
    assert list(rounds([1, 2, 3, 4, 5], 2)) == [(1, [1, 2]), (3, [3, 4]), (5, [5])]
    assert list(rounds([2, 4, 5], 2)) == [(1, [2]), (3, [4]), (5, [5])]
    assert list(rounds([3, 4], 1)) == [(3, [3]), (4, [4])]


def test_an_unknown_policy_is_an_error_naming_the_file_and_field(tmp_path):
    manifest = landscape(tmp_path, "genetic")
    with pytest.raises(ConfigError) as error:
        resolve_manifest(manifest)
    assert str(manifest) in str(error.value) and "search.policy" in str(error.value)


def test_resuming_under_another_search_policy_is_refused(tmp_path):
    from metaeval.errors import RecordIntegrityError
    from metaeval.protocols.improve.bundle import _refuse_changed_contract
    from metaeval.protocols.improve.plan import build_plan

    plan, _ = build_plan(landscape(tmp_path, "pareto"))
    resolved = plan.documents["resolved_manifest.json"]
    assert resolved["search"] == {
        "policy": "pareto",
        "proposals_per_round": 2,
        "seed": 41,  # the manifest's seed
        "workers": None,
    }
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    recursive = {k: v for k, v in resolved.items() if k != "search"}
    (bundle / "resolved_manifest.json").write_text(json.dumps(recursive))
    with pytest.raises(RecordIntegrityError, match="search policy changed"):
        _refuse_changed_contract(bundle, resolved)
    _refuse_changed_contract(bundle, recursive)  # the same contract resumes


def test_the_summary_takes_the_final_pick_and_refuses_a_planted_file(tmp_path):
    summary = RunSummary.model_validate(
        {
            "baseline": {"id": "baseline", "optimize_score": 0.25, "held_out_score": 0.5},
            "final": {"id": "trial-001"},
        }
    )
    pick = final_pick(
        "archive", 3, [node("baseline", held=0.5), node("trial-1", ("t1",), held=0.75)], True
    )
    (tmp_path / "final_selection.json").write_text(pick.model_dump_json())
    taken = with_search(tmp_path, summary, [], lambda a, b: round(a - b, 6))
    written = taken.model_dump()
    assert written["final"]["id"] == "trial-1" and written["final"]["gain_held_out"] == 0.25
    assert written["search"]["policy"] == "archive" and "notes" not in written["search"]
    (tmp_path / "final_selection.json").unlink()
    (tmp_path / "elsewhere.json").write_text(pick.model_dump_json())
    (tmp_path / "final_selection.json").symlink_to(tmp_path / "elsewhere.json")
    refused = with_search(tmp_path, summary, [], lambda a, b: round(a - b, 6))
    # unchanged: the link is not followed; the search section holds only the note
    assert refused.final == summary.final
    assert list(refused.model_dump()["search"]) == ["notes"]
    assert refused.search is not None and refused.search.notes
    assert refused.search.notes[0].startswith("final_selection.json not read")
    # the report's summary says the policy is not known and why, not that it was recursive
    (policy,) = [text for label, text in search_items(refused) if label == "Search policy"]
    assert policy.startswith("not known (final_selection.json not read")
    assert [text for label, text in search_items(taken) if label == "Search policy"] == [
        "archive (seed 3), final picked on held-out scores"
    ]


# --- merge, with real git -----------------------------------------------------------------------


def _repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repository whose base has ten lines and three branches: line 2 changed (a), line 8
    changed (b), line 2 changed otherwise (c, which conflicts with a)."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    git("init", "-q")
    lines = [f"line {n}\n" for n in range(1, 11)]
    (repo / "f.txt").write_text("".join(lines))
    git("add", "f.txt")
    git("commit", "-qm", "base")
    commits = {"base": git("rev-parse", "HEAD")}
    for name, index, text in (("a", 1, "two\n"), ("b", 7, "eight\n"), ("c", 1, "TWO\n")):
        git("checkout", "-q", "--detach", commits["base"])
        changed = list(lines)
        changed[index] = text
        (repo / "f.txt").write_text("".join(changed))
        git("commit", "-qam", name)
        commits[name] = git("rev-parse", "HEAD")
    return repo, commits


def test_a_merge_is_the_three_way_merge_of_both_parents_plus_the_edits(tmp_path):
    repo, commits = _repo(tmp_path)
    tree = add_worktree(repo, tmp_path / "wt", commits["a"])
    (tree.path / "g.txt").write_text("an edit of the meta-agent\n")
    merge_into(repo, tree, commits["a"], commits["b"])
    text = (tree.path / "f.txt").read_text()
    assert "two\n" in text and "eight\n" in text and "line 5\n" in text
    assert (tree.path / "g.txt").read_text() == "an edit of the meta-agent\n"
    message = "merge"
    sha = commit_candidate(repo, tree, message, "refs/test/merge")
    parents = subprocess.run(
        ["git", "rev-list", "--parents", "-n1", sha], cwd=repo, capture_output=True, text=True
    ).stdout.split()[1:]
    assert parents == [commits["a"], commits["b"]]


def test_conflicting_parents_are_an_invalid_proposal_naming_the_conflict(tmp_path):
    repo, commits = _repo(tmp_path)
    tree = add_worktree(repo, tmp_path / "wt", commits["a"])
    with pytest.raises(MergeConflict, match="f.txt"):
        merge_into(repo, tree, commits["a"], commits["c"])
    tree = add_worktree(repo, tmp_path / "wt2", commits["a"])
    boundary = MutationBoundary(mutable_root=".", allowed_paths=["."])
    output = MetaOutput(status="ok", summary="merge", second_parent="c")
    got = take_patch(
        output, tree, "a", boundary, lambda: merge_into(repo, tree, commits["a"], commits["c"])
    )
    assert [r.code for r in got.reasons] == ["merge_conflict"]
    assert got.verdict is None


# --- the landscape, end to end ------------------------------------------------------------------


def ledger(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "trial_ledger.jsonl").read_text().splitlines()]


def run(tmp_path: Path, policy: str, **search) -> tuple[Path, LandscapeMetaAgent]:
    manifest = landscape(tmp_path, policy, **search)
    agent = LandscapeMetaAgent(tmp_path / "target")
    run_experiment(manifest, meta_agent=agent)
    return tmp_path / "bundle", agent


@pytest.mark.bwrap
def test_recursive_stalls_on_one_half(tmp_path):
    bundle, _ = run(tmp_path, "recursive")
    entries = ledger(bundle)
    # round 1 from the baseline: each patch fixes 2 of 4 tasks; round 2 from trial-002 (the
    # last promoted): the known patches no longer apply there
    assert [(e["parent_id"], e["decision"]) for e in entries] == [
        ("baseline", "promoted"),
        ("baseline", "promoted"),
        ("trial-002", "invalid"),
        ("trial-002", "invalid"),
    ]
    assert [e["optimize_score"] for e in entries] == [2 / 4, 2 / 4, None, None]
    codes = [
        [
            r["code"]
            for r in json.loads((bundle / "trials" / t / "selection_decision.json").read_text())[
                "reasons"
            ]
        ]
        for t in ("003", "004")
    ]
    # trial 3: patch A does not apply on B; trial 4: a merge the recursive policy never offers
    assert codes[0] == ["malformed_patch"] and codes[1][0] == "second_parent_not_offered"
    summary = json.loads((bundle / "lineage_summary.json").read_text())["summary"]
    assert summary["final"]["id"] == "trial-002" and summary["final"]["optimize_score"] == 0.5
    assert "search" not in summary  # recursive: no final pick of its own
    card = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", (bundle / "report.html").read_text()))
    assert card["Search policy"].startswith("recursive: every trial patches the active parent")
    assert not [label for label in card if label.startswith("Promoted ")]


@pytest.mark.bwrap
@pytest.mark.parametrize("policy", ["pareto", "archive"])
def test_population_policies_keep_both_halves_and_a_merge_reaches_the_full_score(tmp_path, policy):
    bundle, _ = run(tmp_path, policy)
    entries = ledger(bundle)
    assert [e["optimize_score"] for e in entries[:2]] == [2 / 4, 2 / 4]
    merges = entries[2:]
    for entry in merges:  # each round-2 trial merged one half with the other
        assert {entry["parent_id"], entry["second_parent_id"]} == {"trial-001", "trial-002"}
        assert entry["decision"] == "promoted" and entry["optimize_score"] == 4 / 4
        choice = json.loads(
            (bundle / "trials" / f"{entry['trial']:03d}" / "parent_choice.json").read_text()
        )
        assert choice["policy"] == policy and choice["seed"] == 41
        if policy == "pareto":  # each half is best on its two tasks; the baseline dominated
            assert choice["pool"] == {"trial-001": 2.0, "trial-002": 2.0}
        else:  # sigmoid(10 * (score - 0.5)) / (1 + children): the baseline has two children
            assert choice["pool"] == pytest.approx(
                {"baseline": 1 / (1 + math.exp(5)) / 3, "trial-001": 0.5, "trial-002": 0.5}
            )
    commit = merges[0]["candidate_commit"]
    parents = subprocess.run(
        ["git", "rev-list", "--parents", "-n1", commit],
        cwd=tmp_path / "target",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1:]
    by_id = {e["candidate_id"]: e["candidate_commit"] for e in entries}
    assert sorted(parents) == sorted([by_id["trial-001"], by_id["trial-002"]])
    selection = json.loads((bundle / "final_selection.json").read_text())
    assert selection["on"] == "held_out" and selection["picked"] == "trial-003"
    summary = json.loads((bundle / "lineage_summary.json").read_text())["summary"]
    assert summary["final"]["id"] == "trial-003" and summary["final"]["optimize_score"] == 1.0
    assert summary["search"]["policy"] == policy
    text = summary_text(RunSummary.model_validate(summary))
    assert f"{policy} search, final picked on held-out scores" in text
    assert [p["merge"] for p in summary["search"]["promoted"]] == [False, False, True, True]
    html = (bundle / "report.html").read_text()
    assert html.count('class="edge merge"') == 2
    # the summary card: the policy, and how each promoted node's parents were chosen
    card = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", html))
    assert card["Search policy"] == f"{policy} (seed 41), final picked on held-out scores"
    assert "picked by highest held-out score among the" in card["Final candidate"]
    for entry in entries:
        folder = bundle / "trials" / f"{entry['trial']:03d}"
        rule = json.loads((folder / "parent_choice.json").read_text())["rule"]
        second = entry.get("second_parent_id")
        how = f"merge of {entry['parent_id']} and {second}" if second else "from baseline"
        assert card[f"Promoted {entry['candidate_id']}"] == f"{how}; parent {rule}"
    nodes = json.loads((bundle / "lineage_summary.json").read_text())["nodes"]
    assert [n.get("second_parent") for n in nodes[3:]] == [
        ({"trial-001", "trial-002"} - {e["parent_id"]}).pop() for e in merges
    ]
    # the one lineage chart (report and viewer): a dashed edge from each merge's other parent
    dashed = re.findall(r'class="edge merge" data-parent="([^"]+)" data-child="([^"]+)"', html)
    assert sorted(dashed) == sorted((n["second_parent"], n["id"]) for n in nodes[3:])


@pytest.mark.bwrap
def test_a_lane_that_only_edits_names_the_second_parent_in_a_file(tmp_path):
    manifest = landscape(tmp_path, "pareto")
    run_experiment(manifest, meta_agent=LandscapeMetaAgent(tmp_path / "target", by_file=True))
    entries = ledger(tmp_path / "bundle")
    assert [e["optimize_score"] for e in entries] == [0.5, 0.5, 1.0, 1.0]
    trial = tmp_path / "bundle" / "trials" / "003"
    output = json.loads((trial / "optimizer_output.json").read_text())
    assert output["second_parent"] == entries[2]["second_parent_id"]
    assert "second_parent" not in (trial / "candidate.patch").read_text()
    given = json.loads((trial / "optimizer_input.json").read_text())
    assert [m["id"] for m in given["population"]] == ["baseline", "trial-001", "trial-002"]
    assert all("held_out_score" not in m for m in given["population"])


def test_a_second_parent_file_is_read_only_when_it_is_a_small_regular_file(tmp_path):
    context = tmp_path / CONTEXT_DIR
    context.mkdir()
    assert named_second_parent(tmp_path) is None
    (context / "elsewhere").write_text("trial-002\n")
    (context / "second_parent").symlink_to(context / "elsewhere")
    assert named_second_parent(tmp_path) is None  # a link is not followed
    (context / "second_parent").unlink()
    (context / "second_parent").write_text("  trial-002 \nmore\n")
    assert named_second_parent(tmp_path) == "trial-002"
    (context / "second_parent").write_text("x" * 500)
    assert named_second_parent(tmp_path) is None


def comparable(entries: list[dict]) -> list[dict]:
    """A ledger without what differs between two runs of the same search: commit ids (their
    dates) and wall-clock times."""
    drop = {"candidate_commit", "wall_clock_s"}
    return [{k: v for k, v in e.items() if k not in drop} for e in entries]


@pytest.mark.bwrap
def test_parallel_proposals_give_the_sequential_ledger(tmp_path):
    parallel, _ = run(tmp_path / "parallel", "archive", workers=2)
    sequential, _ = run(tmp_path / "sequential", "archive", workers=1)
    assert comparable(ledger(parallel)) == comparable(ledger(sequential))
    for trial in ("003", "004"):
        choices = [
            json.loads((b / "trials" / trial / "parent_choice.json").read_text())
            for b in (parallel, sequential)
        ]
        assert choices[0] == choices[1]


KILLED = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from search_landscape import LandscapeMetaAgent
from metaeval.protocols.improve.run import run_experiment
tmp = Path(sys.argv[1])
run_experiment(tmp / "manifest.json", meta_agent=LandscapeMetaAgent(tmp / "target", block_trial=4))
"""


@pytest.mark.bwrap
def test_a_run_killed_mid_round_resumes_without_rerunning_a_finished_trial(tmp_path):
    manifest = landscape(tmp_path, "pareto")
    # the blocked trial 4 must not end by its meta-agent's time limit before the kill (on a
    # busy machine trial 3 took longer than the landscape's 60 s)
    data = json.loads(manifest.read_text())
    data["sut"]["timeout_s"] = 1200
    manifest.write_text(json.dumps(data))
    bundle = tmp_path / "bundle"
    log = tmp_path / "killed.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED, str(tmp_path), str(Path(__file__).parent)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    finished = bundle / "trials" / "003" / "trial_result.json"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None and not finished.exists():
        time.sleep(0.05)
    assert proc.poll() is None, log.read_text()[-3000:]  # still waiting on trial 4
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert finished.exists(), "trial 3 should finish while trial 4 waits"
    kept = finished.read_bytes()
    assert len(ledger(bundle)) == 2  # round 2 is not in the ledger yet
    agent = LandscapeMetaAgent(tmp_path / "target")
    run_experiment(tmp_path / "manifest.json", meta_agent=agent)
    assert agent.calls == [4]  # trial 3 was adopted, not proposed or evaluated again
    assert finished.read_bytes() == kept
    entries = ledger(bundle)
    assert [e["trial"] for e in entries] == [1, 2, 3, 4]
    assert [e["optimize_score"] for e in entries] == [0.5, 0.5, 1.0, 1.0]
