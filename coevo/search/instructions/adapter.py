"""The GEPAAdapter over coevo's own rollouts (gepa.core.adapter.GEPAAdapter, duck-typed).

A candidate is {slot: template text}. `evaluate` writes the text as a template of the run, builds the
start pair's harness with it, and rolls the batch's evolve tasks out in real sandboxes with the pair's
policy; a task's score is the search's objective (pass, or the verifier's partial credit), averaged over
its samples. `make_reflective_dataset` turns the trajectories into records (reflect.py).
`propose_new_texts` asks the reflection LM for a new text and checks it; a reflection LM that fails,
times out or answers something unusable loses that candidate, recorded with why, and GEPA goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coevo.harness.errors import HarnessError
from coevo.outcomes import credit, passed
from coevo.search.instructions import reflect
from coevo.search.instructions.lineage import TemplateStore


@dataclass
class Episodes:
    """GEPA's per-example trajectory: one task's episodes under one candidate (or why there are none)."""

    instruction: str
    episodes: list
    score: float
    error: str | None = None


class HarnessAdapter:
    def __init__(self, slot: str, store: TemplateStore, harness_for: Callable[[str], Any],
                 run: Callable[[list, Any], list], objective: str, lm: Callable[[str], str] | None,
                 log: Callable[[str], None] = lambda line: None):
        """`harness_for(template name)` builds the start pair's harness with that template in the slot;
        `run(tasks, harness)` rolls them out (samples per task in order); `lm(prompt) -> reply` is the
        reflection LM (None: GEPA only evaluates)."""
        self.slot, self.store, self.harness_for, self.run = slot, store, harness_for, run
        self.objective, self.lm, self.log = objective, lm, log
        self.iteration = 0

    # -- GEPA's adapter API ------------------------------------------------------------------------
    def evaluate(self, batch: list, candidate: dict[str, str], capture_traces: bool = False):
        from gepa.core.adapter import EvaluationBatch

        name = self.store.write(candidate[self.slot])
        try:
            harness = self.harness_for(name)
        except HarnessError as e:  # a text that does not render scores 0 everywhere, with its cause as feedback
            found = [Episodes(t.instruction, [], 0.0, f"the template does not render: {e}") for t in batch]
        else:
            found = self._episodes(batch, self.run(batch, harness))
        outputs = [{"task": t.name, "score": e.score, "error": e.error} for t, e in zip(batch, found)]
        return EvaluationBatch(outputs=outputs, scores=[e.score for e in found],
                               trajectories=found if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch, components_to_update: list[str]
                                ) -> dict[str, list[dict]]:
        records = []
        for found in eval_batch.trajectories or []:
            if found.episodes:
                records.append(reflect.record(found.instruction, found.episodes, found.score))
            else:
                records.append({"Inputs": {"task": found.instruction}, "Generated Outputs": "(no episode ran)",
                                "Feedback": found.error or "no episode"})
        return {name: records for name in components_to_update}

    def propose_new_texts(self, candidate: dict[str, str], reflective_dataset, components_to_update: list[str]
                          ) -> dict[str, str]:
        """GEPA calls this instead of its own proposer: the reflection LM's text, or nothing (the
        candidate is lost, and the rejection says why)."""
        from gepa.strategies.instruction_proposal import InstructionProposalSignature

        self.iteration += 1
        parent = candidate[self.slot]
        if self.slot not in components_to_update or not reflective_dataset.get(self.slot):
            return {}
        prompt = InstructionProposalSignature.prompt_renderer({
            "current_instruction_doc": parent, "dataset_with_feedback": reflective_dataset[self.slot],
            "prompt_template": reflect.reflection_prompt(self.slot)})
        try:
            reply = self.lm(prompt)
        except Exception as e:  # noqa: BLE001 - boundary: a failed reflection call loses one candidate only
            return self._reject(parent, f"reflection LM failed: {type(e).__name__}: {e}")
        try:
            text = reflect.parse_reply(reply)
        except ValueError as e:
            return self._reject(parent, str(e))
        problem = reflect.text_problem(text, parent)
        if problem is None:
            problem = self._render_problem(text)
        if problem is not None:
            return self._reject(parent, problem, text)
        self.store.record(self.store.write(text), parent, iteration=self.iteration)
        return {self.slot: text}

    # -- helpers -----------------------------------------------------------------------------------
    def _episodes(self, batch: list, trajectories: list) -> list[Episodes]:
        samples = max(1, len(trajectories) // max(1, len(batch)))
        found = []
        for i, task in enumerate(batch):
            episodes = trajectories[i * samples:(i + 1) * samples]
            values = [self._score(t) for t in episodes]
            found.append(Episodes(task.instruction, episodes, sum(values) / max(1, len(values))))
        return found

    def _score(self, traj) -> float:
        return float(passed(traj)) if self.objective == "pass_at_1" else credit(traj)

    def _render_problem(self, text: str) -> str | None:
        """Whether the harness renders with the text in its slot (variables, sandbox), before any rollout."""
        name = self.store.write(text)
        try:
            self.harness_for(name)
        except HarnessError as e:
            self.store.forget(text)
            return f"does not render in the harness: {e}"
        return None

    def _reject(self, parent: str, reason: str, text: str | None = None) -> dict[str, str]:
        self.store.reject(parent, reason, text)
        self.log(f"gepa {self.store.phase} {self.slot}: proposal {self.iteration} rejected: {reason[:200]}")
        return {}
