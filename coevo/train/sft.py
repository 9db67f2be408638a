"""Supervised warm start: TRL `SFTTrainer` on chat conversations, loss on the assistant's tokens only.

The conversations are oracle episodes rendered by the harness (see `coevo.train.warmstart`); this
module only knows messages. Two facts about TRL's SFTTrainer shape it:
- `assistant_only_loss` needs `{% generation %}` markers. Our tokenizers carry TRL's verbatim
  `qwen2_5.jinja`, which has none, so TRL swaps in its `qwen2_5_training.jinja` (same rendering,
  plus markers) by itself;
- a `max_length` that cuts into the conversation silently removes the assistant's tokens, so we size
  `max_length` from the data and refuse, with a clear message, what the model cannot hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coevo.logs import library_bars_off
from coevo.train.lora import LoraSpec


@dataclass
class SFTSettings:
    epochs: float = 6.0
    """Passes over the conversations. The tiny model first learns each family's command shape and only
    later to copy the instruction's names into it; that takes most of the ~1000 steps of the default."""
    lr: float = 5e-3
    """Peak learning rate (cosine schedule with warmup); high because the model is tiny and fresh."""
    batch_size: int = 8
    seed: int = 0
    warmup_ratio: float = 0.05
    weight_decay: float = 0.0
    max_length: int | None = None
    """Token budget per conversation; None = the longest conversation. Longer ones are an error."""
    threads: int | None = None
    """CPU threads for torch; None keeps torch's default (all cores). On a machine shared with other
    busy processes 1 is faster: OpenMP threads that wait for a busy core spin and steal time."""
    lora: LoraSpec = field(default_factory=LoraSpec)
    """LoRA adapters instead of full weights (rank > 0); the saved folder is still a plain model (merged,
    the adapter in its adapter/ subfolder). A fresh tiny model needs full weights: it has little to adapt."""


def token_count(tokenizer, messages: list[dict]) -> int:
    return len(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"])


def check_lengths(tokenizer, conversations: list[list[dict]], max_length: int, source: str) -> None:
    """Refuse conversations that `max_length` would cut (the cut part holds the answers we train on)."""
    for i, conv in enumerate(conversations):
        n = token_count(tokenizer, conv)
        if n <= max_length:
            continue
        first_reply = next((k for k, m in enumerate(conv) if m["role"] == "assistant"), len(conv))
        prompt = token_count(tokenizer, conv[:first_reply])
        what = "its prompt (the messages before the first reply) alone" if prompt > max_length else "it"
        raise ValueError(f"{source}: conversation {i} is {n} tokens and {what} exceeds max_length="
                         f"{max_length} (prompt: {prompt} tokens); raise max_length (the model holds "
                         f"{tokenizer.model_max_length}) or shorten the harness's prompts")


@library_bars_off()
def train_sft(model_dir: Path, conversations: list[list[dict]] | list[dict], out: Path, settings: SFTSettings,
              source: str = "warmstart", merged: bool = True) -> Path:
    """Fine-tune `model_dir` on `conversations` and save a HF folder to `out`. Each is a list of chat messages
    (rendered by the chat template, loss on the assistant's turns), or a token row {"input_ids",
    "assistant_masks"} trained on exactly as given (a sampled episode: token in, token out). With LoRA and
    `merged=False`, `out` holds only the adapter (peft's own folder, over `model_dir`) and the tokenizer."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from coevo.train.progress import show_progress

    if not conversations:
        raise ValueError(f"{source}: no conversations to train on")
    if settings.threads:
        torch.set_num_threads(settings.threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokens = isinstance(conversations[0], dict)
    lengths = [len(c["input_ids"]) if tokens else token_count(tokenizer, c) for c in conversations]
    max_length = settings.max_length or min(max(lengths), tokenizer.model_max_length)
    if tokens:
        conversations = [c for c, n in zip(conversations, lengths) if n <= max_length]  # cut rows lose answers
    else:
        check_lengths(tokenizer, conversations, max_length, source)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if settings.lora.enabled:
        from coevo.train import lora

        model = lora.wrap(model, settings.lora, f"{source}: SFT settings", seed=settings.seed)
    config = SFTConfig(
        output_dir=str(out), num_train_epochs=settings.epochs, learning_rate=settings.lr,
        per_device_train_batch_size=settings.batch_size, lr_scheduler_type="cosine",
        warmup_steps=settings.warmup_ratio, weight_decay=settings.weight_decay, seed=settings.seed,
        max_length=max_length, assistant_only_loss=not tokens, use_cpu=not torch.cuda.is_available(), bf16=False,
        activation_checkpointing=False, save_strategy="no", report_to="none", logging_steps=10,
        dataloader_num_workers=0, disable_tqdm=True,
    )
    dataset = Dataset.from_list(conversations if tokens else [{"messages": c} for c in conversations])
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    bar = show_progress(trainer, "SFT")
    try:
        trainer.train()
    finally:
        bar.close()
    out = Path(out)
    if settings.lora.enabled and not merged:
        trainer.model.save_pretrained(out)
    elif settings.lora.enabled:
        lora.save_merged(trainer.model, out)
    else:
        trainer.save_model(str(out))
    tokenizer.save_pretrained(out)  # keeps the original template (TRL's training variant is internal)
    model.generation_config.save_pretrained(out)
    return out
