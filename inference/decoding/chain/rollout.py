"""`GreedyChainRollout`: the `domino` method's per-block rollout on static buffers, one CUDA graph on GPUs.

After the backbone and the lm_head, a greedy Domino chain is D small sequential steps (a GRU step, a
rank-r correction over the vocabulary, an argmax), each a handful of tiny kernels: launch-bound on a
GPU. Captured once as a graph, the whole rollout is one launch per round. It is `draft_chain`'s rollout
(`inference.drafter.rollout.roll_out` with the decoding steps and an argmax), on static buffers, so the
eager path drafts exactly the tokens `draft_chain` drafts.
"""

from __future__ import annotations

import torch

from inference.decoding.sampling import greedy_ids
from inference.drafter import DominoDrafter
from inference.drafter.rollout import DecodingSteps, roll_out
from inference.kernels.cuda_graph import StaticStep


class GreedyChainRollout:
    def __init__(self, drafter: DominoDrafter, cuda_graph: bool = False) -> None:
        if drafter.head is None:
            raise ValueError("the Domino rollout needs a drafter with a Domino head")
        cfg = drafter.config
        p = next(drafter.parameters())
        self.drafter, self.steps, self.prefix = drafter, DecodingSteps(drafter.head), cfg.pure_draft_prefix_len
        d = cfg.num_draft_tokens
        self.hidden = torch.zeros(d, cfg.hidden_size, device=p.device, dtype=p.dtype)
        self.base = torch.zeros(d, cfg.output_vocab_size, device=p.device, dtype=p.dtype)
        self.root = torch.zeros(1, dtype=torch.long, device=p.device)
        self.tokens = torch.zeros(d, dtype=torch.long, device=p.device)
        self.step = StaticStep(self._rollout, cuda_graph)

    @torch.inference_mode()
    def _rollout(self) -> None:
        to_target = self.drafter.vocab.to_target_ids
        tokens = []

        def choose(logits: torch.Tensor) -> torch.Tensor:
            tokens.append(to_target(greedy_ids(logits)))
            return tokens[-1]

        prefix = min(self.prefix, len(self.tokens))
        start = torch.cat([self.root, choose(self.base[:prefix])] if prefix else [self.root]).unsqueeze(0)
        roll_out(self.steps, self.drafter.embed, self.hidden.unsqueeze(0), self.base.unsqueeze(0), start, choose)
        self.tokens.copy_(torch.cat(tokens))

    def __call__(self, hidden: torch.Tensor, base_logits: torch.Tensor, root: torch.Tensor) -> torch.Tensor:
        """Greedy draft tokens [D] (target ids) for one block (hidden [D, H], base logits [D, N or V], root [1])."""
        self.hidden.copy_(hidden)
        self.base.copy_(base_logits)
        self.root.copy_(root)
        self.step()
        return self.tokens.clone()
