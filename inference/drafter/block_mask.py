"""The training attention mask: many anchor blocks drafted in one forward.

Keys are laid out as `[context positions 0..T-1 ; block 0 (B slots) ; block 1 ; ...]` and queries as the
blocks' slots. A block anchored at position `a` sees the context strictly before `a` (what the target had
verified when that block would be drafted at serving time) and every slot of its own block
(bidirectional); blocks never see each other. A negative anchor marks a padding block: it sees only
itself, so its rows stay finite, and its loss weight must be zero.

`anchor_block_mask` is the SDPA form (a boolean tensor, True = attend) and the reference; on CUDA,
`anchor_flex_block_mask` gives the same mask as a flex-attention `BlockMask`. On a CPU, whose SDPA kernel
computes every masked tile, `anchor_block_groups` cuts the same attention into groups of consecutive
anchors: a group's queries attend only to the context before its last anchor and to its own blocks, so
the tiles every query of the group would mask are never computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask


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


@dataclass
class AnchorGroup:
    """One group of consecutive anchor blocks: its query slots (also its block keys), the context length it
    can see (its last anchor) and its mask [b, 1, q, context + q] in `anchor_block_mask`'s form."""

    slots: slice
    context_len: int
    mask: torch.Tensor


def anchor_block_groups(anchors: torch.Tensor, context_len: int, block_size: int, num_groups: int) -> list[AnchorGroup]:
    """`anchor_block_mask` cut into at most `num_groups` groups of consecutive anchors.

    Anchors must ascend within each row with padding (-1) last, as `sample_anchors` draws them: then a
    group sees no context past the largest anchor in it, in any row.
    """
    num_blocks = anchors.shape[1]
    per = -(-num_blocks // max(1, min(num_groups, num_blocks)))
    groups = []
    for start in range(0, num_blocks, per):
        group = anchors[:, start : start + per]
        seen = max(0, min(int(group.max()), context_len))
        slots = slice(start * block_size, (start + group.shape[1]) * block_size)
        groups.append(AnchorGroup(slots, seen, anchor_block_mask(group, seen, block_size)))
    return groups


def anchor_attention_mask(
    anchors: torch.Tensor, context_len: int, block_size: int, use_flex: bool = False, groups: int = 1
) -> torch.Tensor | list[AnchorGroup] | BlockMask:
    """The training mask in the form the attention runs it: a flex-attention `BlockMask` (`use_flex`),
    `groups` anchor groups (`groups` > 1), or the dense boolean mask."""
    if use_flex:
        return anchor_flex_block_mask(anchors, context_len, block_size)
    if groups > 1:
        return anchor_block_groups(anchors, context_len, block_size, groups)
    return anchor_block_mask(anchors, context_len, block_size)
