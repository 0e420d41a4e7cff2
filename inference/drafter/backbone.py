"""The DFlash parallel backbone: one forward drafts hidden states for a whole block.

Context: the target's hidden states at `target_layer_ids` for committed positions, concatenated (K * H)
and fused by `fc` + `hidden_norm`. Block: the target's embeddings of `[last committed token, MASK x (B-1)]`.
Every draft layer attends from the block to `[context K/V ; block K/V]`; the context K/V of a position
depend only on its feature, so decoding projects each committed position once (`DraftKVCache`) and
training projects the whole sequence once per layer for all anchor blocks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from inference.drafter.config import DrafterConfig
from inference.drafter.layers import DraftDecoderLayer, RMSNorm, RotaryEmbedding

KV = tuple[torch.Tensor, torch.Tensor]


class DFlashBackbone(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.fc = nn.Linear(config.num_context_features * h, h, bias=False)
        self.hidden_norm = RMSNorm(h, config.rms_norm_eps)
        self.layers = nn.ModuleList(DraftDecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(h, config.rms_norm_eps)
        self.rotary = RotaryEmbedding(config)

    def fuse(self, features: torch.Tensor) -> torch.Tensor:
        """[b, n, K * H] raw target features -> [b, n, H] fused context."""
        return self.hidden_norm(self.fc(features))

    def context_kv(self, fused: torch.Tensor, positions: torch.Tensor) -> list[KV]:
        """Every layer's K/V for fused context positions ([b, n, H], positions [b, n])."""
        cos, sin = self.rotary(positions, fused.dtype)
        return [layer.self_attn.project_kv(fused, cos, sin) for layer in self.layers]

    def forward(
        self,
        block_embeds: torch.Tensor,
        block_positions: torch.Tensor,
        context: list[KV],
        mask: Any = None,
    ) -> torch.Tensor:
        """Normed hidden states [b, q, H] of the block slots, attending to `context` and to each other.

        `mask` is None (decoding: one block that sees the whole context) or the training anchor mask, whole
        or by anchor groups (`block_mask`).
        """
        cos, sin = self.rotary(block_positions, block_embeds.dtype)
        x = block_embeds
        for layer, (ctx_k, ctx_v) in zip(self.layers, context, strict=True):
            x = layer(x, cos, sin, ctx_k, ctx_v, mask)
        return self.norm(x)
