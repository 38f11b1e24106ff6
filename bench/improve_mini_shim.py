"""Overhead of the mini-swe-agent target: launch time and cost per step, without model time.

Materializes the mini-swe-agent target, serves a scripted OpenAI-compatible model on
127.0.0.1 (answers instantly; tests/openai_stub.py) and drives episodes over PACT directly
(no sandbox), so what is measured is the shim: PACT round trip, mini's agent loop, litellm's
HTTP call and response parsing. Needs the `mini` extra.

Usage: python bench/improve_mini_shim.py [--steps 40] [--episodes 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from metaeval.protocols.improve.init_target import init_target
from metaeval.protocols.improve.node_eval import SRC_DIR
from metaeval.protocols.improve.pact.launcher import launch
from metaeval.protocols.improve.pact.protocol import ActRequest, Observation, ResetRequest
from metaeval.protocols.improve.profiles import SystemProfile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from openai_stub import OpenAIStub  # noqa: E402

PROFILE = ROOT / "examples" / "improve" / "profiles" / "mini_swe_agent_target.json"


def reply(messages: list[dict]) -> str:
    return "THOUGHT: look around.\n\n```mswea_bash_command\nls -la\n```"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--episodes", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, OpenAIStub(reply) as stub:
        repo = Path(tmp) / "target"
        init_target("mini-swe-agent", repo)
        profile = SystemProfile.model_validate_json(PROFILE.read_text())
        profile = profile.model_copy(update={"cwd": repo})
        env = {
            "METAEVAL_TARGET_MODEL": "openai/stub",
            "METAEVAL_TARGET_BASE_URL": stub.base_url,
            "PYTHONPATH": f"{repo}:{SRC_DIR}",
        }
        started = time.perf_counter()
        server = launch(profile, log_path=Path(tmp) / "server.log", extra_env=env)
        launch_s = time.perf_counter() - started
        per_step: list[float] = []
        try:
            client = server.client(timeout_s=60)
            for episode in range(args.episodes):
                eid = f"bench-{episode}"
                client.reset(
                    ResetRequest(episode_id=eid, task_id="t", instruction="x", max_steps=args.steps)
                )
                observation = Observation(kind="initial")
                for step in range(1, args.steps):
                    t0 = time.perf_counter()
                    client.act(ActRequest(episode_id=eid, observation=observation))
                    per_step.append(time.perf_counter() - t0)
                    observation = Observation(
                        kind="command_result", step=step, stdout="a\n" * 20, exit_code=0
                    )
        finally:
            server.stop()
    per_step.sort()
    p95 = per_step[int(0.95 * (len(per_step) - 1))]
    print(f"mini-swe-agent target launch (import mini + litellm, PACT healthy): {launch_s:.2f} s")
    print(
        f"shim overhead per step over {len(per_step)} steps: "
        f"{statistics.mean(per_step) * 1000:.1f} ms mean, {p95 * 1000:.1f} ms p95 "
        "(PACT round trip + mini loop + litellm HTTP; model time ~0)"
    )


if __name__ == "__main__":
    main()
