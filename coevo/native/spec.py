"""The harness of a native agent: a YAML file of `kind: native`.

    kind: native
    agent: mini-swe-agent
    config_file: package:mini_textbased.yaml   # the agent's own config: a file next to this one, or one it ships
    agent_settings: {step_limit: 6}            # merged over the file's sections, key by key
    model_settings: {}
    environment_settings: {}
    decoding: {temperature: 1.0, top_p: 1.0, max_tokens: 192}

After loading, the three `*_settings` sections hold the whole effective config, so that every setting
(templates, step limit, the action regex, the format-error template) is a dotted field a search space
can vary, e.g. `agent_settings.step_limit` or `model_settings.action_regex`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from coevo.config import apply_overrides, read_mapping, read_yaml, validate
from coevo.errors import ConfigError

SECTIONS = {"agent": "agent_settings", "model": "model_settings", "environment": "environment_settings"}
"""The agent config file's sections, and the harness fields that hold them."""
OBSERVATION_TOKENS = 2048
"""What one observation is assumed to cost at most (mini-swe-agent truncates long outputs itself)."""
UNLIMITED_EPISODE_TOKENS = 32768


class NativeDecoding(BaseModel):
    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(1.0, ge=0)
    """Sampling temperature the agent's model calls use; 0 is greedy."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling mass."""
    max_tokens: int = Field(192, ge=1)
    """Tokens per model call."""


class NativeHarness(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["native"]
    """Marks a harness whose loop is the agent's own."""
    name: str
    """Short identifier, recorded in every trajectory."""
    description: str = ""
    agent: Literal["mini-swe-agent"]
    """Which native agent runs the episodes (coevo.native.AGENTS)."""
    config_file: str
    """The agent's own config: a path relative to the harness file, or `package:NAME` for one it ships."""
    agent_settings: dict[str, Any] = {}
    """The config's `agent` section (templates, step_limit, ...): the file's, with this harness's keys on top."""
    model_settings: dict[str, Any] = {}
    """The config's `model` section (action_regex, observation_template, format_error_template, ...)."""
    environment_settings: dict[str, Any] = {}
    """The config's `environment` section (env, timeout)."""
    decoding: NativeDecoding = NativeDecoding()

    def with_overrides(self, overrides: dict[str, Any]) -> NativeHarness:
        """A new validated harness with dotted fields replaced, e.g. {"agent_settings.step_limit": 4}."""
        data = apply_overrides(self.model_dump(), overrides, NativeHarness, ConfigError)
        return validate(NativeHarness, data, f"harness '{self.name}' with overrides", ConfigError)

    def seen_by_model(self) -> dict:
        """What the model sees of this harness (its fingerprint hashes this): the agent and its effective
        config, whose templates render every message; decoding is left out, as for coevo's own harnesses."""
        return {"agent": self.agent, **self.agent_file()}

    def to_yaml(self) -> str:
        """The resolved harness in one file (every setting written out), as `load_native_harness` reads it."""
        import yaml

        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)

    def rendered_prompts(self) -> str:
        """The agent's message templates as it will render them itself (Jinja, unrendered here)."""
        templates = {f"{section}.{key}": value for section, field in SECTIONS.items()
                     for key, value in getattr(self, field).items() if key.endswith("_template")}
        return "".join(f"## {name}\n\n```\n{text}\n```\n\n" for name, text in templates.items())

    def unknown_setting(self, path: str) -> str | None:
        """For a dotted path into the agent's config (`agent_settings.step_limit`): why it names nothing
        there, with the valid keys; None when it does (or is not such a path)."""
        field, _, key = path.partition(".")
        if field not in SECTIONS.values() or not key:
            return None
        valid = [*getattr(self, field), *(k for k in declared_settings(self.agent, field) if k not in getattr(self, field))]
        if key in valid:
            return None
        return f"'{key}' is not a setting of the agent's {field} (valid: {', '.join(f'{field}.{k}' for k in valid)})"

    def render_action(self, commands: list[str], submit: bool) -> str:
        """A reply this agent parses into running `commands`, or into submitting (what the oracle writes)."""
        from coevo.native import AGENTS, imported

        return imported(AGENTS[self.agent].render_action)(self, commands, submit)

    def episode_token_bound(self) -> int:
        """The longest token record an episode can leave (what dr_grpo's normaliser reads): each step's
        reply and an observation of at most OBSERVATION_TOKENS; an unlimited agent
        (step_limit 0) gets UNLIMITED_EPISODE_TOKENS."""
        steps = int(self.agent_settings.get("step_limit") or 0)
        return steps * (self.decoding.max_tokens + OBSERVATION_TOKENS) if steps > 0 else UNLIMITED_EPISODE_TOKENS

    def agent_file(self) -> dict[str, dict]:
        """The effective config in the agent's own format (what an export writes beside the checkpoint)."""
        return {"agent": self.agent_settings, "model": self.model_settings, "environment": self.environment_settings}


def declared_settings(agent: str, field: str) -> list[str]:
    """The settings the agent's config class for a section declares (coevo.native.AGENTS)."""
    from coevo.native import AGENTS, imported

    return list(imported(AGENTS[agent].settings[field]).model_fields)


def save_native_harness(harness: NativeHarness, folder: Path) -> Path:
    """The resolved harness and, beside it, the agent's effective config in its own format (for a bundle:
    the agent runs from these two files with nothing else of coevo's)."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{harness.name}.agent.yaml"
    config.write_text(yaml.safe_dump(harness.agent_file(), sort_keys=False, allow_unicode=True))
    data = harness.model_dump(exclude={"agent_settings", "model_settings", "environment_settings"})
    path = folder / "harness.yaml"
    path.write_text(yaml.safe_dump({**data, "config_file": config.name}, sort_keys=False, allow_unicode=True))
    return path


def is_native(harness) -> bool:
    """A native agent's harness (a NativeHarness), not one of coevo's own (coevo.harness.Harness)."""
    return isinstance(harness, NativeHarness)


def is_native_file(path: str | Path) -> bool:
    """Whether the harness file says `kind: native`; a file that cannot be read says no, and the loader of
    coevo's own harnesses then reports what is wrong with it."""
    try:
        data = read_yaml(path, "harness file")
    except ConfigError:
        return False
    return isinstance(data, dict) and data.get("kind") == "native"


def load_native_harness(path: str | Path) -> NativeHarness:
    path = Path(path)
    data = read_mapping(path, "harness file", NativeHarness, ConfigError)
    data.setdefault("name", path.stem)
    if "config_file" not in data:
        raise ConfigError(f"{path}: config_file: required (the agent's own config file, or package:NAME)")
    config = read_yaml(agent_config_path(path, str(data["config_file"])), "agent config file")
    for section, field in SECTIONS.items():
        data[field] = {**(config.get(section) or {}), **(data.get(field) or {})}
    return validate(NativeHarness, data, str(path), ConfigError)


def agent_config_path(harness_path: Path, config_file: str) -> Path:
    if config_file.startswith("package:"):
        from importlib.util import find_spec

        return Path(find_spec("minisweagent").origin).parent / "config" / config_file.removeprefix("package:")
    return (harness_path.resolve().parent / config_file).resolve()
