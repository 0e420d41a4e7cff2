"""`GreedyChainRollout`: the `domino` method's per-block rollout on static buffers, one CUDA graph on GPUs.

After the backbone and the lm_head, a greedy Domino chain is D small sequential steps (a GRU step, a
rank-r correction over the vocabulary, an argmax), each a handful of tiny kernels: launch-bound on a
GPU. Captured once as a graph, the whole rollout is one launch per round. The arithmetic is
`chain.draft_chain`'s, op for op, so the eager path drafts exactly the tokens `draft_chain` drafts.
"""

from __future__ import annotations

import torch

from inference.drafter import DominoDrafter
from inference.kernels.cuda_graph import StaticStep


class GreedyChainRollout:
    def __init__(self, drafter: DominoDrafter, cuda_graph: bool = False) -> None:
        if drafter.head is None:
            raise ValueError("the Domino rollout needs a drafter with a Domino head")
        cfg = drafter.config
        p = next(drafter.parameters())
        self.drafter, self.head, self.prefix = drafter, drafter.head, cfg.pure_draft_prefix_len
        d = cfg.num_draft_tokens
        self.hidden = torch.zeros(d, cfg.hidden_size, device=p.device, dtype=p.dtype)
        self.base = torch.zeros(d, cfg.output_vocab_size, device=p.device, dtype=p.dtype)
        self.root = torch.zeros(1, dtype=torch.long, device=p.device)
        self.tokens = torch.zeros(d, dtype=torch.long, device=p.device)
        self.step = StaticStep(self._rollout, cuda_graph)

    @torch.inference_mode()
    def _rollout(self) -> None:
        head, h, base, d = self.head, self.hidden, self.base, len(self.tokens)
        to_target = self.drafter.vocab.to_target_ids
        prefix = min(self.prefix, d)
        if prefix:
            self.tokens[:prefix].copy_(to_target(base[:prefix].argmax(-1)))
        first, *rest = self.drafter.embed(torch.cat([self.root, self.tokens[:prefix]])).to(h.dtype)
        state = head.first_step(first.unsqueeze(0))
        for x in rest:
            state = head.step(x.unsqueeze(0), state)
        for j in range(prefix, d):
            token = to_target((base[j : j + 1] + head.correction(h[j : j + 1], state)).argmax(-1))
            self.tokens[j : j + 1].copy_(token)
            if j + 1 < d:
                state = head.step(self.drafter.embed(token).to(h.dtype), state)

    def __call__(self, hidden: torch.Tensor, base_logits: torch.Tensor, root: torch.Tensor) -> torch.Tensor:
        """Greedy draft tokens [D] (target ids) for one block (hidden [D, H], base logits [D, N or V], root [1])."""
        self.hidden.copy_(hidden)
        self.base.copy_(base_logits)
        self.root.copy_(root)
        self.step()
        return self.tokens.clone()
