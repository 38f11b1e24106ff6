"""BenchGuard's two headline experiments as replay data, written from the paper's tables.

Five auditor models, each replayed by its own OpenAI-compatible server on 127.0.0.1 (the
`OpenAIStub`: the documented Chat Completions wire format), and one judge server that answers
each (gold issue, finding) pair with the verdict the paper's tables give it. Nothing here is
produced by metaeval: the findings and verdicts come from the tables below.

ScienceAgentBench (Table 5, execution level): which model found which of the 12 defects,
exactly (A), partially (P) or not at all (-). Our text copy of the paper keeps each row's
partial marks but not their columns, nor the columns of the misses; the assignment below keeps
every row's count of partials, Table 2's per-model counts (Recall_A, Recall_A+P), and every
defect found exactly by at least one model (Table 2's ensemble, 100%). Find. and flagged-task
precision per model are Table 2's too: the extra findings repeat a model's match on a defect
it found, or are unrelated.

BixBench Verified-50 (Table 3, Appendix G): the paper gives per-model recall and the pooled
agreement counts, not the per-issue marks. The matrix below is one assignment that has exactly
those counts (per model Recall_A and Recall_A+P; union 20, >=2 15, >=3 11 exact; union 23,
>=2 23, >=3 21 with partials), with the constraints the text states: bix-54-q7's "frequency
ratio" missed by all, bix-32-q2 never exact, bix-11-q1 a partial match at best (Case 5), and
bix-22-q4, bix-31-q2 and bix-49-q4 found exactly by three models or more.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODELS = (  # the paper's five, served under these names by the replay servers
    "openai/gemini-3.0-flash",
    "openai/gemini-3.1-pro",
    "openai/gpt-5.4",
    "openai/claude-opus-4.6",
    "openai/claude-sonnet-4.6",
)
GEMINI_TEMPERATURE = 1.0  # Section 4: Gemini models do not take 0.0

# Table 5 (execution level); columns: Flash, Pro, GPT-5.4, Opus 4.6, Sonnet 4.6
SAB_MARKS = {
    "sab_9": "AAAA-",
    "sab_12": "AAAAA",
    "sab_21": "AA-AA",
    "sab_26": "PPAAA",
    "sab_29": "AAAAA",
    "sab_31": "PPAAA",
    "sab_32": "AAAPA",
    "sab_34": "-AAAA",
    "sab_35": "A-AAA",
    "sab_67": "AAAAP",
    "sab_78": "A-AAA",
    "sab_92": "PPPAA",
}
# Table 2, + agent programs: Find. and flagged-task precision (aligned or partial findings)
SAB_FIND = (46, 27, 45, 37, 39)
SAB_PRECISE = (23, 19, 27, 25, 23)  # 50.0, 70.4, 60.0, 67.6, 59.0 percent of Find.

# Table 2, definition-only: the paper gives per-model counts only (Recall_A 7, 7, 7, 10, 7 of
# 12; Recall_A+P 9, 9, 9, 11, 11; the ensemble 11 exact, 12 with partials). One assignment with
# exactly those counts; sab_92 is the defect no model finds exactly at this level.
SAB_DEF_MARKS = {
    "sab_9": "AAAAA",
    "sab_12": "AAAAA",
    "sab_21": "AA-AP",
    "sab_26": "P-AAP",
    "sab_29": "AAAAA",
    "sab_31": "-PPAA",
    "sab_32": "AA-AA",
    "sab_34": "-AAAP",
    "sab_35": "A-AAA",
    "sab_67": "PAAAA",
    "sab_78": "A-P--",
    "sab_92": "-P-PP",
}
SAB_DEF_FIND = (34, 19, 34, 31, 27)
SAB_DEF_PRECISE = (14, 11, 16, 18, 14)  # 41.2, 57.9, 47.1, 58.1, 51.9 percent of Find.
SAB_TASKS = 102  # sab_1 .. sab_102, the Harbor adapter's ids

# BixBench: one row per gold issue, in the gold file's order (task, then issue id a, b, c)
BIX_MARKS = [
    ("bix-6-q4", "a", "P-A-P"),
    ("bix-11-q1", "a", "PPPPP"),
    ("bix-14-q1", "a", "PA-PA"),
    ("bix-20-q3", "a", "AAAA-"),
    ("bix-20-q3", "b", "A-AAA"),
    ("bix-22-q4", "a", "AAAAP"),
    ("bix-26-q5", "a", "A-A--"),
    ("bix-27-q5", "a", "P-PP-"),
    ("bix-28-q3", "a", "PPPPA"),
    ("bix-31-q2", "a", "A-AAP"),
    ("bix-31-q2", "b", "PAPP-"),
    ("bix-31-q2", "c", "P-PA-"),
    ("bix-32-q2", "a", "P-P--"),
    ("bix-43-q2", "a", "PAPAA"),
    ("bix-43-q2", "b", "APAAA"),
    ("bix-43-q4", "a", "AAAAP"),
    ("bix-49-q4", "a", "A--AA"),
    ("bix-52-q2", "a", "AAAA-"),
    ("bix-52-q2", "b", "PPA-A"),
    ("bix-52-q7", "a", "APPP-"),
    ("bix-54-q7", "a", "PAPAP"),
    ("bix-54-q7", "b", "-----"),
    ("bix-54-q7", "c", "PAAAA"),
    ("bix-61-q2", "a", "A-AA-"),
]
# Table 3's precision over the 17 revised tasks and Find. over all 50, per model: (findings
# aligned with an issue, aligned or partial, findings on the revised tasks, all findings).
# The paper prints percentages; these are the smallest counts that give them with the recall
# above (Flash 12/36 = 33.3 and 30/36 = 83.3; Pro 16/34, 26/34; GPT 20/86, 48/86; Opus 24/62,
# 42/62; Sonnet 7/30, 18/30, its one finding on bix-43-q2 aligned with both issues).
BIX_PRECISION = (
    (12, 30, 36, 114),
    (16, 26, 34, 43),
    (20, 48, 86, 102),
    (24, 42, 62, 66),
    (7, 18, 30, 58),
)
SONNET = 4
# Table 6: findings per subcategory, columns as MODELS
TABLE6 = {
    "GT-LOGIC": (21, 3, 19, 3, 7),
    "GT-DATA": (1, 0, 2, 0, 0),
    "EVAL-COVERAGE": (0, 2, 23, 3, 8),
    "EVAL-MISMATCH": (9, 2, 6, 0, 1),
    "EVAL-JUDGE-BIAS": (0, 0, 7, 0, 0),
    "EVAL-TOLERANCE": (5, 1, 1, 3, 0),
    "EVAL-STOCHASTIC": (0, 0, 6, 20, 10),
    "INST-INCOMPLETE": (78, 33, 33, 34, 31),
    "INST-CONTRADICT": (0, 2, 5, 3, 1),
}
# the 33 unrevised tasks of the 50 stand in under made-up ids of the same shape
BIX_CLEAN = [f"bix-{100 + n}-q1" for n in range(33)]

VERDICT = {"A": "ALIGNED", "P": "PARTIAL"}


@dataclass
class Replay:
    """What the servers answer: each model's findings per task, and each pair's verdict."""

    findings: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    verdicts: dict[tuple[str, str], str] = field(default_factory=dict)  # (issue, title)

    def add(
        self,
        model: str,
        task: str,
        title: str,
        matches: dict[str, str],
        subcategory: str = "INST-INCOMPLETE",
    ) -> None:
        """A finding of `model` on `task`; `matches`: gold description -> verdict."""
        self.findings.setdefault(model, {}).setdefault(task, []).append(
            {
                "category": subcategory.split("-")[0],
                "subcategory": subcategory,
                "severity": "High",
                "finding_type": "Warning",
                "title": title,
                "description": f"{title}: replayed from the paper's tables.",
                "evidence": [],
                "recommendation": "Clarify the instruction.",
                "confidence": 0.8,
            }
        )
        for description, verdict in matches.items():
            self.verdicts[(description, title)] = verdict

    def auditor(self, model: str):  # noqa: ANN201 - a reply function for OpenAIStub
        mine = self.findings.get(model, {})

        def reply(messages: list[dict[str, Any]]) -> str:
            user = str(messages[-1]["content"])
            match = re.search(r"^Task ID: (\S+)", user, re.MULTILINE)
            task = match.group(1) if match else ""
            return json.dumps(mine.get(task, []))

        return reply

    def judge(self):  # noqa: ANN201
        def reply(messages: list[dict[str, Any]]) -> str:
            user = str(messages[-1]["content"])
            issue = re.search(r"^Issue: (.*)$", user, re.MULTILINE)
            title = re.search(r"^Title: (.*)$", user, re.MULTILINE)
            key = (issue.group(1) if issue else "", title.group(1) if title else "")
            verdict = self.verdicts.get(key, "UNRELATED")
            return json.dumps({"verdict": verdict, "reasoning": "replayed"})

        return reply


def gold_descriptions(gold_path: Path) -> dict[tuple[str, str], str]:
    """(task, issue id) -> description, from a shipped gold file."""
    data = json.loads(gold_path.read_text())
    return {
        (task, issue["id"]): issue["description"]
        for task, body in data["tasks"].items()
        for issue in body["issues"]
    }


def sab_replay(gold_path: Path, *, definition: bool = False) -> Replay:
    """Table 5's marks (or the definition-only ones) and Table 2's Find. and precision, as
    findings and verdicts."""
    gold = gold_descriptions(gold_path)
    table = SAB_DEF_MARKS if definition else SAB_MARKS
    find = SAB_DEF_FIND if definition else SAB_FIND
    precise = SAB_DEF_PRECISE if definition else SAB_PRECISE
    replay = Replay()
    for m, model in enumerate(MODELS):
        hits = [(t, marks[m]) for t, marks in table.items() if marks[m] != "-"]
        n = 0
        for task, mark in hits:  # one finding per defect found
            n += 1
            replay.add(model, task, f"{model} {task} #{n}", {gold[(task, "a")]: VERDICT[mark]})
        for i in range(precise[m] - len(hits)):  # more findings on the same defects
            task, mark = hits[i % len(hits)]
            n += 1
            replay.add(model, task, f"{model} {task} #{n}", {gold[(task, "a")]: VERDICT[mark]})
        tasks = list(table)
        for i in range(find[m] - precise[m]):  # unrelated findings on defective tasks
            task = tasks[i % len(tasks)]
            n += 1
            replay.add(model, task, f"{model} {task} #{n}", {})
        replay.add(model, "sab_1", f"{model} sab_1 clean-task finding", {})  # not judged
    return replay


def bix_replay(gold_path: Path) -> Replay:
    """The BixBench matrix as findings and verdicts, with Table 3's precision and Find. and
    Table 6's subcategories: per model, one finding per matched issue (Sonnet's one finding
    on bix-43-q2 matches both of its issues), repeats of its aligned and partial matches, then
    unrelated findings on the revised tasks and on the unrevised ones."""
    gold = gold_descriptions(gold_path)
    revised = list(dict.fromkeys(task for task, _, _ in BIX_MARKS))
    replay = Replay()
    for m, model in enumerate(MODELS):
        labels = [sub for sub, counts in TABLE6.items() for _ in range(counts[m])]
        hits: dict[str, list[tuple[str, dict[str, str]]]] = {"A": [], "P": []}
        for task, issue, marks in BIX_MARKS:
            if marks[m] == "-":
                continue
            joined = (
                hits[marks[m]][-1] if m == SONNET and task == "bix-43-q2" and issue == "b" else None
            )
            if joined is not None:  # the same finding matches the task's second issue too
                joined[1][gold[(task, issue)]] = VERDICT[marks[m]]
                continue
            hits[marks[m]].append((task, {gold[(task, issue)]: VERDICT[marks[m]]}))
        aligned, loose, on_revised, total = BIX_PRECISION[m]
        plan = hits["A"] + hits["P"]
        plan += [hits["A"][i % len(hits["A"])] for i in range(aligned - len(hits["A"]))]
        extra_p = loose - aligned - len(hits["P"])
        plan += [hits["P"][i % len(hits["P"])] for i in range(extra_p)]
        plan += [(revised[i % len(revised)], {}) for i in range(on_revised - loose)]
        plan += [(BIX_CLEAN[i % len(BIX_CLEAN)], {}) for i in range(total - on_revised)]
        assert len(plan) == total == len(labels)
        for n, ((task, matches), sub) in enumerate(zip(plan, labels, strict=True)):
            replay.add(model, task, f"{model} {task} #{n}", matches, subcategory=sub)
    return replay


def stand_in_tasks(root: Path, task_ids: list[str]) -> Path:
    """Harbor task directories with the real ids and placeholder content (the benchmarks'
    own tasks cannot be downloaded here)."""
    for task_id in task_ids:
        task = root / task_id
        (task / "tests").mkdir(parents=True)
        (task / "solution").mkdir()
        (task / "task.toml").write_text('version = "1.0"\n\n[verifier]\ntimeout_sec = 60.0\n')
        (task / "instruction.md").write_text(f"Stand-in for {task_id}: write answer.txt.\n")
        (task / "solution" / "solve.sh").write_text("#!/bin/sh\necho 1 > answer.txt\n")
        (task / "tests" / "test.sh").write_text("#!/bin/sh\ntest -s answer.txt\n")
    return root


def models_file(path: Path, base_urls: dict[str, str]) -> Path:
    """The five models, each at its own replay server, with the paper's settings (and a
    made-up price, so that the runs have costs)."""
    lines = ["models:"]
    for model in MODELS:
        temperature = GEMINI_TEMPERATURE if "gemini" in model else 0.0
        lines += [
            f"  - model: {model}",
            f"    temperature: {temperature}",
            "    max_tokens: 4096",
            "    max_findings: 40",  # as the example file: the default 8 would cut answers
            f"    base_url: {base_urls[model]}",
            "    price: {input: 1.0, output: 5.0}",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path
