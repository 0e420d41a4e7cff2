"""Losslessness at T = 0, proven at each divergence rather than judged against one noise floor.

A lossless greedy method commits, at every position, the argmax of the target's logits. Two checks:

- **Own argmax, everywhere.** Every token a method commits must be the argmax of the logits its own verify
  forward produced at that position (the decoders audit this as they commit:
  `GenerationStats.own_argmax_violations`). Any violation is `algorithmic`, whether or not the output
  parts from `ar`'s: it catches acceptance bugs that happen not to change this output.
- **At a divergence, both sides' own numbers.** In floating point a k-token verify and k one-token steps
  round differently, so where the target's two best tokens are close either may win. Where a method's
  output first parts from `ar`'s (position p), the method's logits at p are taken from its own verify
  forward: a batch-1 generation is replayed with a `LogitsProbe` at p (decoding is deterministic within
  a process, and the replay must commit the same tokens); a batched run captured them as it committed
  (`BatchedDecoder`, given `ar`'s output). `ar`'s one-token logits at p and the positions around it come
  from a replay of `ar`. The divergence is `numerical` only if
  (a) the method's token is the argmax of its verify logits at p (`method_margin` >= 0),
  (b) `ar`'s token is the argmax of `ar`'s logits at p (`ar_margin` >= 0), and
  (c) the method's logit vector is as close to `ar`'s as rounding allows: its largest difference from
      `ar`'s (`distance`) is at most `DISTANCE_FACTOR` x that of a plain forward of the same shape over
      `ar`'s own tokens (`reference_distance`), plus `DISTANCE_SLACK`. The plain forward has the method's
      width (and, for a batched row, the batch's rows and padded width), no tree mask, no compaction, a
      freshly prefilled cache; its rounding is measured at every output position it predicts (the
      largest, so that one lucky row does not set the scale).
  A batched row's cache was written by forwards of other shapes than a fresh prefill's, which round
  otherwise, and at each round of its history: where the plain bound fails, the bound is instead the
  distance from `ar`'s logits of batched `ar`'s own, teacher-forced along `ar`'s output in the batch the
  row ran in (the same prompts, concurrency and refills: `BatchedDecoder.follow`; `batch_distance`, the
  largest over the same output positions), when that is larger. Batched `ar` is plain decoding, so its
  distance is rounding by definition; it is computed only where needed (a whole batch's replay).
  A wrong mask, position id or cache row moves logits far more than rounding and fails (c). Otherwise,
  and whenever one side ended while the other went on, or a record is missing, it is `algorithmic`.
`lossless` means no algorithmic generation. The noise floor (the largest change of a logit gap between one
k-token and k one-token forwards on the run's prompts) stays a reported measurement, not a criterion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from inference.decoding.batched import BatchedDecoder
from inference.decoding.generation import Decoder
from inference.decoding.logits_probe import LogitsProbe
from inference.targets.adapter import TargetModel
from inference.targets.ragged_window import RaggedWindow


@dataclass
class _Plain:
    """A causal window of tokens (`RaggedWindow.stack`'s row)."""

    ids: torch.Tensor
    depths: torch.Tensor | None = None
    visible: torch.Tensor | None = None


EXACT, NUMERICAL, ALGORITHMIC = "exact", "numerical", "algorithmic"
DIVERGENCE_CLASSES = (EXACT, NUMERICAL, ALGORITHMIC)


DISTANCE_FACTOR = 2.0  # (c): the method's logits may sit this many times farther from ar's than a plain forward's
DISTANCE_SLACK = 1e-4  # (c): plus this many logits (fp32 rounding of a plain forward can be ~0)


@dataclass
class Divergence:
    """Where a generation first parts from `ar`'s and the proof that it is (or is not) rounding."""

    position: int  # index into the output tokens
    ar_token: int | None  # None: `ar`'s output ended before this position
    token: int | None  # None: the method's output ended before this position
    method_margin: float | None = None  # logit(token) - logit(ar_token) in the method's own verify logits at p
    ar_margin: float | None = None  # logit(ar_token) - logit(token) in ar's one-token step at p
    distance: float | None = None  # max |method's logits - ar's| at p
    reference_distance: float | None = None  # max |plain forward of the same width - ar's| at p
    batch_distance: float | None = None  # max |batched ar along ar's output - ar's| (a batched row, when needed)
    width: int | None = None  # tokens in the method's verify forward at p
    allowed: float | None = None  # the most `distance` may be for (c) to hold (what rounding gives, module doc)
    kind: str = ALGORITHMIC  # numerical or algorithmic
    reason: str = ""  # what the proof found

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def first_difference(reference: list[int], tokens: list[int]) -> int | None:
    """The first index where the two outputs differ (a length difference counts); None if equal."""
    for i, (a, b) in enumerate(zip(reference, tokens, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(tokens) else min(len(reference), len(tokens))


def prove_divergence(
    method: Decoder,
    ar: Decoder,
    prompt_ids: list[int],
    reference: list[int],
    tokens: list[int],
    max_new_tokens: int,
    draft_sizes: list[int] | None = None,
    captured: LogitsProbe | None = None,
    batched: bool = False,
    batch: Callable[[range], dict[int, torch.Tensor]] | None = None,
) -> Divergence | None:
    """The proven `Divergence` of `method`'s `tokens` from `ar`'s `reference` (None when they are equal;
    see the module doc). `draft_sizes`: the method's rounds' draft sizes (`stats.draft_sizes`), replayed
    when the method is cost-aware (its sizes follow timings, so a replay must be told them to verify the
    same windows). `captured`: the method's logits at the divergence as a batched run captured them
    (`BatchedDecoder.generate(..., references=)`), used instead of a replay; a `batched` generation
    without one stays algorithmic (a batch-1 replay would not run its forwards' shapes). `batch`: output
    indices -> batched `ar`'s logits rows there along `reference`, in the batch the generation ran in
    (`batched_ar_rows`); called only where the plain bound fails."""
    p = first_difference(reference, tokens)
    if p is None:
        return None
    a = reference[p] if p < len(reference) else None
    b = tokens[p] if p < len(tokens) else None
    if a is None or b is None:
        return Divergence(p, a, b, reason="one output ended while the other went on")
    if batched and captured is None:
        return Divergence(p, a, b, reason="the batched run captured no logits at the divergence")
    if captured is not None:
        mine = captured
        if mine.position != p or mine.logits is None:
            return Divergence(p, a, b, reason=f"the batched run captured position {mine.position}, not {p}")
    else:
        schedule = draft_sizes if getattr(method, "cost_aware", False) else None
        mine, replayed = _replay(method, prompt_ids, max_new_tokens, p, schedule)
        if replayed != tokens:
            return Divergence(p, a, b, reason="the replay committed other tokens: decoding is not deterministic")
    if mine.logits is None:
        return Divergence(p, a, b, reason="the decoder reported no logits at the divergence")
    sequence = prompt_ids + reference
    plain, start = _plain_rows(method.target, sequence, len(prompt_ids) + p - 1, mine, prefill=p == 0)
    first = start + 1 - len(prompt_ids)  # the output index the plain forward's first row predicts
    outputs = [q for q in range(first, first + plain.shape[0]) if 0 <= q < len(reference)]
    theirs, _ = _replay(ar, prompt_ids, max(outputs) + 1, p, around=range(outputs[0], outputs[-1] + 1))
    if theirs.logits is None:
        return Divergence(p, a, b, reason="ar reported no logits at the divergence")
    found = Divergence(
        p,
        a,
        b,
        method_margin=(mine.logits[b] - mine.logits[a]).item(),
        ar_margin=(theirs.logits[a] - theirs.logits[b]).item(),
        distance=(mine.logits - theirs.logits).abs().max().item(),
        reference_distance=max((plain[q - first] - theirs.rows[q]).abs().max().item() for q in outputs),
        width=mine.width,
    )
    allowed = DISTANCE_FACTOR * found.reference_distance + DISTANCE_SLACK
    if found.distance > allowed and batch is not None:
        rows = batch(range(outputs[0], outputs[-1] + 1))
        found.batch_distance = max((rows[q] - theirs.rows[q]).abs().max().item() for q in outputs)
        allowed = DISTANCE_FACTOR * max(found.reference_distance, found.batch_distance) + DISTANCE_SLACK
    found.allowed = allowed
    if mine.logits.argmax().item() != b:
        found.reason = "(a) the method's token is not the argmax of its own verify logits"
    elif theirs.logits.argmax().item() != a:
        found.reason = "(b) ar's token is not the argmax of ar's logits"
    elif found.distance > allowed:
        found.reason = f"(c) the verify logits are {found.distance:.3g} from ar's, beyond rounding ({allowed:.3g})"
    else:
        found.kind, found.reason = NUMERICAL, "both sides chose their own argmax; logits within rounding"
    return found


def _replay(
    decoder: Decoder,
    prompt_ids: list[int],
    max_new_tokens: int,
    position: int,
    schedule: list[int] | None = None,
    around: range | None = None,
) -> tuple[LogitsProbe, list[int]]:
    """Generate again with a probe at `position` (and the output indices `around`) and the rounds' draft
    sizes: the probe and the tokens."""
    decoder.probe = probe = LogitsProbe(position, around)
    if schedule is not None:
        decoder.schedule = schedule
    try:
        tokens = decoder.generate(prompt_ids, max_new_tokens).tokens
    finally:
        decoder.probe = None
        if schedule is not None:
            decoder.schedule = None
    return probe, tokens


@torch.inference_mode()
def _plain_rows(
    target: TargetModel,
    sequence: list[int],
    index: int,
    probe: LogitsProbe,
    prefill: bool = False,
) -> tuple[torch.Tensor, int]:
    """The logits [n, V] of a plain forward of the probe's shape over `sequence` in which `sequence[index]`
    sits at row `probe.row` (clamped to the sequence), over a freshly prefilled cache of everything before
    it, and the index in `sequence` of its first row. The shape: `probe.width` tokens, in a ragged forward
    of `probe.batch_rows` x `probe.batch_width` over `probe.batch_span` key slots (the other rows padding)
    when the probe came from a batch.
    `prefill`: the probe's logits came from a prefill (output 0): the plain forward is the prompt's prefill,
    the last row's logits only, as a prefill computes them."""
    rows, ids = probe.batch_rows, torch.tensor(sequence, device=target.device)
    columns = probe.batch_width or probe.width or 1
    batched = probe.batch_width is not None
    if prefill:
        prompt = ids[: index + 1]
        if not batched:
            logits = target(prompt[None], cache=target.new_cache(), last_logits_only=True).logits[0, -1:]
            return logits.float().cpu(), index
        # A batched prefill computes its fresh rows only: the other rows (any ids, as wide as the
        # prefill) give the forward its rows and width.
        fillers = [torch.zeros(n, dtype=torch.long, device=target.device) for n in _fillers(probe, prompt.numel())]
        out = target.prefill_ragged([prompt, *fillers], target.new_ragged_cache(rows, columns + 1))
        return out.logits[0, -1:].float().cpu(), index
    width = probe.width or 1
    start = max(index - min(probe.row or 0, width - 1), 0)
    window = ids[start : start + width]
    if not batched and columns <= window.numel():
        cache = target.new_cache()
        if start:
            target(ids[None, :start], cache=cache, last_logits_only=True)
        logits = target(window[None], cache=cache).logits[0]
    else:
        span = max(probe.batch_span or 0, start + columns)
        cache = target.new_ragged_cache(rows, capacity=span + 1)
        if start:
            target.prefill_ragged([ids[:start]] + [None] * (rows - 1), cache)
        if rows > 1:  # a longer row gives the queries the batch's key span (its slots are never seen)
            cache.lengths[1] = span - columns
        filler_rows = _fillers(probe, window.numel())  # the window, clamped at the sequence's end, may be short
        others = [_Plain(torch.zeros(n, dtype=torch.long, device=target.device)) for n in filler_rows]
        others += [None] * (rows - 1 - len(others))
        batch = RaggedWindow.stack([_Plain(window), *others], 0, target.device, width=columns)
        logits = target.forward_ragged(batch, cache).logits[0, : window.numel()]
    return logits.float().cpu(), start


def _fillers(probe: LogitsProbe, own: int) -> list[int]:
    """The token counts of the other rows of a replayed batched forward, so that it runs as many real
    tokens as the probe's (`batch_tokens`; a forward packs them): each at most the probe's columns, the
    rows after them empty. Without a count, every other row as wide as the columns (a full batch)."""
    rows, columns = probe.batch_rows, probe.batch_width or own
    if probe.batch_tokens is None:
        return [columns] * (rows - 1)
    left, counts = max(probe.batch_tokens - own, 0), []
    for r in range(rows - 1, 0, -1):
        take = min(columns, max(left - (r - 1), 1)) if left else 0
        if take:
            counts.append(take)
        left -= take
    return counts


def batched_ar_rows(
    ar: Decoder,
    concurrency: int,
    prompts: list[list[int]],
    outputs: list[list[int]],
    index: int,
    around: range,
) -> dict[int, torch.Tensor]:
    """Output index -> the logits row [V] (float32, CPU) from which batched `ar` at `concurrency`, decoding
    `prompts` in order, chooses prompt `index`'s output token there, when every row commits its `outputs`
    (teacher forcing: `BatchedDecoder.follow`), at the output indices `around`."""
    probe = LogitsProbe(around.start, around)
    probes = [probe if i == index else None for i in range(len(prompts))]
    BatchedDecoder(ar, concurrency).follow(prompts, outputs, probes)  # type: ignore[arg-type]
    return probe.rows


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


def classify(divergence: dict[str, Any] | None, equal: bool, violations: int = 0) -> str:
    """`exact`, `numerical` or `algorithmic` for one generation (see the module docstring)."""
    if violations:
        return ALGORITHMIC
    if equal:
        return EXACT
    return NUMERICAL if divergence and divergence.get("kind") == NUMERICAL else ALGORITHMIC
