"""Tiny random targets for tests and the CPU smoke experiment (no download, a few hundred K parameters).

Both families the project must serve are covered: Qwen3 (q/k norms) and Llama (SmolLM2's family). The
last vocabulary id is reserved as MASK; nothing else is special about these models.
"""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, PretrainedConfig, Qwen3Config

from inference.target import TargetModel

TINY_ARCHS = ("qwen3", "llama")


def tiny_target_config(
    arch: str = "qwen3",
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 6,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
) -> PretrainedConfig:
    common = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=4096,
        rope_theta=10000.0,
        initializer_range=0.05,  # a little peakier than HF's 0.02, so greedy choices are rarely near-ties
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
    )
    if arch == "qwen3":
        return Qwen3Config(**common)
    if arch == "llama":
        return LlamaConfig(**common)
    raise ValueError(f"unknown tiny target arch {arch!r}; choose one of {TINY_ARCHS}")


def tiny_target(arch: str = "qwen3", seed: int = 0, dtype: torch.dtype = torch.float32, **config_kwargs) -> TargetModel:
    """A random tiny target whose weights depend only on `seed` (and the config)."""
    config = tiny_target_config(arch, **config_kwargs)
    config._attn_implementation = "sdpa"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return TargetModel(model, tokenizer=None, name=f"tiny-{arch}", mask_token_id=config.vocab_size - 1)
