"""Run decoding methods over benchmark prompts the way the papers measure them.

One process, one target, every method on the same prompts: warm-up generations first, then, prompt by
prompt, every method in order (one progress bar per method, with its ETA), so each prompt's AR baseline
and its methods run side by side under the same machine load and a stopped run loses at most the prompt
in flight (`RecordLog`). Multi-turn prompts (mt-bench) carry the first method's replies as the
conversation history of later turns, so every method sees identical prompts even when sampling makes the
replies differ. Generation i of a dataset (its i-th prompt turn, counted over every turn of every prompt)
draws from a generator seeded with (seed, i), the same for every method and however the run was resumed.
A prompt that does not fit the target's context is reported, skipped and counted.

Greedy runs with `ar` also measure, prompt by prompt and outside the timed generations, what the
lossless check needs (`inference.eval.divergence`): the prompt's noise on `ar`'s record, and on every
record that differs from `ar`'s, where and by how large a logit gap it parts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import torch
from tqdm.auto import tqdm

from inference.decoding.batched import BatchedDecoder
from inference.decoding.generation import Decoder, PromptTooLongError
from inference.eval.divergence import measure_noise, prove_divergence
from inference.eval.prompt_sets import BenchmarkPrompt
from inference.eval.recheck import PrecisionRecheck, needs_recheck
from inference.eval.records import Record
from inference.targets.adapter import TargetModel

log = logging.getLogger(__name__)
WARMUP_PROMPT = "Write one sentence about the sea."


def warm_up(
    decoders: Mapping[str, Decoder], target: TargetModel, max_new_tokens: int = 16, levels: Sequence[int] = (1,)
) -> None:
    """A short generation per method and concurrency (a batch of copies of one prompt above 1), so that
    first-call costs (allocations, kernel selection) are not timed; then each decoder forgets what those
    rounds taught it (`Decoder.forget_rounds`), since their rates carry those costs."""
    ids = target.chat_ids([{"role": "user", "content": WARMUP_PROMPT}])
    for decoder in decoders.values():
        for level in levels:
            if level == 1:
                decoder.generate(ids, max_new_tokens, torch.Generator(target.device).manual_seed(0))
            else:
                BatchedDecoder(decoder, level).generate([ids] * level, max_new_tokens)
        decoder.forget_rounds()


def generation_generator(target: TargetModel, seed: int, index: int) -> torch.Generator:
    """The random stream of generation `index` of a dataset (its turns counted over every prompt)."""
    return torch.Generator(target.device).manual_seed(seed * 1_000_003 + index)


def run_prompt(
    dataset: str,
    prompt: BenchmarkPrompt,
    first_index: int,
    decoders: Mapping[str, Decoder],
    target: TargetModel,
    max_new_tokens: int,
    seed: int,
    max_turns: int | None,
    method_done: Callable[[int], None] | None = None,
    noise_window: int | None = None,
    recheck: PrecisionRecheck | None = None,
) -> list[Record]:
    """Every method (in order) over every turn of one prompt; generation `first_index + turn` seeds turn `turn`.

    `method_done(m)` is called when method number m has finished the prompt (the progress bars).
    `noise_window` (greedy runs with `ar`): measure the divergences and this prompt's noise over that many
    tokens (`check_divergences`), a flag of clause (c) rechecked by `recheck` when given."""
    records: list[Record] = []
    history: dict[int, str] = {}  # the first method's reply to each turn
    turn_ids: dict[int, list[int]] = {}  # every method sees the same prompt at a turn
    for m, (method, decoder) in enumerate(decoders.items()):
        messages: list[dict[str, str]] = []
        for turn, content in enumerate(prompt.turns[:max_turns]):
            messages.append({"role": "user", "content": content})
            ids = turn_ids.setdefault(turn, target.chat_ids(messages))
            generator = generation_generator(target, seed, first_index + turn)
            try:
                gen = decoder.generate(ids, max_new_tokens, generator)
            except PromptTooLongError as e:
                if m == 0:
                    log.warning("skipping %s/%s turn %d: %s", dataset, prompt.id, turn + 1, e)
                records.append(Record(dataset, method, prompt.id, turn, None, None, None, skip_reason=str(e)))
                break  # later turns only grow
            text = target.tokenizer.decode(gen.tokens, skip_special_tokens=True)
            records.append(Record(dataset, method, prompt.id, turn, gen.tokens, gen.finish_reason, gen.stats, text))
            history.setdefault(turn, text)
            messages.append({"role": "assistant", "content": history[turn]})
        if method_done is not None:
            method_done(m)
    if noise_window:
        again = None if recheck is None else lambda r: recheck(r, [turn_ids[r.turn]])
        check_divergences(records, turn_ids, decoders, max_new_tokens, noise_window, recheck=again)
    return records


def check_divergences(
    records: list[Record],
    turn_ids: Mapping[int, list[int]],
    decoders: Mapping[str, Decoder],
    max_new_tokens: int,
    window: int,
    reference: list[Record] | None = None,
    batch: Callable[[range], dict[int, torch.Tensor]] | None = None,
    recheck: Callable[[Record], None] | None = None,
) -> None:
    """Fill `noise` on each reference `ar` record (once) and, on each other record that differs from the
    reference's (same turn), its proven `divergence` (`inference.eval.divergence.prove_divergence`: a
    batch-1 record is replayed, a batched one brings the logits its run captured, `Record.probe`).
    `reference`: the `ar` records to compare with (default: those among `records`). `batch`: batched
    `ar`'s logits along the reference in the batch the (one, batched) record ran in (`prove_divergence`).
    `recheck`: called on each record flagged by clause (c) alone (`inference.eval.recheck`)."""
    if reference is None:
        reference = [r for r in records if r.method == "ar"]
    by_turn = {r.turn: r for r in reference if not r.skipped}
    ar = decoders["ar"]
    for turn, record in by_turn.items():
        if record.noise is None:
            record.noise = measure_noise(ar.target, turn_ids[turn], record.tokens, window)
    for r in records:
        ref = by_turn.get(r.turn)
        if r.skipped or ref is None or r is ref or r.tokens == ref.tokens:
            continue
        found = prove_divergence(
            decoders[r.method],
            ar,
            turn_ids[r.turn],
            ref.tokens,
            r.tokens,
            max_new_tokens,
            r.stats.draft_sizes,
            captured=r.probe,
            batched=r.concurrency != 1,
            batch=batch,
        )
        r.divergence = found.to_dict() if found else None
        if recheck is not None and needs_recheck(r):
            recheck(r)


def run_dataset(
    dataset: str,
    prompts: list[BenchmarkPrompt],
    decoders: Mapping[str, Decoder],
    target: TargetModel,
    max_new_tokens: int,
    seed: int = 0,
    progress: bool = True,
    max_turns: int | None = None,
    done: Mapping[str, list[Record]] | None = None,
    on_prompt: Callable[[list[Record]], None] | None = None,
    noise_window: int | None = None,
    recheck: PrecisionRecheck | None = None,
) -> list[Record]:
    """Every method over `prompts`; returns one `Record` per method, prompt and turn.

    `max_turns` keeps only the first turns of multi-turn prompts (1 = mt-bench's first turns only).
    `done` maps prompt ids to the records a resumed run already holds (those prompts are not rerun);
    `on_prompt` receives each newly finished prompt's records (the run's log appends them).
    `noise_window`, `recheck`: see `run_prompt`.
    """
    done = done or {}
    bars = [
        tqdm(
            total=len(prompts),
            initial=sum(p.id in done for p in prompts),
            desc=f"{dataset} | {method}",
            unit="prompt",
            disable=not progress,
            leave=True,
            position=i,
        )
        for i, method in enumerate(decoders)
    ]
    records: list[Record] = []
    first_index = 0
    for prompt in prompts:
        if prompt.id in done:
            records += done[prompt.id]
        else:
            new = run_prompt(
                dataset,
                prompt,
                first_index,
                decoders,
                target,
                max_new_tokens,
                seed,
                max_turns,
                lambda m: bars[m].update(),
                noise_window,
                recheck,
            )
            if on_prompt is not None:
                on_prompt(new)
            records += new
        first_index += len(prompt.turns[:max_turns])
    for bar in bars:
        bar.close()
    return records
