"""`coevo serve MODEL_DIR`: the checkpoint behind an OpenAI-compatible endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def serve(
    model_dir: Annotated[Path, typer.Argument(help="A Hugging Face checkpoint folder (with its tokenizer), "
                                             "or a model name (`coevo model list`).")],
    host: Annotated[str, typer.Option(help="Interface to bind; 127.0.0.1 keeps it on this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8000,
    name: Annotated[str | None, typer.Option(help="The model's name in the API (default: the folder's name).")
                    ] = None,
    api_key: Annotated[str | None, typer.Option(
        envvar="COEVO_API_KEY", show_envvar=True,
        help="Require 'Authorization: Bearer KEY'. Prefer the environment variable: a flag shows in `ps`.")] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="max_tokens for requests that do not give one.")] = 512,
    batch_window_ms: Annotated[float, typer.Option(min=0, help="How long to gather concurrent requests.")] = 5.0,
    max_batch: Annotated[int, typer.Option(min=1, help="Most rows in one generate call.")] = 64,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    dtype: Annotated[str, typer.Option(help="float32 or bfloat16.")] = "float32",
    threads: Annotated[int, typer.Option(min=0, help="CPU threads for torch; 0: its default. On a busy CPU, 1 "
                                         "can be several times faster.")] = 0,
    engine: Annotated[str, typer.Option(
        help="What generates: local (coevo's KV-cached decoder in this process) or vllm (a vLLM server coevo "
             "starts on 127.0.0.1 from `coevo vllm install`'s venv; the endpoint and its recorded sessions stay "
             "coevo's).")] = "local",
    sessions_dir: Annotated[Path | None, typer.Option(
        help="Journal every recorded session call in this folder (fsynced before the reply) and replay it at "
             "start, so that a killed or restarted server keeps its sessions. Default: in memory only.")] = None,
) -> None:
    """Serve a local checkpoint: /v1/models, /v1/chat/completions, /v1/completions (streaming, logprobs,
    token ids) and per-episode recorded sessions at /sessions/{id}/v1."""
    from coevo.models import ModelError, resolve_model

    try:
        model_dir = resolve_model(model_dir)
    except ModelError as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    if not (model_dir / "config.json").is_file():
        typer.secho(f"error: {model_dir}: no config.json; give a Hugging Face checkpoint folder", fg="red", err=True)
        raise typer.Exit(2)
    from coevo.bundle import BundleError, check_weights

    try:
        check_weights(model_dir)
    except BundleError as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    import uvicorn

    from coevo.policy.hf import HFPolicy
    from coevo.serve.app import create_app

    if threads:
        import torch

        torch.set_num_threads(threads)
    from coevo.errors import CoevoError

    if engine not in ("local", "vllm"):
        typer.secho(f"error: --engine {engine!r}: valid are local, vllm", fg="red", err=True)
        raise typer.Exit(2)
    try:
        if engine == "vllm":
            from coevo.vllm.policy import VLLMPolicy

            typer.echo("starting vLLM (a minute or more on CPU) ...", err=True)
            policy = VLLMPolicy(model_dir, dtype=dtype)
            context = policy.context_length
        else:
            policy = HFPolicy(model_dir, device=device, dtype=dtype)
            context = policy.model.config.max_position_embeddings
    except (OSError, ValueError, CoevoError) as e:
        typer.secho(f"error: {model_dir}: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    served_name = name or model_dir.resolve().name
    app = create_app(policy, policy.tokenizer, served_name, api_key=api_key, default_max_tokens=max_tokens,
                     context_length=context,
                     window_s=batch_window_ms / 1000, max_rows=max_batch, sessions_dir=sessions_dir)
    auth = "bearer key required" if api_key else "no key"
    kept = f", journalled in {sessions_dir}" if sessions_dir else ""
    typer.echo(f"coevo serve: {served_name} on http://{host}:{port}/v1 ({auth}); sessions at /sessions/ID/v1{kept}")
    uvicorn.run(app, host=host, port=port, log_level="info")
