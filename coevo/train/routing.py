"""Rollout routing replay (R3, arXiv 2510.11370) for Mixture-of-Experts policies: record the experts the
rollout's routers chose, and force that choice in the training forward.

Why: a router's top-k is a discrete choice, so the small numeric differences between the rollout copy (bf16,
KV-cached, batched decoding) and the training forward (fp32, whole sequences) flip it now and then. A flip
sends a token through other experts than those that sampled it, and GRPO's importance ratio then compares
two different computations. Replay makes the training forward take the rollout's experts, while the routing
weights are recomputed from the live router's logits (softmax over all experts, gathered at the replayed
ones, renormalised as the model does): the router still gets gradients.

The layout, which must not shift (a shifted routing silently replays the wrong experts): beside completion
token j (`Trajectory.routing[j]`, one [top_k] list per MoE layer) are the experts chosen at the forward step
that produced token j's distribution, i.e. the step its logprob comes from: at the input position just before
it (the last prompt token for a reply's first token, the previous sampled token for the others). The training
forward replays them at that same position, `len(prompt) + j - 1`. Environment tokens (mask 0) carry `NONE`
(-1, never an expert), and every position that predicts no sampled token takes the live router's own choice.

Supported routers: transformers' Qwen3-MoE, Qwen2-MoE and OLMoE ones, which share one contract (they return
logits, weights, indices; softmax, top-k, optional `norm_topk_prob`). Only Qwen3-MoE is tested (the tiny
MoE of `coevo init-model --moe`). torch is imported inside functions: importing this module is cheap.
"""

from __future__ import annotations

from pathlib import Path

NONE = -1
"""The routing of a token that has none recorded (environment tokens): never a valid expert index."""
ROUTERS = ("Qwen3MoeTopKRouter", "Qwen2MoeTopKRouter", "OlmoeTopKRouter")


def routers(model) -> list:
    """The model's top-k routers in layer order; empty for a dense model (or an unsupported MoE)."""
    return [m for m in model.modules() if type(m).__name__ in ROUTERS]


def buffer_routing(per_token: list) -> list[list[list[int]]]:
    """A token buffer's routing column: `per_token` holds, for each buffer token, its [layers][top_k] experts
    or None (environment tokens); None becomes NONE of the same shape. Empty when nothing was recorded (a
    dense model, or a policy that does not record)."""
    shape = next((r for r in per_token if r is not None), None)
    if shape is None:
        return []
    blank = [[NONE] * len(shape[0]) for _ in shape]
    return [blank if r is None else r for r in per_token]


def extend_routing(column: list, start: int, routing: list | None, n_new: int) -> list:
    """A trajectory's routing column grown to `start` tokens (environment tokens: NONE), then by a completion
    of `n_new` tokens with `routing` (None: NONE). Stays empty while nothing was recorded (a served segment)."""
    if not column and routing is None:
        return column
    shape = routing[0] if routing else column[0]
    blank = [[NONE] * len(shape[0]) for _ in shape]
    return column + [blank] * (start - len(column)) + (routing if routing is not None else [blank] * n_new)


class RoutingTaps:
    """Forward hooks that keep what each router of `model` chose in the last forward (after any replay)."""

    def __init__(self, model):
        self.routers = routers(model)
        self.last: list = [None] * len(self.routers)
        self.handles = [r.register_forward_hook(self._keeper(i)) for i, r in enumerate(self.routers)]

    def _keeper(self, layer: int):
        def keep(module, args, output):
            self.last[layer] = output[2].detach()

        return keep

    def chosen(self, batch: int, seq: int):
        """The last forward's experts as (batch, seq, layers, top_k)."""
        import torch

        return torch.stack([x.reshape(batch, seq, -1) for x in self.last], dim=2)

    def close(self) -> None:
        for h in self.handles:
            h.remove()


class RoutingReplay:
    """Hooks on a training model: each forward over rows it has been told about (`remember`) replays their
    recorded routing; rows it does not know (and positions without a record) route live. With `force=False`
    it only watches: it counts how often the live choice differs from the record, and changes nothing.

    The rows are recognised by their tokens (those the attention mask covers), so the batch may be padded,
    shuffled and split as TRL does; `counts` says what each forward replayed, per MoE layer."""

    def __init__(self, model, force: bool = True):
        from transformers import PreTrainedModel

        self.routers, self.force = routers(model), force
        if not self.routers:
            raise ValueError(f"{type(model).__name__} has no Mixture-of-Experts router ({', '.join(ROUTERS)}): "
                             "nothing to replay")
        self.top_k = self.routers[0].top_k
        self.table: dict[tuple[int, ...], tuple[int, object]] = {}
        self.plan = None
        """(batch * seq, layers, top_k) for the forward under way; None between forwards."""
        self.reset_counts()
        # The decoder stack, not the LM wrapper: PEFT's LoRA calls the wrapper's forward directly (no hooks).
        backbone = next(m for m in model.modules() if isinstance(m, PreTrainedModel) and m.base_model is m)
        self.handles = [backbone.register_forward_pre_hook(self._plan, with_kwargs=True),
                        backbone.register_forward_hook(self._clear)]
        self.handles += [r.register_forward_hook(self._router_hook(i)) for i, r in enumerate(self.routers)]

    def reset_counts(self) -> None:
        self.counts = {"rows": 0, "unknown_rows": 0, "tokens": 0, "flips": [0] * len(self.routers)}
        """Rows seen and not known, tokens with a record, and per layer tokens whose live choice differed."""

    def remember(self, prompts: list[list[int]], completions: list[list[int]], routing: list[list]) -> None:
        """The rows the next forwards may see, with each completion's recorded routing (`Trajectory.routing`,
        empty: route live). Replaces the rows remembered before."""
        import torch

        self.table = {}
        for p, c, r in zip(prompts, completions, routing):
            if not r:
                continue
            if len(r) != len(c):
                raise ValueError(f"routing replay: {len(r)} routing records for {len(c)} completion tokens; "
                                 "Trajectory.routing must follow the token buffer exactly")
            self.table.setdefault(tuple(p) + tuple(c), (len(p), torch.tensor(r, dtype=torch.long)))

    def metrics(self, prefix: str = "routing") -> dict[str, float]:
        """Per layer, the fraction of recorded tokens whose live routing differs from the record (what
        replay overrides); and the rows of the forwards that had no record."""
        n = max(1, self.counts["tokens"])
        out = {f"{prefix}/flip_frac/layer{i}": f / n for i, f in enumerate(self.counts["flips"])}
        return {**out, f"{prefix}/flip_frac": sum(self.counts["flips"]) / n / len(self.routers),
                f"{prefix}/tokens": float(self.counts["tokens"]),
                f"{prefix}/unknown_rows": float(self.counts["unknown_rows"])}

    def close(self) -> None:
        for h in self.handles:
            h.remove()

    # -- hooks ---------------------------------------------------------------------------------------
    def _plan(self, module, args, kwargs):
        import torch

        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None or not self.table:
            return
        mask = kwargs.get("attention_mask")
        batch, seq = ids.shape
        plan = torch.full((batch, seq, len(self.routers), self.top_k), NONE, dtype=torch.long)
        for b in range(batch):
            kept = ids[b] if mask is None or mask.dim() != 2 else ids[b][mask[b].bool()]
            found = self.table.get(tuple(kept.tolist()))
            self.counts["rows"] += 1
            if found is None:
                self.counts["unknown_rows"] += 1
                continue
            n_prompt, routing = found
            start = 0 if mask is None or mask.dim() != 2 else int(mask[b].nonzero()[0])
            at = start + n_prompt - 1  # token j's routing sits where token j is predicted
            plan[b, at: at + len(routing)] = routing
        self.plan = plan.reshape(batch * seq, len(self.routers), self.top_k).to(ids.device)

    def _clear(self, module, args, output):
        self.plan = None

    def _router_hook(self, layer: int):
        def replay(module, args, output):
            if self.plan is None:
                return None
            logits, _, live = output
            forced = self.plan[:, layer]
            recorded = forced[:, 0] >= 0
            if layer == 0:
                self.counts["tokens"] += int(recorded.sum())
            differs = (forced.sort(-1).values != live.sort(-1).values).any(-1) & recorded
            self.counts["flips"][layer] += int(differs.sum())
            if not self.force:
                return None
            import torch

            chosen = torch.where(recorded[:, None], forced, live)
            weights = torch.softmax(logits, dim=-1, dtype=torch.float).gather(-1, chosen)
            if module.norm_topk_prob:
                weights = weights / weights.sum(dim=-1, keepdim=True)
            return logits, weights.to(logits.dtype), chosen

        return replay


def attach(model, replay: bool) -> RoutingReplay | None:
    """The routing hooks a training model gets: on a Mixture of Experts, replay (`replay`, the setting
    `train.routing_replay`) or only watch (flips still counted); on a dense model none, and `replay` is an
    error naming the setting."""
    from coevo.train.spec import TrainSpecError

    if routers(model):
        return RoutingReplay(model, force=replay)
    if replay:
        raise TrainSpecError(f"training spec: routing_replay: true needs a Mixture-of-Experts model, but "
                             f"{model.name_or_path} is a dense {model.config.model_type} ({type(model).__name__}), "
                             "with no router to replay; set train.routing_replay: false, or train an MoE "
                             "(coevo init-model --moe)")
    return None


def check_replayable(model_dir: Path | None, train: dict, source: Path) -> None:
    """Before any compute (coevo check): `train.routing_replay` on needs a Mixture-of-Experts model folder
    (`config.json` with experts); None is the dense tiny model a search builds itself."""
    import json

    if not train.get("routing_replay"):
        return
    config = json.loads((model_dir / "config.json").read_text()) if model_dir is not None else {}
    if not (config.get("num_local_experts") or config.get("num_experts")):
        what = f"{model_dir} is a dense {config.get('model_type')}" if model_dir else "no `model` builds the dense tiny model"
        raise ValueError(f"{source}: train.routing_replay: true needs a Mixture-of-Experts model, but {what}; name "
                         "an MoE in `model` (e.g. `coevo init-model --moe`, then `coevo warmstart`) or turn it off")
