"""`DominoDrafter`: the one definition of the drafter, used by training, export and decoding.

It is a `DFlashBackbone` plus an optional `DominoHead` (None = plain DFlash). It owns no embedding and no
lm_head: `bind_target` hands it the target's (frozen) modules, which are referenced, never copied and
never registered, so they stay out of `parameters()`, `state_dict()` and every checkpoint.

With a draft vocabulary (`config.draft_vocab_size = N`) the logits cover N target ids only: `vocab`
(`draft_vocab.DraftVocab`) owns that subset, its `d2t` / `t2d` buffers and the maps between draft and
target ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from inference.drafter.backbone import DFlashBackbone
from inference.drafter.block_mask import anchor_attention_mask
from inference.drafter.checkpoint import load_checkpoint, read_config, read_config_json, save_checkpoint
from inference.drafter.config import DrafterConfig
from inference.drafter.draft_cache import DraftKVCache
from inference.drafter.draft_vocab import DraftVocab
from inference.drafter.head import DominoHead
from inference.drafter.rollout import TrainingSteps, roll_out
from inference.kernels.linear import prepacked_count
from inference.targets.adapter import TargetModel


@dataclass
class BlockLogits:
    """Logits of the draft tokens of many blocks: [..., D, V] with D = `config.num_draft_tokens`."""

    base: torch.Tensor
    final: torch.Tensor  # == base for a drafter without head


class DominoDrafter(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        self.config = config
        self.backbone = DFlashBackbone(config)
        self.head = DominoHead(config) if config.has_head else None
        self._target_io: tuple[nn.Module, nn.Module] | None = None
        self.vocab = DraftVocab(self, config.draft_vocab_size, config.vocab_size)  # registers d2t / t2d
        self.prepacked_linears = 0  # how many weights hold a oneDNN-prepacked layout (bind_target)

    # --------------------------------------------------------------------------- the target's modules
    def bind_target(self, embed_tokens: nn.Module, lm_head: nn.Module) -> DominoDrafter:
        """Use the target's token embedding and lm_head (held by reference, kept out of state_dict).

        Bound to an lm_head that runs on a kernel policy other than plain (an inference target,
        `load_target(prepack=...)`, `inference.kernels`) in its own dtype, the drafter's linears and GRU
        weights follow that policy too: it is then inference-only."""
        weight = getattr(embed_tokens, "weight", None)
        if weight is not None and weight.shape != (self.config.vocab_size, self.config.hidden_size):
            raise ValueError(
                f"target embedding is {tuple(weight.shape)}, the drafter expects "
                f"({self.config.vocab_size}, {self.config.hidden_size}): this drafter belongs to another target"
            )
        self._target_io = (embed_tokens, lm_head)
        policy = getattr(lm_head, "policy", None)
        if policy is not None and policy.mode != "plain" and self.backbone.fc.weight.dtype == lm_head.weight.dtype:
            linears = policy.replace_linears(self.requires_grad_(False))
            gru = self.head.use_kernels(policy) if self.head is not None else []
            self.prepacked_linears = prepacked_count([*linears, *gru])
        return self

    def _io(self) -> tuple[nn.Module, nn.Module]:
        if self._target_io is None:
            raise RuntimeError("the drafter has no target embedding / lm_head: call drafter.bind_target(...) first")
        return self._target_io

    def embed(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self._io()[0](token_ids)

    def lm_head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The target's lm_head on [..., H] -> [..., N or V], applied to a 2-D view: a strided slice of block
        hidden states would otherwise take PyTorch's batched-matmul path, about 5x slower on a CPU.

        With a draft vocabulary only the N rows of the draft ids are used (N x H instead of V x H work)."""
        logits = self.vocab.logits(hidden.reshape(-1, hidden.shape[-1]), self._io()[1])
        return logits.view(*hidden.shape[:-1], logits.shape[-1])

    def draft_hidden_slice(self, hidden: torch.Tensor) -> torch.Tensor:
        """Hidden states [..., B, H] -> those of the D draft tokens [..., D, H] (honours `shift_label`)."""
        first = self.config.first_predicting_position
        return hidden[..., first : first + self.config.num_draft_tokens, :]

    # --------------------------------------------------------------------------- training
    def forward_blocks(
        self,
        features: torch.Tensor,
        input_ids: torch.Tensor,
        anchors: torch.Tensor,
        use_flex: bool = False,
        anchor_groups: int = 1,
    ) -> torch.Tensor:
        """Hidden states [b, A, B, H] of A anchor blocks per sequence, all in one forward.

        features [b, T, K*H]: target features of the whole sequence; input_ids [b, T]; anchors [b, A]
        (negative = padding block), ascending with padding last (`sample_anchors`) when `anchor_groups` > 1.
        Block of anchor a = `[input_ids[a], MASK x (B-1)]` at positions a..a+B-1, seeing context strictly
        before a (see `block_mask`). The attention runs as a flex-attention `BlockMask` (`use_flex`), in
        `anchor_groups` SDPA calls over groups of consecutive anchors, or as one SDPA call: the same result.
        """
        b, t = input_ids.shape
        num_blocks, bs = anchors.shape[1], self.config.block_size
        anchor_pos = anchors.clamp(min=0)
        block_ids = torch.full((b, num_blocks, bs), self.config.mask_token_id, device=input_ids.device)
        block_ids[:, :, 0] = torch.gather(input_ids, 1, anchor_pos)
        positions = anchor_pos.unsqueeze(-1) + torch.arange(bs, device=input_ids.device)
        fused = self.backbone.fuse(features)
        ctx_positions = torch.arange(t, device=input_ids.device).expand(b, t)
        context = self.backbone.context_kv(fused, ctx_positions)
        mask = anchor_attention_mask(anchors, t, bs, use_flex, anchor_groups)
        embeds = self.embed(block_ids.view(b, -1)).to(fused.dtype)
        hidden = self.backbone(embeds, positions.view(b, -1), context, mask)
        return hidden.view(b, num_blocks, bs, -1)

    def block_logits(self, hidden: torch.Tensor, causal_tokens: torch.Tensor | None = None) -> BlockLogits:
        """Base and final logits of the draft tokens of blocks [..., B, H], the GRU teacher-forced.

        `causal_tokens` [..., D]: the tokens the GRU consumes (block token 0 = root, then draft tokens
        1..D-1); teacher forcing passes the ground truth. Draft token j uses the state after tokens
        0..j-1 when j > `pure_draft_prefix_len`. Required iff the drafter has a head.
        """
        h = self.draft_hidden_slice(hidden)
        base = self.lm_head(h)
        if self.head is None:
            return BlockLogits(base=base, final=base)
        if causal_tokens is None:
            raise ValueError("a Domino drafter needs the causal tokens its GRU consumes")
        if causal_tokens.shape != h.shape[:-1]:
            raise ValueError(f"causal_tokens {tuple(causal_tokens.shape)} must be [..., D] = {tuple(h.shape[:-1])}")
        lead = causal_tokens.shape[:-1]
        embeds = self.embed(causal_tokens).to(h.dtype)
        states = self.head.teacher_forced_states(embeds.reshape(-1, *embeds.shape[-2:])).view(
            *lead, causal_tokens.shape[-1], -1
        )
        p = self.config.pure_draft_prefix_len
        corrected = base[..., p:, :] + self.head.correction(h[..., p:, :], states[..., p:, :])
        final = torch.cat([base[..., :p, :], corrected], dim=-2) if p else corrected  # (a cat would copy it)
        return BlockLogits(base=base, final=final)

    def rollout_logits(self, hidden: torch.Tensor, root_ids: torch.Tensor) -> BlockLogits:
        """Base and final logits with the GRU fed the drafter's own greedy drafts, as at inference.

        Training-time testing: draft token j = argmax of its final logits (detached: gradients flow
        through the GRU states, not through the choice of tokens), consumed before draft j + 1. Equal to
        `block_logits(hidden, [root, drafts 1..D-1])`, computed sequentially.
        """
        h = self.draft_hidden_slice(hidden)
        base = self.lm_head(h)
        if self.head is None:
            return BlockLogits(base=base, final=base)
        p = min(self.config.pure_draft_prefix_len, h.shape[-2])
        finals = [base[..., :p, :]]  # the pure-draft prefix: base logits

        def choose(logits: torch.Tensor) -> torch.Tensor:
            finals.append(logits.unsqueeze(-2))
            return self.vocab.to_target_ids(logits.argmax(-1).detach())

        prefix = self.vocab.to_target_ids(finals[0].argmax(-1).detach())
        start = torch.cat([root_ids.unsqueeze(-1), prefix], dim=-1)
        roll_out(TrainingSteps(self.head), self.embed, h, base, start, choose)
        return BlockLogits(base=base, final=torch.cat(finals, dim=-2))

    # --------------------------------------------------------------------------- decoding
    def new_cache(self, batch_size: int = 1, capacity: int = 4096) -> DraftKVCache:
        p = next(self.parameters())
        c = self.config
        return DraftKVCache(
            c.num_hidden_layers, batch_size, c.num_key_value_heads, c.head_dim, capacity, p.dtype, p.device
        )

    def append_context(self, cache: DraftKVCache, features: torch.Tensor, defer: bool = False) -> None:
        """Project the features [b, n, K*H] of n newly committed positions into the draft cache; `defer`:
        keep a copy in `cache.pending` instead, projected with any others waiting when the drafter next
        reads the cache (`draft_block`, `flush_context`)."""
        if defer:
            cache.pending.append(features.clone())
            return
        cache.pending.append(features)
        self.flush_context(cache)

    def flush_context(self, cache: DraftKVCache) -> None:
        """Project the features waiting in `cache.pending`, in the order they were appended, in one call."""
        self.flush_contexts([cache])

    def draft_block(self, cache: DraftKVCache, root_ids: torch.Tensor) -> torch.Tensor:
        """Hidden states [b, B, H] of the block `[root, MASK x (B-1)]` placed right after the cached context
        (its waiting features projected first)."""
        self.flush_context(cache)
        b, bs = root_ids.shape[0], self.config.block_size
        block_ids = torch.full((b, bs), self.config.mask_token_id, device=root_ids.device)
        block_ids[:, 0] = root_ids
        positions = torch.arange(cache.length, cache.length + bs, device=root_ids.device).expand(b, bs)
        context = [cache.layer(i) for i in range(len(self.backbone.layers))]
        embeds = self.embed(block_ids).to(self.backbone.fc.weight.dtype)
        return self.backbone(embeds, positions, context)

    def draft_blocks(self, caches: list[DraftKVCache], root_ids: torch.Tensor) -> torch.Tensor:
        """`draft_block` for several sequences at once (a batched decoder's rows): hidden states [R, B, H]
        of each cache's block `[root_ids[r], MASK x (B-1)]` after its own context, in one backbone forward.

        The caches (one sequence each) hold contexts of different lengths: their waiting features are
        projected in one call, and the block attends to its own cache's positions only (the shorter
        contexts are padded with zeros, hidden by the mask)."""
        if len(caches) == 1:
            return self.draft_block(caches[0], root_ids.view(1))
        self.flush_contexts(caches)
        device, bs = root_ids.device, self.config.block_size
        lengths = torch.tensor([c.length for c in caches], device=device)
        longest = int(lengths.max())
        block_ids = torch.full((len(caches), bs), self.config.mask_token_id, device=device)
        block_ids[:, 0] = root_ids.view(-1)
        positions = lengths.unsqueeze(1) + torch.arange(bs, device=device)
        keys = torch.arange(longest + bs, device=device)
        visible = (keys < lengths.unsqueeze(1)) | (keys >= longest)  # own context, then the block's slots
        context = []
        for i in range(len(self.backbone.layers)):
            k = caches[0].keys[i]
            padded_k = k.new_zeros((len(caches), k.shape[1], longest, k.shape[3]))
            padded_v = torch.zeros_like(padded_k)
            for r, cache in enumerate(caches):
                padded_k[r, :, : cache.length], padded_v[r, :, : cache.length] = cache.layer(i)
            context.append((padded_k, padded_v))
        embeds = self.embed(block_ids).to(self.backbone.fc.weight.dtype)
        return self.backbone(embeds, positions, context, visible[:, None, None, :])

    def flush_contexts(self, caches: list[DraftKVCache]) -> None:
        """`flush_context` for several caches in one projection: one cache of any batch, or many caches of
        one sequence each (a batched round's rows)."""
        waiting = [
            (c, c.pending[0] if len(c.pending) == 1 else torch.cat(c.pending, dim=1)) for c in caches if c.pending
        ]
        if not waiting:
            return
        for cache, _ in waiting:
            cache.pending = []
        features = waiting[0][1] if len(waiting) == 1 else torch.cat([f for _, f in waiting], dim=1)
        device = features.device
        positions = torch.cat([torch.arange(c.length, c.length + f.shape[1], device=device) for c, f in waiting])
        fused = self.backbone.fuse(features.to(self.backbone.fc.weight.dtype))
        kv = self.backbone.context_kv(fused, positions.expand(features.shape[0], -1))
        start = 0
        for cache, f in waiting:
            end = start + f.shape[1]
            cache.extend([(k[:, :, start:end], v[:, :, start:end]) for k, v in kv])
            start = end

    # --------------------------------------------------------------------------- checkpoint format
    def save_pretrained(self, path: str | Path, dtype: torch.dtype = torch.bfloat16) -> Path:
        """Write `config.json` + `model.safetensors` in the public Domino / DFlash layout."""
        return save_checkpoint(self, path, dtype)

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        target_config: object | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        target: TargetModel | None = None,
        mask_token_id: int | None = None,
    ) -> DominoDrafter:
        """Load and validate a drafter folder; with `target_config`, also check it fits that target.

        Given `target` (a `TargetModel`), the drafter is checked against it, loaded onto its device and
        dtype (unless `device` / `dtype` say otherwise) and bound to its embedding and lm_head. A public
        config that leaves `num_target_layers` or `mask_token_id` out takes them from the target (or from
        `target_config` and `mask_token_id` when the target is not loaded yet).
        `dtype=None` otherwise keeps the file's dtype. Raises `DrafterCheckpointError` naming every problem.
        """
        if target is not None:
            target_config = target.config
            device = device if device is not None else target.device
            dtype = dtype if dtype is not None else target.dtype
            mask_token_id = target.mask_token_id
        num_layers = getattr(target_config, "num_hidden_layers", None) if target_config is not None else None
        raw = read_config_json(path)
        config = read_config(path, target_num_layers=num_layers, target_mask_token_id=mask_token_id, raw=raw)
        with torch.device("meta"):
            model = cls(config)
        load_checkpoint(model, path, target_config=target_config, dtype=dtype, raw=raw)
        model = model.to(device=device if device is not None else "cpu")
        return model.bind_target(target.embed_tokens, target.lm_head) if target is not None else model
