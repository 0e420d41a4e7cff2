"""Log-probabilities at a few ids per row, and each row's argmax, without a full log-softmax tensor.

Every draft-position term of the objective (cross-entropy on the label, KL and total variation to the
target's top-k) reads the drafter's log-softmax at a handful of ids only, and the metrics read its argmax.
The obvious code (`logits.float().log_softmax(-1)`, then `gather`, then `argmax` twice per metric) makes an
fp32 copy of the [N, V] logits, a full log-softmax, its backward, the zero-filled scatter of `gather`'s
backward and the cast back: several passes over a tensor of N x V that does not fit in cache (on a bf16 CPU
those passes cost more than the lm_head itself). `log_probs_at` walks the rows in chunks that do (the
arithmetic in at least fp32 whatever the logits' dtype, each op converting as it reads) and makes one pass
forward (max, argmax, log-sum-exp, picks) and one backward (softmax times the summed upstream gradient,
minus it at the ids), written straight into a gradient of the logits' dtype.
"""

from __future__ import annotations

import torch

# fp32 elements per chunk: a CPU chunk stays in a core's L2 cache; a GPU one is large enough to fill it.
_CHUNK_ELEMENTS = {"cpu": 1 << 19}
_DEFAULT_CHUNK_ELEMENTS = 1 << 26


def _row_chunks(n: int, v: int, device: torch.device) -> list[slice]:
    rows = max(1, _CHUNK_ELEMENTS.get(device.type, _DEFAULT_CHUNK_ELEMENTS) // max(v, 1))
    return [slice(i, min(i + rows, n)) for i in range(0, n, rows)]


class _LogProbsAt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        n, v = logits.shape
        math = torch.promote_types(logits.dtype, torch.float32)
        picked = torch.empty(ids.shape, dtype=math, device=logits.device)
        lse = torch.empty(n, dtype=math, device=logits.device)
        argmax = torch.empty(n, dtype=torch.long, device=logits.device)
        with torch.autocast(logits.device.type, enabled=False):
            for rows in _row_chunks(n, v, logits.device):
                x = logits[rows]  # read in its own dtype: each op below converts as it reads, no fp32 copy
                top, argmax[rows] = x.max(-1)
                top = top.to(math).unsqueeze(-1)
                lse[rows] = (x - top).exp_().sum(-1).log_() + top.squeeze(-1)
                picked[rows] = x.gather(1, ids[rows]).to(math) - lse[rows].unsqueeze(-1)
        ctx.save_for_backward(logits, ids, lse)
        ctx.mark_non_differentiable(argmax)
        return picked, argmax

    @staticmethod
    def backward(ctx, grad_picked: torch.Tensor, _grad_argmax: torch.Tensor | None) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        logits, ids, lse = ctx.saved_tensors
        n, v = logits.shape
        grad = torch.empty_like(logits)
        grad_picked = grad_picked.to(lse.dtype)
        total = grad_picked.sum(-1, keepdim=True)
        with torch.autocast(logits.device.type, enabled=False):
            for rows in _row_chunks(n, v, logits.device):
                g = (logits[rows] - lse[rows].unsqueeze(-1)).exp_().mul_(-total[rows])
                grad[rows] = g.scatter_add_(1, ids[rows], grad_picked[rows])
        return grad, None


def log_probs_at(logits: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`log_softmax(logits)` at `ids` ([..., m], fp32 or fp64) and `argmax(logits)` ([...], no gradient).

    logits [..., V] in any float dtype; ids [..., m] integer indices into V (repeats allowed: their
    gradients add up). Equal to `logits.float().log_softmax(-1).gather(-1, ids)` within fp32 rounding,
    gradient included.
    """
    lead = logits.shape[:-1]
    if ids.shape[:-1] != lead:
        raise ValueError(f"ids {tuple(ids.shape)} must be [..., m] over the logits' rows {tuple(lead)}")
    flat_logits = logits.reshape(-1, logits.shape[-1])
    picked, argmax = _LogProbsAt.apply(flat_logits, ids.reshape(-1, ids.shape[-1]).long())
    return picked.view(*lead, ids.shape[-1]), argmax.view(lead)
