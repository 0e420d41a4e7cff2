"""A generation the run's precision could not clear, decoded again and proven in a finer one.

In bf16 a correct tree and a tree with a wrong mask both part from `ar` at close calls, and their logits sit
at the same distances from `ar`'s (`benchmarks/lossless_resolution.py`: ~1-2x the plain forward's): clause
(c) of the proof (`inference.eval.divergence`) cannot be both sharp and safe there, and flags a few correct
generations at exact ties. In float32 rounding moves logits ~1e-5 and the same clause is sharp: a wrong
mask, position or cache row moves them by tenths. So a generation flagged algorithmic by (c) alone (both
sides chose their own argmax, no own-argmax violation) is decoded again with the run's code in float32,
batch-1 `ar` as its reference: alone at concurrency 1, or in a batch of its unit's prompts (the same
prompts, order and concurrency) above it, and proven there. If it is exact or numerical in float32, the
flag is recorded as numerical, the float32 proof kept beside it (`recheck`); otherwise it stays algorithmic.

What the recheck proves is the code on that prompt and batch in float32; in float32 a round may draft
another tree than it did in bf16 (the drafter's and the cost rule's numbers change), so a bug that fires
on one tree shape only could escape it. The planted tree-mask bug does not (the resolution benchmark).
A recheck loads the float32 target and drafters once, at the first flag; a run without a flag pays nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from inference.decoding.batched import BatchedDecoder
from inference.decoding.generation import Decoder
from inference.eval.divergence import ALGORITHMIC, EXACT, NUMERICAL, batched_ar_rows, prove_divergence
from inference.eval.records import Record

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
        reference = ar.generate(ids, n).tokens
        if record.concurrency == 1:
            gen = method.generate(ids, n)
            found = prove_divergence(method, ar, ids, reference, gen.tokens, n, gen.stats.draft_sizes)
        else:
            references = [reference if i == index else None for i in range(len(prompts))]
            gens = BatchedDecoder(method, record.concurrency).generate(prompts, n, references=references)
            gen = gens[index]
            outputs = [reference if i == index else g.tokens for i, g in enumerate(gens)]

            def batch(around: range) -> dict:
                return batched_ar_rows(ar, record.concurrency, prompts, outputs, index, around)

            found = prove_divergence(
                method, ar, ids, reference, gen.tokens, n, captured=gen.probe, batched=True, batch=batch
            )
        kind = EXACT if found is None else found.kind
        divergence = dict(record.divergence or {})
        divergence["recheck"] = {"dtype": self.dtype, "kind": kind, "divergence": found.to_dict() if found else None}
        if kind != ALGORITHMIC:
            divergence["kind"] = NUMERICAL
            divergence["reason"] += f"; decoded again in {self.dtype}: {kind}, so rounding"
        record.divergence = divergence
