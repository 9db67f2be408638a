"""The vllm policy backend against a real vLLM server (its CPU build, installed by .ci/setup through `coevo
vllm install`), on the tiny model: the policy contract, the same greedy tokens and the same logprobs as
coevo's own decoder and as a training forward, a GRPO run whose every rollout samples the weights of the
step before (LoRA hot-loaded, and full weights reloaded in place), a rollout in real sandboxes without
lockstep, and a killed server, which ends its episodes as recorded failures rather than hanging the run.

One server is started for the module (about a minute on 2 cores) and shared, as a search shares it. The
full-weights test restarts it (a tied model), so it runs late; the killed-server test kills it, so it
runs last.
"""

from __future__ import annotations

import statistics
import time

import pytest
from policy_contract import SAMPLED, PolicyContract
from routing_helpers import short_harness, training_model

from coevo import GenerationRequest, SamplingParams
from coevo.policy import make_policy
from coevo.vllm.install import VLLMNotFound, vllm_python

try:
    vllm_python()
except VLLMNotFound as e:  # .ci/setup installs it; a machine without it says how to get it
    pytest.fail(f"{e}", pytrace=False)

PROMPTS = ["list the files", "count the lines of /app/data.txt and print them", "echo hello"]
"""Their greedy replies differ on the untrained tiny model (seed 0), as the contract needs."""


def chat_requests(tokenizer, contents=PROMPTS) -> list[GenerationRequest]:
    return [GenerationRequest(tokenizer.apply_chat_template(
        [{"role": "system", "content": "You are a shell agent."}, {"role": "user", "content": c}],
        add_generation_prompt=True, tokenize=True, return_dict=False)) for c in contents]


@pytest.fixture(scope="module")
def vllm(tiny_dense, tmp_path_factory):
    from coevo.vllm.server import stop_all

    policy = make_policy({"backend": "vllm", "model": str(tiny_dense), "max_model_len": 2048,
                          "log_dir": str(tmp_path_factory.mktemp("vllm-logs"))})
    yield policy
    stop_all()


@pytest.fixture(scope="module")
def hf(tiny_dense):
    return make_policy({"backend": "hf", "model": str(tiny_dense), "device": "cpu"})


class TestVLLMPolicy(PolicyContract):
    @pytest.fixture
    def policy(self, vllm, tiny_dense):
        vllm.server.use_weights(tiny_dense)
        vllm.served, vllm.adapter = vllm.server.model, None
        return vllm

    @pytest.fixture
    def requests(self, policy):
        return chat_requests(policy.tokenizer)


def test_greedy_tokens_are_coevos_own_and_logprobs_agree_with_training(vllm, hf, tiny_dense):
    """Greedy: token for token what coevo's KV-cached decoder writes. Sampled at temperature 1: vLLM's
    logprobs against TRL's training forward on the same tokens (the mismatch watch's measure)."""
    from coevo.train import mismatch as mm

    greedy = SamplingParams(temperature=0.0, max_tokens=24)
    requests = chat_requests(vllm.tokenizer)
    ours, theirs = hf.generate(requests, greedy), vllm.generate(requests, greedy)
    assert [c.token_ids for c in theirs] == [c.token_ids for c in ours]
    for a, b in zip(theirs, ours):
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-3

    sampled = vllm.generate(chat_requests(vllm.tokenizer, PROMPTS * 4), SamplingParams(temperature=1.0,
                                                                                        max_tokens=32, seed=1))
    prompts = [r.token_ids for r in chat_requests(vllm.tokenizer, PROMPTS * 4)]
    completions = [c.token_ids for c in sampled]
    trainer = mm.trainer_logprobs(training_model(tiny_dense), prompts, completions, vllm.pad_id, 4)
    m = mm.measure(trainer, [c.logprobs for c in sampled], [[1] * len(c) for c in completions])
    assert m.tokens > 100 and m.pearson >= 0.999 and m.max_abs_diff < 1e-2, m


def test_samples_of_one_task_differ_and_a_seed_repeats_them(vllm, tiny_dense):
    """The seed mixes in the episode's sample index: a GRPO group is not n copies of one draw."""
    vllm.server.use_weights(tiny_dense)
    vllm.served, vllm.adapter = vllm.server.model, None
    [request] = chat_requests(vllm.tokenizer, PROMPTS[:1])
    group = [GenerationRequest(request.token_ids, meta={"task": "t", "turn": 0, "sample": i}) for i in range(4)]
    first, again = vllm.generate(group, SAMPLED), vllm.generate(group, SAMPLED)
    assert len({tuple(c.token_ids) for c in first}) > 1
    assert [c.token_ids for c in first] == [c.token_ids for c in again]


def test_long_seeded_prompts_arriving_while_others_decode_keep_the_engine_alive(vllm, tiny_dense):
    """More prompt tokens arriving than one engine step takes, while other requests decode: vLLM would
    prefill them in chunks, which kills its CPU engine for seeded requests (reproduced with
    `--enable-chunked-prefill`: every request in flight fails with a 500); coevo prefills them whole."""
    import threading

    vllm.server.use_weights(tiny_dense)
    vllm.served, vllm.adapter = vllm.server.model, None
    decoding = [GenerationRequest(r.token_ids, meta={"sample": i})
                for i, r in enumerate(chat_requests(vllm.tokenizer, PROMPTS * 2))]
    long = [" ".join(f"{p} {i}" for i in range(60)) for p in PROMPTS * 6]
    arriving = [GenerationRequest(r.token_ids, meta={"sample": 100 + i})
                for i, r in enumerate(chat_requests(vllm.tokenizer, long))]
    assert sum(len(r.token_ids) for r in arriving) > 2 * 2048
    out = {}

    def ask(name, requests, max_tokens):
        out[name] = vllm.generate(requests, SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=4))

    first = threading.Thread(target=ask, args=("decoding", decoding, 200))
    first.start()
    time.sleep(1.0)
    ask("arriving", arriving, 8)
    first.join()
    assert len(out["decoding"]) == 6 and len(out["arriving"]) == 18 and vllm.server.alive()
    assert all(len(c.token_ids) == len(c.logprobs) > 0 for c in [*out["decoding"], *out["arriving"]])


def moved_adapter(tiny_dense):
    """A LoRA-wrapped tiny model whose adapter moves the logprobs (as a GRPO update would)."""
    import torch

    from coevo.train import lora
    from coevo.train.lora import LoraSpec

    model = lora.wrap(training_model(tiny_dense), LoraSpec(rank=8), "test", seed=0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    return model


def sampled_against(policy, model, tiny_dense):
    """What `policy` samples, measured against the adapted model's training forward and the base's."""
    from coevo.train import mismatch as mm

    requests = chat_requests(policy.tokenizer)
    sampled = policy.generate(requests, SamplingParams(temperature=1.0, max_tokens=24, seed=2))
    prompts, completions = [r.token_ids for r in requests], [c.token_ids for c in sampled]
    masks = [[1] * len(c) for c in completions]
    rollout_lp = [c.logprobs for c in sampled]
    adapted = mm.measure(mm.trainer_logprobs(model, prompts, completions, policy.pad_id, 4), rollout_lp, masks)
    base = mm.measure(mm.trainer_logprobs(training_model(tiny_dense), prompts, completions, policy.pad_id, 4),
                      rollout_lp, masks)
    return adapted, base


def test_a_hot_loaded_adapter_is_what_the_next_request_samples(vllm, tiny_dense, tmp_path):
    """push_weights as a GRPO step calls it: the adapter under a new name; the next logprobs are the
    adapted model's (a training forward of the merged weights) and not the base's."""
    model = moved_adapter(tiny_dense)
    vllm.push_weights(model, tmp_path / "step-1")
    assert vllm.served.startswith("adapter-") and vllm.served in vllm.server.adapters
    adapted, base = sampled_against(vllm, model, tiny_dense)
    assert adapted.max_abs_diff < 1e-3, adapted
    assert base.max_abs_diff > 0.05, base


def test_a_merged_adapter_is_reloaded_in_place_and_sampled(vllm, tiny_dense, tmp_path):
    """`adapters: merge` (for vLLM's CPU build, where LoRA prefills are slow): the adapter is merged into a
    full folder and reloaded in place, with no restart although the model ties its output layer (the merge
    leaves the embeddings as they were); the next logprobs are the adapted model's."""
    model = moved_adapter(tiny_dense)
    model.save_pretrained(tmp_path / "adapter")
    process = vllm.server.process
    merged = make_policy({"backend": "vllm", "model": str(tmp_path / "adapter"), "max_model_len": 2048,
                          "log_dir": str(tmp_path), "adapters": "merge"})
    assert merged.server is vllm.server and merged.adapter is None and merged.served == vllm.server.model
    assert merged.base.parent == tmp_path / "vllm-merged"
    adapted, base = sampled_against(merged, model, tiny_dense)
    assert vllm.server.process is process and vllm.server.weights == str(merged.base.resolve())
    assert adapted.max_abs_diff < 1e-3, adapted
    assert base.max_abs_diff > 0.05, base


def test_grpo_on_vllm_samples_each_step_with_the_weights_of_the_step_before(tiny_dense, coin, tmp_path):
    """Two LoRA GRPO steps with vllm rollouts: the rollouts of step 2 are the step-1 checkpoint's (its
    training forward gives their logprobs) and not the start's; the mismatch watch agrees at every step."""
    from coevo.rollout import load_trajectories
    from coevo.tasks import load_taskset
    from coevo.train import mismatch as mm
    from coevo.train.grpo import TrainSpec, train_grpo

    spec = TrainSpec(steps=2, group_size=2, tasks_per_step=2, reward="partial", learning_rate=0.02,
                     lora={"rank": 8}, rollout_policy={"backend": "vllm", "max_model_len": 2048})
    run = tmp_path / "run"
    result = train_grpo(tiny_dense, short_harness(), load_taskset(coin).tasks, run, spec)
    assert [m["step"] for m in result.metrics] == [1, 2]
    for m in result.metrics:
        assert m["mismatch/pearson"] >= 0.999 and m["mismatch/max_abs_diff"] < 1e-2, m
    step2 = load_trajectories(run / "rollouts" / "step-2.jsonl")
    rows = [(t.prompt_ids, t.completion_ids, t.completion_mask, t.logprobs) for t in step2 if t.completion_ids]
    prompts, completions, masks, rollout_lp = (list(x) for x in zip(*rows))

    def against(folder):
        return mm.measure(mm.trainer_logprobs(training_model(folder), prompts, completions, 0, 4), rollout_lp, masks)

    assert against(run / "checkpoints" / "checkpoint-1").max_abs_diff < 1e-3
    assert against(tiny_dense).max_abs_diff > 1e-3  # the step moved the weights, and vLLM sampled the new ones
    assert sorted(p.name for p in (run / "rollout_weights").iterdir()) == ["step-0", "step-1"]


def test_a_rollout_in_sandboxes_runs_episodes_on_their_own(vllm, tiny_dense, coin):
    """No lockstep: each episode asks for its own turns; the trajectories are whole and verified."""
    from coevo.rollout import rollout
    from coevo.tasks import load_taskset

    vllm.server.use_weights(tiny_dense)
    vllm.served, vllm.adapter = vllm.server.model, None
    trajectories = rollout(load_taskset(coin).tasks, short_harness(), vllm, n_per_task=3, seed=0)
    assert len(trajectories) == 6 and all(t.status not in ("policy_error", "sandbox_error") for t in trajectories)
    assert all(len(t.logprobs) == len(t.completion_ids) and t.model_tokens for t in trajectories)
    assert all(t.reward is not None and t.verify_error is None for t in trajectories)


def test_coevo_serve_on_vllm_records_sessions_as_its_own_engine_does(vllm, tiny_dense, coin):
    """`coevo serve --engine vllm`: the endpoint and its per-episode sessions are coevo's, vLLM generates;
    an agent's episode through a session is what the session recorded, token for token."""
    from serve_helpers import MODEL, serving

    from coevo.rollout import rollout
    from coevo.tasks import load_taskset

    vllm.server.use_weights(tiny_dense)
    vllm.served, vllm.adapter = vllm.server.model, None
    with serving(vllm, vllm.tokenizer, context_length=vllm.context_length) as (server, app):
        agent = make_policy({"backend": "openai", "model": MODEL, "base_url": server.url + "/sessions/ep-0/v1",
                             "api_key_env": None, "tokenizer": str(tiny_dense)})
        [episode] = rollout(load_taskset(coin).tasks[:1], short_harness(), agent, seed=0)
        [recorded] = app.state.served.sessions.pop("ep-0")
    assert episode.status not in ("policy_error", "sandbox_error") and episode.model_tokens, episode.error
    n = len(recorded.completion_ids)
    assert recorded.prompt_ids == episode.prompt_ids and recorded.completion_ids == episode.completion_ids[:n]
    assert recorded.logprobs == pytest.approx(episode.logprobs[:n], abs=1e-6)


def test_a_server_given_by_url_is_used_as_it_is(vllm, tiny_dense, tmp_path):
    """`base_url`: coevo starts nothing, samples the server's base model, and refuses to push full weights
    into a server it does not own (adapters only), naming what to do."""
    from coevo.vllm.server import VLLMError

    vllm.server.use_weights(tiny_dense)
    vllm.served, vllm.adapter = vllm.server.model, None
    given = make_policy({"backend": "vllm", "model": str(tiny_dense), "base_url": vllm.server.base_url})
    assert given.server.process is None and given.served == "base"
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    requests = chat_requests(given.tokenizer)
    assert [c.token_ids for c in given.generate(requests, greedy)] == \
        [c.token_ids for c in vllm.generate(requests, greedy)]
    with pytest.raises(VLLMError, match="takes LoRA adapters only; train with lora.rank > 0"):
        given.push_weights(training_model(tiny_dense), tmp_path / "full")


def test_full_weights_are_pushed_and_sampled(vllm, hf, tiny_dense, tmp_path):
    """Full-weight training's push: saved and swapped in. The tiny model ties its output layer to its
    embeddings, which vLLM 0.32 cannot reload in place (the output layer kept its old weights): the server
    restarts on the new weights, and the policy follows it to its new port."""
    import torch

    model = training_model(tiny_dense)
    with torch.no_grad():
        model.lm_head.weight.mul_(1.5)  # sharper: every logprob changes
    process = vllm.server.process
    vllm.push_weights(model, tmp_path / "full")
    assert vllm.server.process is not process and process.poll() is not None
    assert vllm.served == vllm.server.model and vllm.server.weights == str((tmp_path / "full").resolve())
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    requests = chat_requests(vllm.tokenizer)
    reloaded = vllm.generate(requests, greedy)
    local = make_policy({"backend": "hf", "model": str(tmp_path / "full"), "device": "cpu"}).generate(requests, greedy)
    assert [c.token_ids for c in reloaded] == [c.token_ids for c in local]
    assert statistics.mean(abs(a - b) for c, d in zip(reloaded, local) for a, b in zip(c.logprobs, d.logprobs)) < 1e-3


def test_a_killed_server_ends_its_episodes_as_recorded_failures_or_is_started_again(vllm, coin):
    """SIGKILL the server: with no restart left, every episode ends as policy_error naming vLLM and its exit,
    and the rollout returns; with one, the next request starts it again on the same weights and the
    episodes run. The module's server, killed last."""
    import os
    import signal

    from coevo.rollout import rollout
    from coevo.tasks import load_taskset

    server, weights = vllm.server, vllm.server.weights
    vllm.max_restarts, restarts = 0, server.restarts
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=30)
    tasks = load_taskset(coin).tasks
    trajectories = rollout(tasks, short_harness(), vllm, n_per_task=2, seed=0)
    assert {t.status for t in trajectories} == {"policy_error"}
    assert all("vLLM" in t.error and "exited with -9" in t.error and "max_restarts 0" in t.error
               for t in trajectories), trajectories[0].error
    vllm.max_restarts = restarts + 1
    trajectories = rollout(tasks, short_harness(), vllm, n_per_task=2, seed=0)
    assert "policy_error" not in {t.status for t in trajectories}, trajectories[0].error
    assert server.restarts == restarts + 1 and server.alive() and server.weights == weights
    assert all(t.model_tokens for t in trajectories)  # sampled by the restarted server
