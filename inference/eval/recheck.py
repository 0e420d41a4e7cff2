"""A generation the run's precision could not clear, decoded again and proven in a finer one.

In bf16 a correct tree and a tree with a wrong mask both part from `ar` at close calls, and their logits sit
at the same distances from `ar`'s (`benchmarks/lossless_resolution.py`: ~1-2x the plain forward's): clause
(c) of the proof (`inference.eval.divergence`) cannot be both sharp and safe there, and flags a few correct
generations at exact ties. In float32 rounding moves logits ~1e-5 and the same clause is sharp: a wrong
mask, position or cache row moves them by tenths. So a generation flagged algorithmic by (c) alone (both
sides chose their own argmax, no own-argmax violation) is decoded again with the run's code in float32,
batch-1 `ar` as its reference, and checked twice there:

- **audit**: the method alone, every output's logits up to where it parts from `ar`'s against `ar`'s,
  within the proof's factor of what plain forwards of the method's widest window give (`audit_rows`). A
  wrong mask moves logits wherever it shows a node another, whether or not an argmax flips;
- **proof**: the divergence, if any, proven as a run proves it: alone at concurrency 1, or in a batch of
  its unit's prompts (the same prompts, order and concurrency) above it.

If both hold, the flag is recorded as numerical, the float32 evidence kept beside it (`recheck`); otherwise
it stays algorithmic. What the recheck vouches for is the code on that prompt in float32: a round there
may draft another tree than it did in bf16 (the drafter's and the cost rule's numbers change), so a bug
that fires on one tree shape only could escape it. Without the audit, the planted tree-mask bug escaped
it once in 8 prompts at batch 1 (no divergence beyond rounding in float32; `benchmarks/lossless_resolution.py`).
A recheck loads the float32 target and drafters once, at the first flag; a run without a flag pays nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import torch

from inference.decoding.batched import BatchedDecoder
from inference.decoding.generation import Decoder, Generation
from inference.decoding.logits_probe import LogitsProbe
from inference.eval.divergence import (
    ALGORITHMIC,
    DISTANCE_FACTOR,
    DISTANCE_SLACK,
    EXACT,
    NUMERICAL,
    batched_ar_rows,
    first_difference,
    prove_divergence,
)
from inference.eval.records import Record
from inference.targets.adapter import TargetModel

log = logging.getLogger(__name__)


def needs_recheck(record: Record) -> bool:
    """Flagged algorithmic by clause (c) alone: the one flag a finer precision can clear."""
    d = record.divergence
    return (
        d is not None
        and d.get("kind") == ALGORITHMIC
        and d.get("reason", "").startswith("(c)")
        and record.stats is not None
        and not record.stats.own_argmax_violations
    )


class PrecisionRecheck:
    """Decodes and proves flagged generations with `build()`'s decoders ({arm: decoder} in `dtype`, built
    at the first call) and `max_new_tokens` a generation, as the run did."""

    def __init__(self, build: Callable[[], Mapping[str, Decoder]], dtype: str, max_new_tokens: int) -> None:
        self._build, self.dtype, self.max_new_tokens = build, dtype, max_new_tokens
        self._decoders: Mapping[str, Decoder] | None = None

    @property
    def decoders(self) -> Mapping[str, Decoder]:
        if self._decoders is None:
            log.info("loading the target and drafters in %s for the lossless recheck", self.dtype)
            self._decoders = self._build()
        return self._decoders

    def __call__(self, record: Record, prompts: list[list[int]], index: int = 0) -> None:
        """Recheck `record` (flagged by (c): `needs_recheck`), the generation of `prompts[index]`, decoded in
        a batch of `prompts` at its concurrency (one prompt at concurrency 1); updates its divergence."""
        log.info(
            "rechecking %s %s turn %d of %s in %s",
            record.dataset,
            record.prompt_id,
            record.turn,
            record.arm,
            self.dtype,
        )
        ar, method = self.decoders["ar"], self.decoders[record.method]
        n, ids = self.max_new_tokens, prompts[index]
        reference, ar_rows = _probed(ar, ids, n)
        alone, rows = _probed(method, ids, n)
        audit = audit_rows(method.target, ids, reference.tokens, alone.tokens, ar_rows, rows, method.max_window())
        if record.concurrency == 1:
            found = prove_divergence(method, ar, ids, reference.tokens, alone.tokens, n, alone.stats.draft_sizes)
        else:
            references = [reference.tokens if i == index else None for i in range(len(prompts))]
            gens = BatchedDecoder(method, record.concurrency).generate(prompts, n, references=references)
            gen = gens[index]
            outputs = [reference.tokens if i == index else g.tokens for i, g in enumerate(gens)]

            def batch(around: range) -> dict:
                return batched_ar_rows(ar, record.concurrency, prompts, outputs, index, around)

            found = prove_divergence(
                method, ar, ids, reference.tokens, gen.tokens, n, captured=gen.probe, batched=True, batch=batch
            )
        kind = EXACT if found is None else found.kind
        if audit["distance"] > audit["allowed"]:
            kind = ALGORITHMIC
        divergence = dict(record.divergence or {})
        proof = found.to_dict() if found else None
        divergence["recheck"] = {"dtype": self.dtype, "kind": kind, "divergence": proof, "audit": audit}
        if kind != ALGORITHMIC:
            divergence["kind"] = NUMERICAL
            divergence["reason"] += f"; decoded again in {self.dtype}: {kind}, every logit within rounding of ar's"
        record.divergence = divergence


def _probed(decoder: Decoder, ids: list[int], n: int) -> tuple[Generation, dict[int, torch.Tensor]]:
    """A batch-1 generation and {output index: the logits row that chose it}, for every output (the probe's
    own position, -1, is none)."""
    decoder.probe = probe = LogitsProbe(-1, range(n))
    try:
        return decoder.generate(ids, n), probe.rows
    finally:
        decoder.probe = None


@torch.inference_mode()
def audit_rows(
    target: TargetModel,
    ids: list[int],
    reference: list[int],
    tokens: list[int],
    ar_rows: dict[int, torch.Tensor],
    rows: dict[int, torch.Tensor],
    width: int,
) -> dict[str, float | int]:
    """The method's logits at every output up to where its output parts from `ar`'s `reference` (both
    computed over the same prefix there) against `ar`'s: their largest distance, and what rounding allows
    (the proof's factor and slack over the largest distance from `ar`'s of plain `width`-token forwards
    along `reference`). A wrong mask moves logits at every position where it shows a node another, whether
    or not the argmax flips, so in a fine precision this catches what one divergence might not."""
    last = first_difference(reference, tokens)
    outputs = [q for q in range(len(reference) if last is None else last + 1) if q in rows and q in ar_rows]
    distance = max(((rows[q] - ar_rows[q]).abs().max().item() for q in outputs), default=0.0)
    cache = target.new_cache()
    target(torch.tensor([ids], device=target.device), cache=cache, last_logits_only=True)
    plain = 0.0
    for start in range(0, len(reference) - 1, width):
        chunk = reference[start : start + width]
        logits = target(torch.tensor([chunk], device=target.device), cache=cache).logits[0].float().cpu()
        for k, row in enumerate(logits):
            if start + k + 1 in ar_rows:
                plain = max(plain, (row - ar_rows[start + k + 1]).abs().max().item())
    allowed = DISTANCE_FACTOR * plain + DISTANCE_SLACK
    return {"outputs": len(outputs), "distance": distance, "plain_distance": plain, "allowed": allowed}
