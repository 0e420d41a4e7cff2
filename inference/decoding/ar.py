"""`ar`: the lean autoregressive baseline that speedups are measured against.

One target forward per token with a KV cache, logits of the last position only, no hidden-state capture,
no drafter: the honest baseline (Domino's own baseline was ~23 % slower than a lean loop, which inflated
its speedups). The host reads each token once, which the stop check needs anyway.
"""

from __future__ import annotations

import torch

from inference.decoding.generation import Decoder, Generation
from inference.decoding.sampling import sample
from inference.decoding.stats import GenerationStats


class ARDecoder(Decoder):
    name = "ar"

    @torch.inference_mode()
    def generate(
        self, prompt_ids: list[int] | torch.Tensor, max_new_tokens: int, generator: torch.Generator | None = None
    ) -> Generation:
        ids = self.prompt_tensor(prompt_ids)
        budget = self.token_budget(ids.shape[1], max_new_tokens)
        target, clock = self.target, self.clock
        stats = GenerationStats(prompt_tokens=ids.shape[1])
        start = clock.now()
        cache = target.new_cache(capacity=ids.shape[1] + budget + 1)
        logits = target(ids, cache=cache, last_logits_only=True).logits[:, -1]
        if self.probe is not None:
            self.probe.observe(0, logits, ids.shape[1], [ids.shape[1] - 1])
        token = sample(logits, self.sampling, generator)
        tokens = [token.item()]
        first = clock.now()
        stats.prefill_s = first - start
        reason = "stop" if tokens[-1] in self.stop_token_ids else "length"
        while reason != "stop" and len(tokens) < budget:
            logits = target(token.view(1, 1), cache=cache, last_logits_only=True).logits[:, -1]
            if self.probe is not None:
                self.probe.observe(len(tokens), logits, 1, [0])
            token = sample(logits, self.sampling, generator)
            tokens.append(token.item())
            if tokens[-1] in self.stop_token_ids:
                reason = "stop"
        stats.decode_s = clock.now() - first
        stats.output_tokens = len(tokens)
        stats.accept_lengths = [1] * (len(tokens) - 1)  # one target forward per token after the first
        return Generation(tokens=tokens, finish_reason=reason, stats=stats)
