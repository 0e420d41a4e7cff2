"""The Domino head: a GRU over already-drafted tokens and a low-rank correction in logit space.

`S_j` is the GRU state after consuming block tokens `0..j` (root first; input = frozen target token
embeddings). Draft token `j` (1-based) gets `L_j = L_base_j + W2 . SiLU(W1 . [H_j ; S_{j-1}])` when
`j > pure_draft_prefix_len`, and base logits otherwise. With a draft vocabulary W2 has N rows, one per
draft id, like the base logits it corrects. Because the correction lives in logit space the
backbone and the lm_head run once per block; only the GRU step and the rank-r update are sequential.

The GRU's steps are named by when they run: in training through the `nn.GRU` module
(`teacher_forced_states`, `training_step`), in decoding as the cell written out (`decoding_gates`,
`decoding_first_step`, `decoding_step`); `inference.drafter.rollout` rolls a block out with either. The
`correction` for a (hidden, state) pair is over the full vocabulary or a candidate id subset (DominoTree's
top-M).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from inference.drafter.config import DrafterConfig
from inference.kernels.linear import MeasuredLinear
from inference.kernels.policy import KernelPolicy


class DominoHead(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        h, g, r = config.hidden_size, config.gru_hidden_dim, config.correction_rank
        self.gru_hidden_dim = g
        self.pure_draft_prefix_len = config.pure_draft_prefix_len
        self.prefix_gru = nn.GRU(h, g, num_layers=1, bias=False, batch_first=True)
        self.embed_proj = nn.Sequential(
            nn.Linear(h + g, r, bias=False), nn.SiLU(), nn.Linear(r, config.output_vocab_size, bias=False)
        )
        # The GRU's W_ih and W_hh on measured kernels (`use_kernels`), used by the decoding steps; a tuple, so
        # that they stay out of the module tree and the state dict.
        self.packed_gru: tuple[MeasuredLinear, MeasuredLinear] | None = None

    def use_kernels(self, policy: KernelPolicy) -> list[MeasuredLinear]:
        """Run the decoding GRU steps' W_ih and W_hh on `policy`'s kernels (a drafter bound to an inference
        target, `DominoDrafter.bind_target`); returns the two linears."""
        gru = self.prefix_gru
        self.packed_gru = (policy.linear(gru.weight_ih_l0), policy.linear(gru.weight_hh_l0))
        return list(self.packed_gru)

    def init_state(self, batch_size: int, device: torch.device | str, dtype: torch.dtype) -> torch.Tensor:
        """The state before any token: zeros [batch, G]."""
        return torch.zeros(batch_size, self.gru_hidden_dim, device=device, dtype=dtype)

    # ------------------------------------------------------------ training: through the nn.GRU module
    # (its forward hooks gather DeepSpeed ZeRO-3 shards, which reading the raw weights would miss)
    def teacher_forced_states(self, token_embeds: torch.Tensor) -> torch.Tensor:
        """All states of a teacher-forced sequence [n, L, H] -> [n, L, G]; index j = after tokens 0..j."""
        states, _ = self.prefix_gru(token_embeds)
        return states

    def training_step(self, token_embeds: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The state [..., G] after also consuming `token_embeds` [..., H]: training-time testing's step."""
        lead = state.shape[:-1]
        x = token_embeds.reshape(-1, 1, token_embeds.shape[-1])
        _, h = self.prefix_gru(x, state.reshape(1, -1, state.shape[-1]).contiguous())
        return h.view(*lead, -1)

    # ------------------------------------------------------------ decoding: the cell written out
    # (the same arithmetic as `nn.GRU`'s up to rounding: cheaper per call, capturable in CUDA graphs)
    def decoding_gates(self, token_embeds: torch.Tensor) -> torch.Tensor:
        """W_ih . x for token embeddings [..., H] -> [..., 3G] (gates r, z, n); tabulable per token id."""
        if self.packed_gru is not None:
            return self.packed_gru[0](token_embeds)
        return F.linear(token_embeds, self.prefix_gru.weight_ih_l0)

    def decoding_step(self, gi: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """One GRU step from a token's gates `gi` [..., 3G] (`decoding_gates`) and a state [..., G]."""
        gh = self.packed_gru[1](state) if self.packed_gru is not None else F.linear(state, self.prefix_gru.weight_hh_l0)
        i_r, i_z, i_n = gi.chunk(3, dim=-1)
        h_r, h_z, h_n = gh.chunk(3, dim=-1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return n + z * (state - n)

    def decoding_first_step(self, gi: torch.Tensor) -> torch.Tensor:
        """`decoding_step` from the zero state (`init_state`), bit for bit, without the W_hh . 0 product: the
        first GRU step of every draft, where that product would read W_hh from memory for nothing."""
        _, i_z, i_n = gi.chunk(3, dim=-1)
        # contiguous like the sums `decoding_step` feeds them: a strided view takes a kernel that rounds differently
        z = torch.sigmoid(i_z.contiguous())
        n = torch.tanh(i_n.contiguous())
        return n - z * n

    # ------------------------------------------------------------ the earlier names, kept for their callers
    encode = teacher_forced_states
    gru_step = training_step
    input_projection = decoding_gates
    step_projected = decoding_step
    first_step_projected = decoding_first_step

    def step(self, token_embeds: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """`decoding_step` on token embeddings [..., H]."""
        return self.decoding_step(self.decoding_gates(token_embeds), state)

    def first_step(self, token_embeds: torch.Tensor) -> torch.Tensor:
        """`decoding_first_step` on token embeddings [..., H]: `step(token_embeds, init_state(...))`, bit for bit."""
        return self.decoding_first_step(self.decoding_gates(token_embeds))

    def correction(
        self, hidden: torch.Tensor, state: torch.Tensor, candidate_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """dL for hidden [..., H] and state [..., G]: [..., V], or [..., M] on `candidate_ids` [..., M].

        With candidates only their W2 rows are used (M x r instead of V x r work); `candidate_ids` of shape
        [M] are shared by every leading index.
        """
        if candidate_ids is None:  # through the module: its forward hooks gather ZeRO-3 shards in training
            return self.embed_proj[2](self.correction_features(hidden, state))
        w2 = self.embed_proj[2].weight
        rows = w2.index_select(0, candidate_ids) if candidate_ids.dim() == 1 else w2[candidate_ids]
        return self.correction_rows(hidden, state, rows)

    def correction_features(self, hidden: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """z = SiLU(W1 [H ; S]) [..., r]: the low-rank code the correction is read out of."""
        return F.silu(self.embed_proj[0](torch.cat([hidden, state], dim=-1)))

    def correction_rows(self, hidden: torch.Tensor, state: torch.Tensor, w2_rows: torch.Tensor) -> torch.Tensor:
        """The correction on pre-gathered W2 rows [..., M, r] (e.g. once per round for a tree) -> fp32 [..., M].

        In fp32 whatever the weights' dtype (exact for bf16 inputs), as `FastDominoExpander` computes it in
        one product over every position's candidates, so that the two tree builders agree to rounding."""
        features = self.correction_features(hidden, state).float().unsqueeze(-1)
        return torch.matmul(w2_rows.float(), features).squeeze(-1)
