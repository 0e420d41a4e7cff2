"""Losslessness that tells a numerical tie of the target from a decoding bug (greedy runs).

At T = 0 a lossless method's output equals `ar`'s token for token, or first differs at a position where
the target cannot decide between the two tokens. In exact arithmetic the second case does not exist; in
floating point the verify forward (k tokens at once) and plain decoding (one token at a time) run
different kernels and reduction orders, so their logits differ slightly (bf16 SmolLM2: tenths of a
logit; fp32: ~1e-5), and where the target's top two tokens are that close the argmax can flip.

The rule, per generation that differs from `ar`'s:
- find the first differing position p, re-score the common prefix (prompt + the first p tokens) with one
  target forward and take the gap |logit(ar's token) - logit(the method's token)| at p;
- the run's **noise floor** is measured on the run's own prompts, in its precision and on its device:
  for each prompt, the prompt is cached, then `ar`'s first k output tokens go through one k-token
  forward and through k one-token forwards over the same cache, and the floor is the largest change of
  a logit gap between the two (max - min of the logit difference at a position; a gap between two
  tokens moves by at most that much, up to twice the largest |logit difference|);
- a divergence whose gap is within the floor is `numerical`, one beyond it `algorithmic` (so is a
  generation that ended while the other went on without a stop token, or one that is missing).
`lossless` means no algorithmic divergence. The floor is a measurement, never a setting; in fp32 on
the tiny targets it is ~1e-5, so any bug there is algorithmic, and the tests keep exact equality.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from inference.targets.adapter import TargetModel

EXACT, NUMERICAL, ALGORITHMIC = "exact", "numerical", "algorithmic"
DIVERGENCE_CLASSES = (EXACT, NUMERICAL, ALGORITHMIC)


@dataclass
class Divergence:
    """Where a generation first parts from `ar`'s, and how far apart the target holds the two tokens."""

    position: int  # index into the output tokens
    ar_token: int | None  # None: `ar`'s output ended before this position
    token: int | None  # None: the method's output ended before this position
    gap: float | None  # |logit(ar_token) - logit(token)| of the re-scored prefix; None when a side ended

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def first_difference(reference: list[int], tokens: list[int]) -> int | None:
    """The first index where the two outputs differ (a length difference counts); None if equal."""
    for i, (a, b) in enumerate(zip(reference, tokens, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(tokens) else min(len(reference), len(tokens))


@torch.inference_mode()
def measure_divergence(target: TargetModel, prompt_ids: list[int], reference: list[int], tokens: list[int]):
    """The `Divergence` of `tokens` from `reference` (`ar`'s output), or None when they are equal."""
    p = first_difference(reference, tokens)
    if p is None:
        return None
    a = reference[p] if p < len(reference) else None
    b = tokens[p] if p < len(tokens) else None
    if a is None or b is None:
        return Divergence(p, a, b, None)
    ids = torch.tensor([prompt_ids + reference[:p]], device=target.device)
    logits = target(ids, last_logits_only=True).logits[0, -1].float()
    return Divergence(p, a, b, abs(logits[a] - logits[b]).item())


@torch.inference_mode()
def measure_noise(target: TargetModel, prompt_ids: list[int], continuation: list[int], window: int) -> float | None:
    """The largest change of a logit gap between one k-token forward and k one-token forwards over the
    first k = min(window, len) tokens of `continuation` after the cached prompt; None below 2 tokens."""
    k = min(window, len(continuation))
    if k < 2:
        return None
    device = target.device
    cache = target.new_cache()
    target(torch.tensor([prompt_ids], device=device), cache=cache, last_logits_only=True)
    start = target.cache_length(cache)
    chunk = torch.tensor([continuation[:k]], device=device)
    together = target(chunk, cache=cache).logits[0].float()
    target.crop_cache(cache, start)
    one_by_one = torch.cat([target(chunk[:, i : i + 1], cache=cache).logits[0].float() for i in range(k)])
    diff = together - one_by_one
    return (diff.amax(-1) - diff.amin(-1)).max().item()


def counts_text(counts: dict[str, int]) -> str:
    """`exact / numerical / algorithmic` counts as the tables and model cards show them: `38 / 2 / 0`."""
    return " / ".join(str(counts.get(k, 0)) for k in DIVERGENCE_CLASSES)


def classify(divergence: dict[str, Any] | None, equal: bool, noise_floor: float | None) -> str:
    """`exact`, `numerical` or `algorithmic` for one generation (see the module docstring)."""
    if equal:
        return EXACT
    gap = divergence.get("gap") if divergence else None
    if gap is None or noise_floor is None:
        return ALGORITHMIC
    return NUMERICAL if gap <= noise_floor else ALGORITHMIC
