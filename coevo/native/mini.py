"""mini-swe-agent, unmodified: its DefaultAgent and its text-based litellm model, with an Environment that
runs each command in a coevo Sandbox instead of on the host, and a model that calls a session URL.

mini-swe-agent runs every action in a fresh subshell; a coevo sandbox keeps one shell per episode, so a
command runs as `( command )` from the working folder: a `cd` or an export does not carry over, as the
agent's prompts promise.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from minisweagent.environments.local import LocalEnvironment

from coevo import Sandbox
from coevo.errors import SandboxError

EXIT_STATUS = {"Submitted": "submitted", "LimitsExceeded": "turn_limit", "TimeExceeded": "timeout",
               "RepeatedFormatError": "format_errors"}
"""mini-swe-agent's exit statuses as coevo episode statuses; anything else ended in an error."""


class SandboxEnvironment(LocalEnvironment):
    """mini-swe-agent's LocalEnvironment (its config, template variables and submit rule), executing in a
    coevo Sandbox. The sandbox is started and verified by the caller."""

    def __init__(self, sandbox: Sandbox, **kwargs):
        kwargs.setdefault("cwd", "/app")
        super().__init__(**kwargs)
        self.sandbox = sandbox
        if self.config.env:
            exports = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in self.config.env.items())
            self.sandbox.run(f"export {exports}", timeout=10)

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict:
        command = action.get("command", "")
        cwd = cwd or self.config.cwd
        result = self.sandbox.run(f"cd {shlex.quote(cwd)} && (\n{command}\n)", timeout=timeout or self.config.timeout)
        output = {"output": result.output, "returncode": -1 if result.exit_code is None else result.exit_code,
                  "exception_info": f"The command timed out after {timeout or self.config.timeout}s and was killed."
                  if result.timed_out else ""}
        self._check_finished(output)
        return output


@dataclass
class AgentResult:
    status: str
    """A coevo Status."""
    error: str | None = None
    format_errors: int = 0
    messages: list[dict] = field(default_factory=list)


def run_agent(harness, instruction: str, sandbox: Sandbox, base_url: str, model: str,
              api_key: str | None = None) -> AgentResult:
    """One episode of mini-swe-agent on `instruction`, its model served at `base_url` (a session URL)."""
    os.environ.setdefault("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")  # a failing server is a policy error, now
    import litellm
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

    litellm.suppress_debug_info = True  # its cost lookup of a served model's name fails, and says so in color

    settings = harness.model_settings
    decoding = harness.decoding
    kwargs = {**settings.get("model_kwargs", {}), "api_base": base_url, "api_key": api_key or "unused",
              "temperature": decoding.temperature, "top_p": decoding.top_p, "max_tokens": decoding.max_tokens}
    llm = LitellmTextbasedModel(**{**settings, "model_name": f"openai/{model}", "model_kwargs": kwargs,
                                   "cost_tracking": "ignore_errors"})
    env = SandboxEnvironment(sandbox, **harness.environment_settings)
    agent = DefaultAgent(llm, env, **harness.agent_settings)
    try:
        info = agent.run(task=instruction)
    except SandboxError as e:
        return AgentResult("sandbox_error", f"{type(e).__name__}: {e}", messages=agent.messages)
    except Exception as e:  # noqa: BLE001 - boundary: the episode fails with its cause, the run goes on
        return AgentResult("policy_error", f"{type(e).__name__}: {e}", messages=agent.messages)
    exit_status = info.get("exit_status", "")
    format_errors = sum(1 for m in agent.messages if m.get("extra", {}).get("interrupt_type") == "FormatError")
    status = EXIT_STATUS.get(exit_status, "policy_error")
    error = None if status == "submitted" else f"mini-swe-agent exit status {exit_status or 'unknown'}"
    return AgentResult(status, error, format_errors, agent.messages)
