"""Qwen3-style draft decoder layers with context KV injection (the DFlash backbone's building blocks).

A draft layer differs from a Qwen3 layer in one way: its attention keys and values come from two
sources, the fused target context (projected by the layer's own `k_proj` / `v_proj`, no input norm) and
the block being drafted; queries come from the block only. Parameter names match the public
checkpoints (`self_attn.{q,k,v,o}_proj`, `q_norm`, `k_norm`, `mlp.{gate,up,down}_proj`,
`input_layernorm`, `post_attention_layernorm`).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from inference.drafter.config import DrafterConfig

try:  # flex-attention is optional: the GPU training path uses it, SDPA is the reference everywhere.
    from torch.nn.attention.flex_attention import BlockMask, flex_attention
except ImportError:  # pragma: no cover - torch < 2.5
    BlockMask = None  # type: ignore[assignment,misc]
    flex_attention = None  # type: ignore[assignment]


@functools.cache
def _compiled_flex_attention() -> Any:
    return torch.compile(flex_attention)  # built on the first CUDA call; dynamic after the first new shape


def block_flex_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, enable_gqa: bool
) -> torch.Tensor:
    """flex-attention over a `BlockMask`, compiled on CUDA.

    Uncompiled, flex-attention runs its unfused reference path, which materialises every score and
    ignores the mask's sparsity; compiled, it runs one fused kernel that skips the fully masked tiles.
    CPU calls (tests, the GPU check's dry run) stay eager.
    """
    if not q.is_cuda:
        return flex_attention(q, k, v, block_mask=mask, enable_gqa=enable_gqa)
    return _compiled_flex_attention()(q, k, v, block_mask=mask, enable_gqa=enable_gqa)


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in fp32, as in Qwen3."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class RotaryEmbedding(nn.Module):
    """RoPE tables for explicit position ids (any rope type transformers knows).

    The inverse frequencies are derived from the config, kept in fp32 whatever the module's dtype
    (`drafter.to(torch.bfloat16)` must not round them) and copied once to each device they are used on.
    """

    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        rope = dict(config.rope_parameters)
        rope_type = rope.get("rope_type", "default")
        if rope_type == "default":
            # Built on the CPU even under a `meta` device context: the table is derived, never loaded.
            exponent = torch.arange(0, config.head_dim, 2, dtype=torch.float32, device="cpu") / config.head_dim
            inv_freq, scaling = 1.0 / (float(rope["rope_theta"]) ** exponent), 1.0
        else:
            inv_freq, scaling = _hf_rope_init(config, rope)
        self.inv_freq = inv_freq.float()  # a plain attribute, not a buffer: `.to(dtype)` leaves it alone
        self._on_device: dict[torch.device, torch.Tensor] = {}
        self.attention_scaling = float(scaling)

    def _inv_freq(self, device: torch.device) -> torch.Tensor:
        if device not in self._on_device:
            self._on_device[device] = self.inv_freq.to(device)
        return self._on_device[device]

    @torch.no_grad()
    def forward(self, position_ids: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of shape [*position_ids.shape, head_dim]."""
        freqs = position_ids.to(torch.float32).unsqueeze(-1) * self._inv_freq(position_ids.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.attention_scaling).to(dtype), (emb.sin() * self.attention_scaling).to(dtype)


def _hf_rope_init(config: DrafterConfig, rope: dict[str, Any]) -> tuple[torch.Tensor, float]:
    """Scaled RoPE variants (llama3, yarn, ...) are delegated to transformers' own initialisers."""
    from transformers import Qwen3Config
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    hf = Qwen3Config(
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        head_dim=config.head_dim,
        max_position_embeddings=config.max_position_embeddings,
        rope_parameters=rope,
    )
    with torch.device("cpu"):  # real even when the model is being built on `meta`
        return ROPE_INIT_FUNCTIONS[rope["rope_type"]](hf, "cpu")


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [b, heads, n, d]; cos/sin: [b, n, d]."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return x * cos + _rotate_half(x) * sin


class DraftMLP(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DraftAttention(nn.Module):
    """Grouped-query attention whose keys/values are [context K/V ; block K/V]."""

    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        h, d = config.hidden_size, config.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = config.num_attention_heads, config.num_key_value_heads, d
        self.q_proj = nn.Linear(h, self.num_heads * d, bias=False)
        self.k_proj = nn.Linear(h, self.num_kv_heads * d, bias=False)
        self.v_proj = nn.Linear(h, self.num_kv_heads * d, bias=False)
        self.o_proj = nn.Linear(self.num_heads * d, h, bias=False)
        self.q_norm = RMSNorm(d, config.rms_norm_eps)
        self.k_norm = RMSNorm(d, config.rms_norm_eps)

    def _heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, n_heads, self.head_dim).transpose(1, 2)

    def project_kv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K (normed, rotated) and V of `x` [b, n, H] -> two [b, kv_heads, n, d] tensors."""
        k = apply_rope(self.k_norm(self._heads(self.k_proj(x), self.num_kv_heads)), cos, sin)
        return k, self._heads(self.v_proj(x), self.num_kv_heads)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        ctx_k: torch.Tensor,
        ctx_v: torch.Tensor,
        mask: Any = None,
    ) -> torch.Tensor:
        """x: block states [b, q, H] (already normed); ctx_k/ctx_v: [b, kv_heads, c, d]."""
        q = apply_rope(self.q_norm(self._heads(self.q_proj(x), self.num_heads)), cos, sin)
        k_blk, v_blk = self.project_kv(x, cos, sin)
        gqa = self.num_kv_heads != self.num_heads
        if isinstance(mask, list):  # anchor groups (`block_mask.anchor_block_groups`)
            out = torch.cat(
                [
                    F.scaled_dot_product_attention(
                        q[:, :, g.slots],
                        torch.cat([ctx_k[:, :, : g.context_len], k_blk[:, :, g.slots]], dim=2),
                        torch.cat([ctx_v[:, :, : g.context_len], v_blk[:, :, g.slots]], dim=2),
                        attn_mask=g.mask,
                        enable_gqa=gqa,
                    )
                    for g in mask
                ],
                dim=2,
            )
        else:
            k = torch.cat([ctx_k, k_blk], dim=2)
            v = torch.cat([ctx_v, v_blk], dim=2)
            if BlockMask is not None and isinstance(mask, BlockMask):
                out = block_flex_attention(q, k, v, mask, enable_gqa=gqa)
            else:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        b, _, n, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(b, n, self.num_heads * self.head_dim))


class DraftDecoderLayer(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        self.self_attn = DraftAttention(config)
        self.mlp = DraftMLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        ctx_k: torch.Tensor,
        ctx_v: torch.Tensor,
        mask: Any = None,
    ) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, ctx_k, ctx_v, mask)
        return x + self.mlp(self.post_attention_layernorm(x))
