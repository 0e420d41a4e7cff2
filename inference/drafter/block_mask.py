"""The training attention mask: many anchor blocks drafted in one forward.

Keys are laid out as `[context positions 0..T-1 ; block 0 (B slots) ; block 1 ; ...]` and queries as the
blocks' slots. A block anchored at position `a` sees the context strictly before `a` (what the target had
verified when that block would be drafted at serving time) and every slot of its own block
(bidirectional); blocks never see each other. A negative anchor marks a padding block: it sees only
itself, so its rows stay finite, and its loss weight must be zero.

`anchor_block_mask` is the SDPA form (a boolean tensor, True = attend) and the reference; on CUDA,
`anchor_flex_block_mask` gives the same mask as a flex-attention `BlockMask`.
"""

from __future__ import annotations

import torch


def anchor_block_mask(anchors: torch.Tensor, context_len: int, block_size: int) -> torch.Tensor:
    """Boolean mask [b, 1, A * B, T + A * B] for `anchors` [b, A] over a context of length T."""
    b, num_blocks = anchors.shape
    device = anchors.device
    q_block = torch.arange(num_blocks * block_size, device=device) // block_size  # block of each query
    anchor_of_q = anchors[:, q_block]  # [b, A*B]
    ctx_pos = torch.arange(context_len, device=device)
    sees_ctx = ctx_pos.view(1, 1, -1) < anchor_of_q.unsqueeze(-1)  # [b, A*B, T]; anchor < 0 sees nothing
    sees_blk = (q_block.view(-1, 1) == q_block.view(1, -1)).expand(b, -1, -1)  # [b, A*B, A*B]
    return torch.cat([sees_ctx, sees_blk], dim=-1).unsqueeze(1)


def anchor_flex_block_mask(anchors: torch.Tensor, context_len: int, block_size: int):
    """The same mask as a flex-attention `BlockMask` (sparse: skips fully masked tiles on GPU)."""
    from torch.nn.attention.flex_attention import create_block_mask

    b, num_blocks = anchors.shape
    n_q = num_blocks * block_size

    def mask_mod(batch, head, q_idx, kv_idx):
        q_blk = q_idx // block_size
        is_ctx = kv_idx < context_len
        sees_ctx = is_ctx & (kv_idx < anchors[batch, q_blk])
        sees_blk = (~is_ctx) & ((kv_idx - context_len) // block_size == q_blk)
        return sees_ctx | sees_blk

    return create_block_mask(mask_mod, b, None, n_q, context_len + n_q, device=anchors.device)
