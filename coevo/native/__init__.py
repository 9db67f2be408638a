"""Native agents: harnesses that own their agent loop (mini-swe-agent first), run unmodified.

    spec.py   the harness YAML of `kind: native`: which agent, its own config file, and the sections of
              that config as dotted, searchable fields (agent.step_limit, agent.system_template, ...)
    mini.py   mini-swe-agent: an Environment that runs its commands in a coevo Sandbox, one episode, and
              the replies the oracle writes in its format
    run.py    episodes of native agents against a `coevo serve` endpoint: each through its own session
              URL, verified by the task's tests, recorded as coevo Trajectories; `rollout_native`, which
              `coevo.rollout.rollout` hands a native harness to, serves the policy for them in-process

The agent talks to the model only through the session URL, so its episodes are the same token-in/
token-out record as coevo's own loop writes, whatever the agent does to its prompts.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class NativeAgent:
    """What coevo knows of a native agent, each as "module.name", imported when used."""

    run: str
    """Runs one episode: (harness, instruction, sandbox, base_url, model, api_key) -> AgentResult."""
    render_action: str
    """Writes a reply the agent parses into running `commands`, or into submitting: (harness, commands,
    submit) -> str. The oracle plays the tasks' solutions with it (the warm start, `coevo check`)."""
    settings: dict[str, str]
    """Each settings section's pydantic config class: what a section may set beyond the keys its config file
    writes out (e.g. model_settings.action_regex, a class default)."""


AGENTS = {"mini-swe-agent": NativeAgent(
    run="coevo.native.mini.run_agent", render_action="coevo.native.mini.render_action",
    settings={"agent_settings": "minisweagent.agents.default.AgentConfig",
              "model_settings": "minisweagent.models.litellm_textbased_model.LitellmTextbasedModelConfig",
              "environment_settings": "minisweagent.environments.local.LocalEnvironmentConfig"})}


def imported(dotted: str):
    """The object a "module.name" string names. mini-swe-agent greets on import and litellm fetches a price
    list: neither has a use here (no network), so both are silenced first."""
    import os
    from importlib import import_module

    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    module, _, name = dotted.rpartition(".")
    return getattr(import_module(module), name)
