"""Policies that know their replies in advance: `ScriptedPolicy` for tests, `OraclePolicy` for warm-start
data and for checking that a harness can solve the tasks at all.

Both find an episode's turn in `request.meta["turn"]` (set by the rollout), or else count the assistant
messages in `request.messages`. With a tokenizer they return real token ids, ending with the stop token
`<|im_end|>` like a model's completion does, and logprob 0 (probability 1) per token; without one,
text only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from coevo import Completion, GenerationRequest, SamplingParams

EOS = "<|im_end|>"


def turn_of(request: GenerationRequest) -> int:
    if "turn" in request.meta:
        return int(request.meta["turn"])
    return sum(1 for m in request.messages if m.get("role") == "assistant")


class ScriptedPolicy:
    def __init__(self, replies: list[str] | Callable[[GenerationRequest, int], str], tokenizer=None):
        """`replies[turn]` (the last one repeats), or `replies(request, turn) -> str`."""
        if not callable(replies) and not replies:
            raise ValueError("ScriptedPolicy needs at least one reply")
        self.replies, self.tokenizer = replies, tokenizer

    def reply(self, request: GenerationRequest, turn: int) -> str:
        if callable(self.replies):
            return self.replies(request, turn)
        return self.replies[min(turn, len(self.replies) - 1)]

    def generate(self, requests: list[GenerationRequest], params: SamplingParams) -> list[Completion]:
        return [self._completion(self.reply(r, turn_of(r)), params) for r in requests]

    def _completion(self, text: str, params: SamplingParams) -> Completion:
        if self.tokenizer is None:
            return Completion(text, [], [])
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) >= params.max_tokens:  # as a model would: cut at max_tokens, no stop token
            ids = ids[: params.max_tokens]
            return Completion(self.tokenizer.decode(ids), ids, [0.0] * len(ids), finish_reason="length")
        ids.append(self.tokenizer.convert_tokens_to_ids(EOS))
        return Completion(text, ids, [0.0] * len(ids))


def solution_commands(solve_sh: Path) -> list[str]:
    """The commands of a solution/solve.sh: one per line, without the shebang, comments and blanks.

    Generated tasks write one complete command per line (TaskSpec.solution), so lines replay one by one.
    """
    lines = solve_sh.read_text().splitlines()
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


class OraclePolicy(ScriptedPolicy):
    """Plays each task's solution/solve.sh through the harness's own action format.

    Turn 0 runs all the solution's commands; turn 1 submits, after the agent has seen their output.
    With `one_turn=True` the commands and the submit go in a single reply.
    """

    def __init__(self, harness, tasks: Iterable, tokenizer=None, one_turn: bool = False):
        """`tasks`: `coevo.tasks.Task`s; each needs a solution/solve.sh."""
        super().__init__(self._oracle_reply, tokenizer)
        self.harness, self.one_turn = harness, one_turn
        self.solutions: dict[str, list[str]] = {}
        self.instructions: dict[str, str] = {}
        for task in tasks:
            if task.solution is None:
                raise ValueError(f"task {task.name}: no solution/solve.sh in {task.path}; the oracle needs one")
            self.solutions[task.name] = solution_commands(task.solution)
            self.instructions[task.instruction.strip()] = task.name

    def task_of(self, request: GenerationRequest) -> str | None:
        """The task named in the request's meta (coevo's loop), or else whose instruction the first user
        message quotes (a native agent behind `coevo serve`, whose calls carry no meta)."""
        if "task" in request.meta:
            return request.meta["task"]
        first = next((m.get("content") or "" for m in request.messages if m.get("role") == "user"), "")
        return next((name for text, name in self.instructions.items() if text in first), None)

    def _oracle_reply(self, request: GenerationRequest, turn: int) -> str:
        from coevo.harness import render_action

        name = self.task_of(request)
        if name not in self.solutions:
            raise ValueError(f"oracle policy: the request names task {name!r} (meta, or the instruction its first "
                             f"message quotes), not one of the {len(self.solutions)} tasks it was given")
        if self.one_turn:
            return render_action(self.harness, self.solutions[name], submit=True)
        if turn == 0:
            return render_action(self.harness, self.solutions[name], submit=False)
        return render_action(self.harness, [], submit=True)
