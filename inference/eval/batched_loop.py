"""Decoding runs at concurrency above 1: a set's prompts decoded by `BatchedDecoder`, N sequences at a time.

All of a set's requests arrive at once (an offline throughput benchmark), in waves: a turn's prompts are cut
into waves of `interleave` x N prompts (one wave when `interleave` is 0), and within a wave every method in
turn decodes the wave's prompts in one continuous batch of N rows (a finished row takes the next waiting
prompt; the batch drains at the end). The methods take turns wave by wave so that the machine's speed, which
drifts by a third within minutes on a shared VM, weighs on every method alike; a method that ran the whole
set in one go compared its throughput with another method's at another time. Every other wave takes them in
reverse order (A B C, C B A, ...), so that a steady drift does not favour the first. A (method, turn, wave)
is the unit of work, of timing and of resuming: its wall time is stored with its records (`Record.batch`),
and throughput = output tokens / the summed wall time of a method's units.

Turns go in order and, within a turn, waves in order and then the methods as above. Multi-turn prompts carry
one reply per turn as history, the same for every method: the batch-1 run's first method's reply where the
run also decoded at concurrency 1 (so every arm of the run sees identical prompts), else this concurrency's
first method's. Generation i draws from the generator seeded as in the batch-1 loop (`inference.eval.loop`),
so at T > 0 every sequence samples what it samples alone. Greedy runs with `ar` then check each prompt's
outputs against its batch-1 `ar` output (`loop.check_divergences`; `inference.eval.datasets` decodes batch-1
`ar` for a greedy run). Each batched run is given those outputs, so that a row that parts from its reference
keeps the logits there (`BatchedDecoder`): the proof's evidence.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import partial

from inference.decoding.batched import BatchedDecoder
from inference.decoding.generation import Decoder, PromptTooLongError
from inference.eval.divergence import batched_ar_rows
from inference.eval.loop import check_divergences, generation_generator
from inference.eval.prompt_sets import BenchmarkPrompt
from inference.eval.recheck import PrecisionRecheck
from inference.eval.records import Record
from inference.targets.adapter import TargetModel

log = logging.getLogger(__name__)


def run_dataset_batched(
    dataset: str,
    prompts: list[BenchmarkPrompt],
    decoders: Mapping[str, Decoder],
    target: TargetModel,
    max_new_tokens: int,
    concurrency: int,
    seed: int = 0,
    max_turns: int | None = None,
    done: list[Record] | None = None,
    on_records: Callable[[list[Record]], None] | None = None,
    reference: list[Record] | None = None,
    noise_window: int | None = None,
    interleave: int = 0,
    recheck: PrecisionRecheck | None = None,
) -> list[Record]:
    """Every method over `prompts` at `concurrency`; one `Record` per method, prompt and turn.

    `interleave`: waves of `interleave` x `concurrency` prompts, the methods taking turns wave by wave (0:
    one wave; `domino-decode` checks it is >= 0). `done`: this set's records a resumed run holds at this
    concurrency (a unit whose prompts all have one is not rerun); `on_records` receives each newly finished
    unit's records. `reference`: this set's batch-1 records when the run has them (their first method's
    replies are the history, their `ar` the lossless reference). `noise_window`: check the outputs against
    `ar` (greedy runs), as the batch-1 loop does; `recheck`: a flag of clause (c) decoded again there."""
    held = {(r.method, r.turn, r.prompt_id): r for r in done or []}
    first_index, index = {}, 0
    for prompt in prompts:
        first_index[prompt.id] = index
        index += len(prompt.turns[:max_turns])
    first = next(iter(decoders))
    checking = bool(noise_window) and "ar" in decoders
    expected = {(r.prompt_id, r.turn): r for r in reference or [] if r.method == "ar" and not r.skipped}
    replies = {(r.prompt_id, r.turn): r.text for r in reference or [] if r.method == first and not r.skipped}
    messages: dict[str, list[dict[str, str]]] = {p.id: [] for p in prompts}
    turn_ids: dict[tuple[str, int], list[int]] = {}
    records: list[Record] = []
    for turn in range(max(len(p.turns[:max_turns]) for p in prompts)):
        live = [p for p in prompts if turn < len(p.turns[:max_turns]) and (turn == 0 or (p.id, turn - 1) in turn_ids)]
        for p in live:
            messages[p.id].append({"role": "user", "content": p.turns[turn]})
            turn_ids[(p.id, turn)] = target.chat_ids(messages[p.id])
        fresh: list[list[Record]] = []
        size = interleave * concurrency or len(live)
        for wave_index, start in enumerate(range(0, len(live), size)):
            wave = live[start : start + size]
            arms = list(decoders.items())
            for method, decoder in arms if wave_index % 2 == 0 else reversed(arms):
                unit = [held[(method, turn, p.id)] for p in wave if (method, turn, p.id) in held]
                todo = [p for p in wave if (method, turn, p.id) not in held]
                if todo:
                    decoded = _decode_unit(
                        dataset,
                        method,
                        decoder,
                        todo,
                        turn,
                        turn_ids,
                        first_index,
                        target,
                        max_new_tokens,
                        concurrency,
                        seed,
                        f"{method}/turn{turn}/wave{wave_index}",
                        _references(expected, todo, turn) if checking else None,
                    )
                    fresh.append(decoded)
                    unit += decoded
                records += unit
                if method == first:
                    replies = {(r.prompt_id, r.turn): r.text for r in unit if not r.skipped} | replies
        if checking and fresh:
            _check(
                [r for unit in fresh for r in unit], expected, turn_ids, decoders, max_new_tokens, noise_window, recheck
            )
        for unit in fresh:
            if on_records is not None:
                on_records(unit)
        for p in live:
            if (p.id, turn) not in replies:  # skipped: the prompt ends here
                turn_ids.pop((p.id, turn))
                continue
            messages[p.id].append({"role": "assistant", "content": replies[(p.id, turn)]})
    return records


def _decode_unit(
    dataset: str,
    method: str,
    decoder: Decoder,
    prompts: list[BenchmarkPrompt],
    turn: int,
    turn_ids: Mapping[tuple[str, int], list[int]],
    first_index: Mapping[str, int],
    target: TargetModel,
    max_new_tokens: int,
    concurrency: int,
    seed: int,
    unit_id: str,
    references: Mapping[str, list[int]] | None = None,
) -> list[Record]:
    """One method over `prompts`' turn `turn` in one batched run (`unit_id` names it in the records); a prompt
    too long for the context gets a skipped record, as in the batch-1 loop. `references`: prompt id -> its
    batch-1 `ar` output, which the run compares its rows with (each record's `probe`)."""
    records, fits = [], []
    for p in prompts:
        try:
            decoder.token_budget(len(turn_ids[(p.id, turn)]), max_new_tokens)
            fits.append(p)
        except PromptTooLongError as e:
            records.append(
                Record(dataset, method, p.id, turn, None, None, None, skip_reason=str(e), concurrency=concurrency)
            )
    if not fits:
        return records
    batched = BatchedDecoder(decoder, concurrency)
    generators = [generation_generator(target, seed, first_index[p.id] + turn) for p in fits]
    batched.prepare([turn_ids[(p.id, turn)] for p in fits])  # the verify curve is not the unit's wall time
    start = time.perf_counter()
    expected = [(references or {}).get(p.id) for p in fits]
    gens = batched.generate([turn_ids[(p.id, turn)] for p in fits], max_new_tokens, generators, expected)
    batch = {"id": unit_id, "wall_s": time.perf_counter() - start, "prefill_s": batched.prefill_s}
    for p, gen in zip(fits, gens, strict=True):
        text = target.tokenizer.decode(gen.tokens, skip_special_tokens=True)
        records.append(
            Record(
                dataset,
                method,
                p.id,
                turn,
                gen.tokens,
                gen.finish_reason,
                gen.stats,
                text,
                concurrency=concurrency,
                batch=batch,
                probe=gen.probe,
            )
        )
    tokens = sum(len(g.tokens) for g in gens)
    log.info(
        "%s | %s@%d %s: %d prompts, %d tokens in %.1f s (%.1f tok/s)",
        dataset,
        method,
        concurrency,
        unit_id.removeprefix(f"{method}/"),
        len(fits),
        tokens,
        batch["wall_s"],
        tokens / batch["wall_s"],
    )
    return records


def _references(
    expected: Mapping[tuple[str, int], Record], prompts: list[BenchmarkPrompt], turn: int
) -> dict[str, list[int]]:
    """Prompt id -> its batch-1 `ar` output at `turn`, for the prompts that have one."""
    return {p.id: expected[(p.id, turn)].tokens for p in prompts if (p.id, turn) in expected}


def _check(
    fresh: list[Record],
    expected: Mapping[tuple[str, int], Record],
    turn_ids: Mapping[tuple[str, int], list[int]],
    decoders: Mapping[str, Decoder],
    max_new_tokens: int,
    window: int,
    recheck: PrecisionRecheck | None = None,
) -> None:
    """The newly decoded records of one turn against their prompt's batch-1 `ar` (its noise measured there,
    once), each with the logits its batched run captured and, where a proof needs it, batched `ar`
    replayed along the references in the record's batch (`divergence.batched_ar_rows`); a flag of clause
    (c) decoded again by `recheck` in a batch of the same prompts (the record's unit, in order)."""
    for r in fresh:
        ar = expected.get((r.prompt_id, r.turn))
        if ar is None or r.skipped:
            continue
        ids = {r.turn: turn_ids[(r.prompt_id, r.turn)]}
        decoded = [u for u in fresh if u.batch and u.batch["id"] == r.batch["id"]]  # the batch's rows, in order
        unit = [u for u in decoded if (u.prompt_id, u.turn) in expected]
        prompts = [turn_ids[(u.prompt_id, u.turn)] for u in unit]
        outputs = [expected[(u.prompt_id, u.turn)].tokens for u in unit]
        index = unit.index(r)

        def batch(around: range, prompts=prompts, outputs=outputs, index=index, level=r.concurrency):
            return batched_ar_rows(decoders["ar"], level, prompts, outputs, index, around)

        again = None
        if recheck is not None:
            everyone = [turn_ids[(u.prompt_id, u.turn)] for u in decoded]
            again = partial(recheck, prompts=everyone, index=next(i for i, u in enumerate(decoded) if u is r))

        check_divergences([r], ids, decoders, max_new_tokens, window, reference=[ar], batch=batch, recheck=again)
