"""Tiny random targets for tests and the CPU smoke experiment (no download, a few hundred K parameters).

Both families the project must serve are covered: Qwen3 (q/k norms) and Llama (SmolLM2's family). They
come with a byte-level tokenizer (256 byte tokens + ChatML specials) and a ChatML chat template, so
every text path (data regeneration, chat prompts, decoding) runs on them. The vocabulary is padded
past the tokenizer, like Qwen3's, and the first padded row is the MASK id.
"""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, PretrainedConfig, PreTrainedTokenizerFast, Qwen3Config

from inference.targets.adapter import TargetModel

TINY_ARCHS = ("qwen3", "llama")
TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # ids 256, 257, 258
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level tokenizer: ids 0..255 are the bytes, then <|endoftext|>, <|im_start|>, <|im_end|>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab={char: byte for byte, char in _byte_chars().items()}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(TINY_SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML_TEMPLATE
    )


def _byte_chars() -> dict[int, str]:
    """The byte-level pre-tokenizer's byte -> char map: printable bytes stand for themselves, the
    others for the code points from 256 up, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + i) for i, b in enumerate(others)}}


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
        bos_token_id=257,
        eos_token_id=258,
        pad_token_id=256,
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
    return TargetModel(model, tokenizer=tiny_tokenizer(), name=f"tiny-{arch}")
