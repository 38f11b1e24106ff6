"""PACT: the HTTP interface every evaluation-facing system serves (see docs/pact.md).

protocol: the wire models; action_text: the prompt, the action schema (generated from the
wire models), the reply parser and the observation text a model reads; policies: what a server asks for actions (ScriptedPolicy,
ModelPolicy, load_policy); server: PactServer; client: PactClient and PactError; launcher:
launch a SystemProfile and wait until it is healthy (RunningSystem, LaunchError).
"""

from metaeval.protocols.improve.pact.action_text import (
    DEFAULT_SYSTEM_PROMPT,
    action_json_schema,
    parse_action,
)
from metaeval.protocols.improve.pact.client import PactClient, PactError
from metaeval.protocols.improve.pact.launcher import LaunchError, RunningSystem, free_port, launch
from metaeval.protocols.improve.pact.policies import (
    ModelPolicy,
    Policy,
    PolicyError,
    ScriptedPolicy,
    Step,
    load_policy,
)
from metaeval.protocols.improve.pact.protocol import (
    PACT_VERSION,
    Action,
    ActRequest,
    ActResponse,
    CommandAction,
    Describe,
    Health,
    Observation,
    ResetRequest,
    ResetResponse,
    SubmitAction,
    WriteFileAction,
)


def __getattr__(name: str) -> object:
    # imported lazily so `python -m metaeval.protocols.improve.pact.server` runs one copy of it
    if name == "PactServer":
        from metaeval.protocols.improve.pact.server import PactServer

        return PactServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "PACT_VERSION",
    "Action",
    "ActRequest",
    "ActResponse",
    "CommandAction",
    "Describe",
    "Health",
    "LaunchError",
    "ModelPolicy",
    "Observation",
    "PactClient",
    "PactError",
    "PactServer",
    "Policy",
    "PolicyError",
    "ResetRequest",
    "ResetResponse",
    "RunningSystem",
    "ScriptedPolicy",
    "Step",
    "SubmitAction",
    "WriteFileAction",
    "action_json_schema",
    "free_port",
    "launch",
    "load_policy",
    "parse_action",
]
