"""The parts of `metaeval demo`, fast ones first, so the first result shows within seconds:

1. audit checks: static and sandboxed execution checks on the 14 example tasks, scored
   against their gold file (no model; seconds);
2. improve: a scripted meta-agent on the bundled terminal suite (no model);
3. Q&A: the toolloop agent answers three questions about a bundled repository (3 short
   model runs);
4. audit with the local model on the two tasks no check can judge (minutes);
5. build-and-find: reference builders, a reference finder and the local model as finder
   (4 model runs of up to 240 s each: the longest part); the labels come from the pack's
   expected answers (read off the reference code), so no finder is scored against labels
   it made.

Each part writes its own run directory under RUN_DIR and resumes when run again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from metaeval.console import make_console

out = make_console()
PARTS = ("all", "qa", "audit", "buildfind", "improve")

DEMO_MODEL_TASKS = ["grade-mean", "rainfall-average"]
"""Audit tasks the demo's model audits (the local model takes minutes per task on a busy
machine): the two whose seeded defects no static or execution check can see. Static and
execution checks run on all 14."""


@dataclass
class DemoParts:
    """What `metaeval demo` was asked for."""

    run_dir: Path
    model: str
    concurrency: int = 1
    new_layer: str | None = None
    questions: Path | None = None

    def run(self, part: str) -> None:
        """Run `part` (or all parts), fast parts first."""
        every = part == "all"
        if every or part == "audit":
            self.audit(with_model=False)
        if every or part == "improve":
            improve(self.run_dir / "improve")
        if every or part == "qa":
            self.qa()
        if every or part == "audit":
            self.audit(with_model=True)
        if every or part == "buildfind":
            buildfind(self.run_dir / "buildfind", self.model, self.new_layer)

    def qa(self) -> None:
        from metaeval.demo.run import DemoSettings, run_demo

        run_dir = self.run_dir / "qa"
        settings = DemoSettings(
            run_dir, self.model, self.concurrency, self.new_layer, questions=self.questions
        )
        summary = run_demo(settings)
        skipped = summary.skipped_completed
        if skipped:
            out.print(f"resumed: {len(skipped)} answered question(s) reused: {', '.join(skipped)}")
        accuracy = summary.accuracy
        acc = "n/a" if accuracy is None else f"{accuracy:.0%}"
        out.print(
            f"Q&A: {summary.correct}/{summary.scored} correct (accuracy {acc}), "
            f"infra errors {summary.infra_errors}; report: {run_dir / 'report.md'}"
        )

    def audit(self, with_model: bool) -> None:
        """The checks alone (seconds), or the model's cells added to the same run."""
        from metaeval.examples import example_audit_bench
        from metaeval.protocols.audit.judge import CATEGORY_JUDGE
        from metaeval.protocols.audit.render import score_run
        from metaeval.protocols.audit.run import AuditRun
        from metaeval.protocols.audit.settings import AuditSettings

        bench, run_dir = example_audit_bench(), self.run_dir / "audit"
        settings = AuditSettings(
            bench_dir=bench,
            run_dir=run_dir,
            models=[self.model] if with_model else [],
            static_only=not with_model,
            concurrency=self.concurrency,
            max_tokens=1024,
            new_layer=self.new_layer,
            model_tasks=DEMO_MODEL_TASKS,
        )
        summary = AuditRun(settings).run()
        score = score_run(run_dir, bench / "gold.json", CATEGORY_JUDGE)  # a model judge: minutes
        static = {row.name: row for row in score.rows}.get("static")
        recall = "n/a" if static is None else f"{static.recall_a:.0%}"
        what = (
            f"{self.model} on {', '.join(DEMO_MODEL_TASKS)} added"
            if with_model
            else "static and execution checks, no model"
        )
        out.print(
            f"Audit: {summary['findings_reported']} findings on {summary['tasks']} tasks "
            f"({what}); static+execution checks recall_A {recall} of the seeded defects; "
            f"report: {run_dir / 'report.html'}"
        )


def buildfind(run_dir: Path, model: str, new_layer: str | None) -> None:
    """The small build-and-find run; its review rows are labelled from expected answers."""
    from metaeval.examples import example_path
    from metaeval.protocols.buildfind.cli import print_findings, run_counts_text
    from metaeval.protocols.buildfind.config import load_config
    from metaeval.protocols.buildfind.finalize import finalize_run, run_and_finalize
    from metaeval.protocols.buildfind.run import open_existing

    config = load_config(example_path("buildfind-local.yaml"))
    for finder in config.finders:
        if finder.model is not None:  # model-driven finders; scripted ones stay as they are
            finder.model = model
    counts, summary = run_and_finalize(config, run_dir, new_layer)
    if summary.get("unlabeled_review_rows"):
        from metaeval.demo.labels import label_from_expected_answers

        label_from_expected_answers(run_dir, config)
        run = open_existing(run_dir)
        try:
            summary = finalize_run(run)
        finally:
            run.close()
    out.print(f"Build-and-find: {run_counts_text(counts)}; report: {run_dir / 'report.html'}")
    print_findings(summary)


def improve(run_dir: Path) -> None:
    """The scripted meta-agent on the bundled terminal suite, budget 3 (no model)."""
    from metaeval.examples import example_path
    from metaeval.protocols.improve.bundle import summary_text
    from metaeval.protocols.improve.init_target import init_target
    from metaeval.protocols.improve.run import run_experiment

    configs = example_path("improve")
    target = (run_dir / "target").resolve()
    if not target.exists():
        init_target("toolloop", target)
    manifest = json.loads((configs / "manifest-scripted.json").read_text())
    manifest["sut"]["sut_config"] = str(configs / manifest["sut"]["sut_config"])
    for key in ("optimize", "held_out"):
        section = manifest["evaluation"][key]
        section["suite_config"] = str(configs / section["suite_config"])
    manifest["baseline"]["repo"] = str(target)
    manifest["output"] = str((run_dir / "bundle").resolve())
    manifest["trial_budget"] = 3
    path = run_dir / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    summary = run_experiment(path)
    out.print(
        f"Improve: {summary_text(summary)}; report: {run_dir / 'bundle' / 'report.html'}",
        highlight=False,
    )
