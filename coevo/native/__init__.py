"""Native agents: harnesses that own their agent loop (mini-swe-agent first), run unmodified.

    spec.py   the harness YAML of `kind: native`: which agent, its own config file, and the sections of
              that config as dotted, searchable fields (agent.step_limit, agent.system_template, ...)
    mini.py   mini-swe-agent: an Environment that runs its commands in a coevo Sandbox, and one episode
    run.py    episodes of native agents against a `coevo serve` endpoint: each through its own session
              URL, verified by the task's tests, recorded as coevo Trajectories

The agent talks to the model only through the session URL, so its episodes are the same token-in/
token-out record as coevo's own loop writes, whatever the agent does to its prompts.
"""

AGENTS = {"mini-swe-agent": "coevo.native.mini.run_agent"}
"""Agent name -> the function that runs one episode: (harness, instruction, sandbox, base_url, model, api_key)
-> AgentResult."""
SETTINGS = {"mini-swe-agent": {"agent_settings": "minisweagent.agents.default.AgentConfig",
                               "model_settings": "minisweagent.models.litellm_textbased_model.LitellmTextbasedModelConfig",
                               "environment_settings": "minisweagent.environments.local.LocalEnvironmentConfig"}}
"""Agent name -> the pydantic config class behind each settings section: what a section may set beyond the
keys its config file writes out (e.g. model_settings.action_regex, a class default)."""


def quiet_agents() -> None:
    """mini-swe-agent greets on import and litellm fetches a price list: neither has a use here (no network)."""
    import os

    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
