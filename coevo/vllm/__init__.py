"""vLLM as coevo's rollout engine: the engine GPU users run, here behind its OpenAI server.

    install.py  its own venv (vLLM pins a transformers older than coevo's), with the CPU build's traps handled
    server.py   one vLLM OpenAI server on 127.0.0.1 per base model, started for the run (or one given by URL),
                with LoRA adapters hot-loaded by name and the prefix cache reset on every update
    policy.py   `VLLMPolicy`, the `vllm` policy backend: token ids in and out, nothing re-tokenized, and the
                trainer's weights pushed to the server after each GRPO step
    cli.py      `coevo vllm install | where`

coevo talks to vLLM over HTTP only: nothing here imports the `vllm` package.
"""
