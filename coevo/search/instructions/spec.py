"""The search-space entry that evolves a template's text instead of sampling from fixed values:

    templates.system: {evolve: gepa, budget: 40, reflection_lm: openai/gpt-4.1-mini}

It becomes an `EvolveParam`: a categorical over template file names whose only choice, until an h-phase
runs GEPA, is the base harness's template."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coevo.search.space import Param

SLOT_PREFIX = "templates."


class EvolveSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    evolve: Literal["gepa"]
    """The optimizer that writes the text: GEPA, reflective prompt evolution."""
    budget: int = Field(ge=1)
    """Episodes GEPA may run per h-phase (its metric calls), each one evolve task under one candidate."""
    reflection_lm: str
    """The dspy.LM model that reads the feedback and writes new text: an API model (openai/gpt-4.1-mini),
    or openai/<served name> with `api_base` for vLLM, `coevo serve` or any OpenAI-compatible server."""
    api_base: str | None = None
    """The reflection LM's endpoint, e.g. http://127.0.0.1:8000/v1; empty: the provider's default."""
    api_key_env: str | None = None
    """NAME of the environment variable that holds the reflection LM's key (the key is never written
    anywhere); empty: a server without auth."""
    minibatch: int = Field(3, ge=1)
    """Evolve tasks per reflection step: the parent and its child are compared on them."""
    keep: int = Field(3, ge=1)
    """Evolved texts (best on the evolve set first) that become choices besides the base and incumbent's."""
    timeout_s: float = Field(120.0, gt=0)
    """A reflection call that takes longer loses its candidate (recorded as rejected, with why)."""
    max_tokens: int = Field(4096, ge=64)
    """Most tokens of one reflection reply."""


@dataclass
class EvolveParam(Param):
    """A categorical whose choices the h-phase hook (evolve.py) sets from GEPA's result before Optuna samples."""

    evolve: EvolveSpec | None = None

    @property
    def slot(self) -> str:
        return self.path.removeprefix(SLOT_PREFIX)


def is_evolve(entry: Any) -> bool:
    return isinstance(entry, dict) and "evolve" in entry


def evolve_problems(key: str, entry: dict) -> list[str]:
    """What is wrong with an evolve entry, as messages naming the field and what is valid."""
    from coevo.config import describe
    from coevo.harness.spec import Templates

    problems = []
    slots = list(Templates.model_fields)
    if not key.startswith(SLOT_PREFIX) or key.removeprefix(SLOT_PREFIX) not in slots:
        problems.append(f"'evolve' applies to a template slot; valid keys: "
                        f"{', '.join(SLOT_PREFIX + s for s in slots)}")
    try:
        EvolveSpec.model_validate(entry)
    except ValidationError as e:
        problems += [describe(err, EvolveSpec) for err in e.errors()]
    return problems


def evolve_param(key: str, entry: dict, base=None) -> EvolveParam:
    """The categorical over template names that Optuna samples; the h-phase hook fills in its choices."""
    from coevo.harness.spec import Templates

    templates = base.templates if base is not None else Templates()
    return EvolveParam(path=key, type="categorical", choices=[getattr(templates, key.removeprefix(SLOT_PREFIX))],
                 evolve=EvolveSpec.model_validate(entry))


def key_problem(spec: EvolveSpec) -> str | None:
    """Why the reflection LM's key cannot be read from the environment now; None when it can."""
    if spec.api_key_env and not os.environ.get(spec.api_key_env):
        return (f"api_key_env: the environment variable {spec.api_key_env} is unset or empty; export it, or "
                "leave api_key_env out for a server without auth")
    return None


def unset_keys(space) -> list[str]:
    """The key problems of every evolve key of a space (`coevo check`)."""
    return [f"'{p.path}': {problem}" for p in space.params
            if isinstance(p, EvolveParam) and (problem := key_problem(p.evolve))]
