"""PACT shim: serve this repository's own `minisweagent` package as a PACT policy.

Benchmark-owned: this file sits outside the mutable root (`minisweagent/`), so a candidate
patch can change the agent but not how it is driven. The PACT server loads it with
`--policy mini_pact:make_policy`, with this repository (the candidate's worktree) first on
PYTHONPATH; `make_policy` refuses to run when `minisweagent` resolves anywhere else, so a
patch to the worktree is always the code that runs.

One episode = one `DefaultAgent.run(task)` on a thread. The agent's environment hands each
bash command to the harness (the next /act answer) and blocks until the harness sends back
the result (the following /act request); mini's own `_check_finished` then decides whether
the command was the submission. Whatever ends the agent's run (Submitted, step limit, repeated
format errors, a full context window) is answered with a submit action; any other exception
is the candidate's failure and is raised to the server (HTTP 500).

Configuration (environment): METAEVAL_TARGET_MODEL (metaeval model name),
METAEVAL_TARGET_BASE_URL / METAEVAL_TARGET_API_KEY (an OpenAI-compatible endpoint),
METAEVAL_TARGET_MAX_TOKENS, METAEVAL_TARGET_TEMPERATURE, MINI_CONFIG (a file in
minisweagent/config/, default mini_textbased.yaml).
"""

from __future__ import annotations

import os
import queue
import tempfile
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# Before minisweagent is imported: no banner, no writes to the user's config directory, no
# download of litellm's price table, and no hard failure on unpriced (local) models.
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-config-"))
os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import minisweagent  # noqa: E402
import yaml  # noqa: E402
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models import get_model  # noqa: E402

from metaeval.protocols.improve.pact.policies import PolicyError, Step  # noqa: E402
from metaeval.protocols.improve.pact.protocol import (  # noqa: E402
    CommandAction,
    Describe,
    Observation,
    ResetRequest,
    SubmitAction,
)
from metaeval.protocols.improve.target_model import served_alias  # noqa: E402

DEFAULT_CONFIG = "mini_textbased.yaml"


class _Abort(BaseException):
    """Raised inside the agent thread when its episode was replaced (not an Exception, so
    mini's own handlers do not catch it)."""


_ABORT = object()


def litellm_settings(env: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """The litellm model name and extra model_kwargs for the configured target model."""
    env = dict(os.environ if env is None else env)
    model = env.get("METAEVAL_TARGET_MODEL", "none")
    if model in ("", "none"):
        raise PolicyError("mini-swe-agent needs a model: set sum.model in the manifest")
    kwargs: dict[str, Any] = {}
    base_url = env.get("METAEVAL_TARGET_BASE_URL")
    if base_url:  # an OpenAI-compatible server, asked for the name it serves the model under
        name = "openai/" + served_alias(model)
        kwargs["api_base"] = base_url
        kwargs["api_key"] = env.get("METAEVAL_TARGET_API_KEY", "sk-no-key")
    else:  # a hosted provider: metaeval's names are litellm's, less our `litellm/` prefix
        name = model.removeprefix("litellm/")
    if env.get("METAEVAL_TARGET_MAX_TOKENS"):
        kwargs["max_tokens"] = int(env["METAEVAL_TARGET_MAX_TOKENS"])
    if env.get("METAEVAL_TARGET_TEMPERATURE"):
        kwargs["temperature"] = float(env["METAEVAL_TARGET_TEMPERATURE"])
    return name, kwargs


def load_config(name: str | None = None) -> dict[str, Any]:
    """mini's YAML config from this repository's minisweagent/config/ (or a path)."""
    name = name or os.environ.get("MINI_CONFIG") or DEFAULT_CONFIG
    path = Path(name)
    if not path.is_absolute():
        path = Path(minisweagent.__file__).resolve().parent / "config" / name
    return yaml.safe_load(path.read_text())


def _output(observation: Observation) -> dict[str, Any]:
    """A harness observation in the shape mini's LocalEnvironment.execute returns."""
    if observation.kind == "command_result":
        output = {
            "output": observation.stdout + observation.stderr,
            "returncode": -1 if observation.exit_code is None else observation.exit_code,
            "exception_info": "",
        }
        if observation.timed_out:
            output["returncode"] = -1
            output["exception_info"] = "An error occurred while executing the command: timed out"
        return output
    text = observation.message or observation.stderr or observation.stdout
    return {"output": text, "returncode": -1, "exception_info": text}


class _Episode:
    """The hand-over between the agent thread and the PACT calls of one episode."""

    def __init__(self) -> None:
        self.actions: queue.Queue[Any] = queue.Queue()
        self.observations: queue.Queue[Any] = queue.Queue()
        self.agent: DefaultAgent | None = None
        self.seen_messages = 0
        self.started = False

    def usage(self) -> dict[str, int]:
        """Tokens of the model calls since the last action (from mini's stored responses)."""
        messages = self.agent.messages if self.agent is not None else []
        total = {"input_tokens": 0, "output_tokens": 0}
        for message in messages[self.seen_messages :]:
            response = (message.get("extra") or {}).get("response")
            usage = response.get("usage") if isinstance(response, dict) else None
            if isinstance(usage, dict):
                total["input_tokens"] += int(usage.get("prompt_tokens") or 0)
                total["output_tokens"] += int(usage.get("completion_tokens") or 0)
        self.seen_messages = len(messages)
        return total

    def exchange(self, action: CommandAction) -> Observation:
        """Hand `action` to the harness and wait for its result (agent thread)."""
        self.actions.put(Step(action=action, usage=self.usage()))
        item = self.observations.get()
        if item is _ABORT:
            raise _Abort()
        return item


class PactEnvironment(LocalEnvironment):
    """mini's local environment with execution delegated to the harness's sandbox."""

    def __init__(self, episode: _Episode, **kwargs: Any):
        super().__init__(**kwargs)
        self.episode = episode

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict:
        command = action.get("command", "")
        limit = timeout or self.config.timeout
        observation = self.episode.exchange(
            CommandAction(command=command, timeout_s=float(limit) if limit else None)
        )
        output = _output(observation)
        self._check_finished(output)
        return output


def _ends_episode(exc: BaseException) -> bool:
    """Model-side endings mini's own batch runner records as an exit status, not a crash."""
    name = type(exc).__name__
    text = str(exc).lower()
    return name == "ContextWindowExceededError" or (
        name == "BadRequestError" and ("context" in text and ("exceed" in text or "length" in text))
    )


class MiniSweAgentPolicy:
    """The PACT policy: one mini-swe-agent run per episode, one bash command per step."""

    def __init__(self, config: dict[str, Any] | None = None):
        source = Path(minisweagent.__file__).resolve()
        if not source.is_relative_to(HERE):
            raise PolicyError(
                f"minisweagent was imported from {source}, not from this repository ({HERE}); "
                "put the repository first on PYTHONPATH"
            )
        self.config = config or load_config()
        self.model_name, self.model_kwargs = litellm_settings()
        self._model()  # fail at launch, not at the first task, on a bad model config
        self.episode: _Episode | None = None

    def describe(self) -> Describe:
        return Describe(
            name="mini-swe-agent",
            version=minisweagent.__version__,
            actions=["command", "submit"],
            info={"family": "mini-swe-agent", "model": self.model_name, "source": str(HERE)},
        )

    def _model(self) -> Any:
        model_config = dict(self.config.get("model") or {})
        model_config.setdefault("model_class", "litellm_textbased")
        model_config["model_kwargs"] = {
            **(model_config.get("model_kwargs") or {}),
            **self.model_kwargs,
        }
        return get_model(self.model_name, model_config)

    def _agent(self, episode: _Episode, max_steps: int) -> DefaultAgent:
        model = self._model()
        env = PactEnvironment(episode, **(self.config.get("environment") or {}))
        agent_config = dict(self.config.get("agent") or {})
        agent_config.pop("mode", None)  # interactive-agent setting
        agent_config["step_limit"] = max_steps
        return DefaultAgent(model, env, **agent_config)

    def reset(self, request: ResetRequest) -> None:
        if self.episode is not None:
            self.episode.observations.put(_ABORT)
        episode = _Episode()
        episode.agent = self._agent(episode, request.max_steps)
        self.episode = episode
        thread = threading.Thread(
            target=self._run, args=(episode, request.instruction), daemon=True
        )
        thread.start()

    @staticmethod
    def _run(episode: _Episode, task: str) -> None:
        assert episode.agent is not None
        try:
            result = episode.agent.run(task)
        except _Abort:
            return
        except BaseException as exc:  # classified below; act() must always get an answer
            if isinstance(exc, Exception) and _ends_episode(exc):
                note = f"mini-swe-agent exit: {type(exc).__name__}"
                episode.actions.put(Step(SubmitAction(answer=""), episode.usage(), note))
            else:
                episode.actions.put(exc)
            return
        note = f"mini-swe-agent exit: {result.get('exit_status', '')}"
        answer = str(result.get("submission") or "")
        episode.actions.put(Step(SubmitAction(answer=answer), episode.usage(), note))

    def act(self, observation: Observation) -> Step:
        episode = self.episode
        if episode is None:
            raise PolicyError("act before reset")
        if episode.started:
            episode.observations.put(observation)
        episode.started = True
        item = episode.actions.get()
        if isinstance(item, BaseException):
            raise PolicyError(f"mini-swe-agent raised {type(item).__name__}: {item}") from item
        return item


def make_policy() -> MiniSweAgentPolicy:
    """Entry point for `python -m metaeval.protocols.improve.pact.server --policy`."""
    return MiniSweAgentPolicy()
