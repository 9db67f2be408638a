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


SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""mini-swe-agent's submit: a command whose output starts with the sentinel (LocalEnvironment._check_finished)."""
FENCES = ("mswea_bash_command", "bash", "sh", "")
"""Code-fence labels the oracle tries, in order, until the harness's action_regex reads its block."""


def render_action(harness, commands: list[str], submit: bool) -> str:
    """A reply mini-swe-agent parses into one action: a THOUGHT and one fenced block, under the first fence
    label that the harness's `model_settings.action_regex` accepts. Submitting is an action of its own (the
    sentinel must be the first line of the output), so `submit` takes no commands."""
    import re

    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModelConfig

    if submit == bool(commands):
        raise ValueError("mini-swe-agent actions either run commands or submit (submit=True with no commands)")
    command = SUBMIT if submit else "\n".join(commands)
    thought = "Done." if submit else "Doing the task."  # short: a small model learns to write this too
    regex = harness.model_settings.get("action_regex") or LitellmTextbasedModelConfig.model_fields["action_regex"].default
    for label in FENCES:
        reply = f"THOUGHT: {thought}\n\n```{label}\n{command}\n```"
        if [a.strip() for a in re.findall(regex, reply, re.DOTALL)] == [command.strip()]:
            return reply
    raise ValueError(f"harness '{harness.name}': model_settings.action_regex {regex!r} reads none of the fenced "
                     f"blocks the oracle can write (labels {', '.join(repr(f) for f in FENCES)})")
