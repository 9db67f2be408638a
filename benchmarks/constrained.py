"""Constrained action decoding (coevo.harness.grammar): what the grammar costs per decoding step, xgrammar
against llguidance, and what it does to the train/rollout logprob comparison.

    .venv/bin/python benchmarks/constrained.py --model smollm2-135m [--batches 1 8 32] [--max-tokens 24]
    .venv/bin/python benchmarks/constrained.py            # a fresh tiny model

Three tables, on the bundled tasks' real first-turn prompts under the three shipped harnesses:
1. The KV-cached decoder at batch 1, 8 and 32, unconstrained and constrained (temperature 1, same seed):
   milliseconds per decoding step (the decode phase's time over its steps; prefill excluded), the part
   of a constrained step spent filling and applying the masks and advancing the matchers, and the share
   of replies that parse. Medians over --repeats.
2. xgrammar against llguidance (`pip install -e '.[llguidance]'`) on the model's tokenizer: the tokenizer's
   one-time setup, each grammar's compile time, and the per-step cost of filling 32 rows' masks while
   replaying the 32 constrained replies of table 1 (xgrammar row by row and with its BatchGrammarMatcher).
3. The constrained replies' rollout logprobs against a training forward of the same tokens, with and
   without the replayed grammar masks (coevo.train.mismatch.grammar_logprobs): Pearson and mean |Δ|.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from policy import first_prompts
from rich.console import Console
from rich.table import Table

from coevo import SamplingParams
from coevo.harness import FormatError, load_harness, parse_action
from coevo.harness.grammar import RowMatchers, action_grammar, compile_for
from coevo.policy.hf import HFPolicy, sampler
from coevo.tasks import load_taskset
from coevo.train import mismatch as mm

ROOT = Path(__file__).resolve().parent.parent
HARNESSES = ("mini_bash", "terminus_json", "qwen_tools")


class Timed(RowMatchers):
    """RowMatchers that add up the time spent in them."""

    def __init__(self, *args):
        super().__init__(*args)
        self.seconds = 0.0

    def mask(self, logits, rows):
        t = time.perf_counter()
        super().mask(logits, rows)
        self.seconds += time.perf_counter() - t

    def accept(self, row, token):
        t = time.perf_counter()
        super().accept(row, token)
        self.seconds += time.perf_counter() - t


def decode(policy: HFPolicy, prompts: list[list[int]], grammar: str | None, max_tokens: int, seed: int):
    """One cached decode (the prompts' states are cached after the first call: decoding is what is timed):
    (ms per step, ms of grammar work per step, rows)."""
    import torch

    params = SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=seed, grammar=grammar)
    matchers = None
    if grammar is not None:
        matchers = Timed(compile_for(policy.tokenizer, policy.vocab_size, grammar), len(prompts),
                         policy.stop_ids[0], policy.vocab_size)
    before = policy.decoder.stats.decode_s
    torch.manual_seed(seed)
    with torch.inference_mode():
        rows = policy.decoder.generate(prompts, max_tokens, sampler(params), None, matchers)
    steps = max(len(r.tokens) for r in rows)
    ms = 1000 * (policy.decoder.stats.decode_s - before) / steps
    return ms, (1000 * matchers.seconds / steps if matchers else 0.0), rows


def parses(policy: HFPolicy, harness, rows) -> float:
    ok = 0
    for r in rows:
        try:
            ok += bool(parse_action(harness, policy._completion(r.tokens, r.logprobs).text))
        except FormatError:
            pass
    return ok / len(rows)


def step_table(policy, harnesses, prompts, args) -> tuple[Table, dict]:
    table = Table(title=f"1. decoding step, KV-cached, temperature 1, {args.max_tokens} new tokens "
                        f"(median of {args.repeats})")
    for col in ("harness", "batch", "plain ms/step", "constrained ms/step", "grammar ms/step", "overhead",
                "parse plain", "parse constrained"):
        table.add_column(col, justify="right")
    kept = {}
    for name, h in harnesses.items():
        g = action_grammar(h)
        for b in args.batches:
            batch = (prompts[name] * b)[:b]
            plain = [decode(policy, batch, None, args.max_tokens, args.seed + k) for k in range(args.repeats)]
            cons = [decode(policy, batch, g, args.max_tokens, args.seed + k) for k in range(args.repeats)]
            p_ms, c_ms = statistics.median(x[0] for x in plain), statistics.median(x[0] for x in cons)
            g_ms = statistics.median(x[1] for x in cons)
            kept[(name, b)] = (batch, cons[0][2])
            table.add_row(name, str(b), f"{p_ms:.1f}", f"{c_ms:.1f}", f"{g_ms:.2f}", f"{c_ms / p_ms - 1:+.0%}",
                          f"{parses(policy, h, plain[0][2]):.2f}", f"{parses(policy, h, cons[0][2]):.2f}")
    return table, kept


def engine_table(policy, harnesses, kept, batch: int) -> Table:
    import llguidance
    import llguidance.hf
    import xgrammar as xgr
    from llguidance.gbnf_to_lark import any_to_lark

    vocab, stop = policy.vocab_size, policy.stop_ids[0]
    table = Table(title=f"2. xgrammar 0.2.8 vs llguidance {llguidance.get_version()}: setup, compile, "
                        f"mask fill per step at batch {batch} (replaying table 1's replies)")
    for col in ("engine", "tokenizer setup s", *(f"{n} compile ms" for n in harnesses),
                *(f"{n} ms/step" for n in harnesses), "rows rejected"):
        table.add_column(col, justify="right")
    t = time.perf_counter()
    info = xgr.TokenizerInfo.from_huggingface(policy.tokenizer, vocab_size=vocab)
    xgr_setup = time.perf_counter() - t
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    t = time.perf_counter()
    lltok = llguidance.hf.from_tokenizer(policy.tokenizer, n_vocab=vocab, eos_token=stop)
    llg_setup = time.perf_counter() - t
    rows = {e: [] for e in ("xgrammar", "xgrammar batch", "llguidance")}
    compile_ms = {e: [] for e in rows}
    for name, h in harnesses.items():
        g = action_grammar(h)
        t = time.perf_counter()
        compiled = compiler.compile_grammar(g)
        compile_ms["xgrammar"].append(1000 * (time.perf_counter() - t))
        lark = llguidance.LLMatcher.grammar_from_lark(any_to_lark(g))
        t = time.perf_counter()
        llg = [llguidance.LLMatcher(lltok, lark) for _ in range(batch)]
        compile_ms["llguidance"].append(1000 * (time.perf_counter() - t) / batch)
        for engine, ms in replay_all([r.tokens for r in kept[(name, batch)][1]], compiled, llg, stop, vocab).items():
            rows[engine].append(ms)
    compile_ms["xgrammar batch"] = compile_ms["xgrammar"]
    for engine, per_step in rows.items():
        setup = llg_setup if engine == "llguidance" else xgr_setup
        table.add_row(engine, f"{setup:.2f}", *(f"{c:.1f}" for c in compile_ms[engine]),
                      *(f"{ms:.2f}" for ms, _ in per_step), str(sum(r for _, r in per_step)))
    return table


def replay_all(tokens: list[list[int]], compiled, llg: list, stop: int, vocab: int) -> dict[str, float]:
    """Each engine's milliseconds per step over the same recorded replies."""
    import llguidance.torch as llt
    import xgrammar as xgr

    n = len(tokens)
    xm = [xgr.GrammarMatcher(compiled, override_stop_tokens=[stop]) for _ in range(n)]
    xb = [xgr.GrammarMatcher(compiled, override_stop_tokens=[stop]) for _ in range(n)]
    bgm = xgr.BatchGrammarMatcher(max_threads=2)
    return {
        "xgrammar": replay(tokens, xgr.allocate_token_bitmask(n, vocab),
                           lambda bm, live: [xm[i].fill_next_token_bitmask(bm, i) for i in live],
                           lambda i, t: xm[i].accept_token(t)),
        "xgrammar batch": replay(tokens, xgr.allocate_token_bitmask(n, vocab),
                                 lambda bm, live: bgm.batch_fill_next_token_bitmask([xb[i] for i in live], bm, live),
                                 lambda i, t: xb[i].accept_token(t)),
        "llguidance": replay(tokens, llt.allocate_token_bitmask(n, vocab),
                             lambda bm, live: [llt.fill_next_token_bitmask(llg[i], bm, i) for i in live],
                             lambda i, t: llg[i].consume_token(t)),
    }


def replay(tokens: list[list[int]], bitmask, fill, accept) -> tuple[float, int]:
    """Milliseconds per step to fill the live rows' masks and advance them by their recorded tokens, and
    how many rows the engine stopped on a token it would not accept (left out from then on)."""
    steps, total, rejected = max(map(len, tokens)), 0.0, set()
    for s in range(steps):
        live = [i for i, row in enumerate(tokens) if s < len(row) and i not in rejected]
        t = time.perf_counter()
        fill(bitmask, live)
        for i in live:
            if accept(i, tokens[i][s]) is False:
                rejected.add(i)
        total += time.perf_counter() - t
    return 1000 * total / steps, len(rejected)


def mismatch_table(policy, harnesses, kept, batch: int) -> Table:
    table = Table(title=f"3. constrained rollout logprobs vs a training forward (batch {batch}, temperature 1)")
    for col in ("harness", "tokens", "masked: pearson", "masked: mean |Δ|", "unmasked: pearson",
                "unmasked: mean |Δ|"):
        table.add_column(col, justify="right")
    for name, h in harnesses.items():
        prompts, rows = kept[(name, batch)]
        comps = [r.tokens for r in rows]
        masks = [[1] * len(c) for c in comps]
        masked, plain = mm.grammar_logprobs(policy.model, prompts, comps, masks, action_grammar(h),
                                            policy.tokenizer, 1.0, policy.stop_ids[0])
        a = mm.measure(masked, [r.logprobs for r in rows], masks)
        b = mm.measure(plain, [r.logprobs for r in rows], masks)
        table.add_row(name, str(a.tokens), f"{a.pearson:.5f}", f"{a.mean_abs_diff:.1e}", f"{b.pearson:.4f}",
                      f"{b.mean_abs_diff:.3f}")
    return table


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a model folder or name (coevo model list); none: tiny")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = args.model
    if model is None:
        from coevo.train.model import build_tiny_model

        model = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny", ROOT / "tasks", seed=0)
    policy = HFPolicy(model, device="cpu")
    tasks = load_taskset(ROOT / "tasks").split("dev")[:8]
    harnesses = {n: load_harness(ROOT / "harnesses" / f"{n}.yaml") for n in HARNESSES}
    prompts = {n: first_prompts(policy, h, tasks) for n, h in harnesses.items()}
    console = Console(width=170)
    console.print(f"model: {policy.path} (vocab {policy.vocab_size}), torch threads {args.threads}")
    table, kept = step_table(policy, harnesses, prompts, args)
    console.print(table)
    console.print(engine_table(policy, harnesses, kept, max(args.batches)))
    console.print(mismatch_table(policy, harnesses, kept, 8 if 8 in args.batches else max(args.batches)))


if __name__ == "__main__":
    main()
