"""Run decoding methods over benchmark prompts the way the papers measure them.

One process, one target, every method on the same prompts: warm-up generations first, then each
method over each dataset (one progress bar per pair). Multi-turn prompts (mt-bench) carry the first
method's replies as the conversation history of later turns, so every method sees identical prompts
even when sampling makes the replies differ. Generation i of a dataset draws from a generator seeded
with (seed, i), the same for every method. A prompt that does not fit the target's context is
reported, skipped and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from inference.decoding.generation import Decoder, PromptTooLongError
from inference.decoding.stats import GenerationStats
from inference.eval.prompt_sets import BenchmarkPrompt
from inference.targets.adapter import TargetModel

log = logging.getLogger(__name__)
WARMUP_PROMPT = "Write one sentence about the sea."


@dataclass
class Record:
    """One generation (one turn of one prompt) of one method, or a skipped one (`tokens` None)."""

    dataset: str
    method: str
    prompt_id: str
    turn: int
    tokens: list[int] | None
    finish_reason: str | None
    stats: GenerationStats | None
    text: str | None = None
    skip_reason: str | None = None

    @property
    def skipped(self) -> bool:
        return self.tokens is None


def warm_up(decoders: Mapping[str, Decoder], target: TargetModel, max_new_tokens: int = 16) -> None:
    """A short generation per method, so that first-call costs (allocations, kernel selection) are not timed."""
    ids = target.chat_ids([{"role": "user", "content": WARMUP_PROMPT}])
    for decoder in decoders.values():
        decoder.generate(ids, max_new_tokens, torch.Generator(target.device).manual_seed(0))


def run_dataset(
    dataset: str,
    prompts: list[BenchmarkPrompt],
    decoders: Mapping[str, Decoder],
    target: TargetModel,
    max_new_tokens: int,
    seed: int = 0,
    progress: bool = True,
    max_turns: int | None = None,
) -> list[Record]:
    """Every method (in order) over `prompts`; returns one `Record` per method, prompt and turn.

    `max_turns` keeps only the first turns of multi-turn prompts (1 = mt-bench's first turns only).
    """
    records: list[Record] = []
    history: dict[tuple[str, int], str] = {}  # the first method's reply to each turn
    for m, (method, decoder) in enumerate(decoders.items()):
        bar = tqdm(prompts, desc=f"{dataset} | {method}", unit="prompt", disable=not progress, leave=True)
        index = 0
        for prompt in bar:
            messages: list[dict[str, str]] = []
            for turn, content in enumerate(prompt.turns[:max_turns]):
                messages.append({"role": "user", "content": content})
                ids = target.chat_ids(messages)
                generator = torch.Generator(target.device).manual_seed(seed * 1_000_003 + index)
                index += 1
                try:
                    gen = decoder.generate(ids, max_new_tokens, generator)
                except PromptTooLongError as e:
                    if m == 0:
                        log.warning("skipping %s/%s turn %d: %s", dataset, prompt.id, turn + 1, e)
                    records.append(Record(dataset, method, prompt.id, turn, None, None, None, skip_reason=str(e)))
                    break  # later turns only grow
                text = target.tokenizer.decode(gen.tokens, skip_special_tokens=True)
                records.append(Record(dataset, method, prompt.id, turn, gen.tokens, gen.finish_reason, gen.stats, text))
                if m == 0:
                    history[(prompt.id, turn)] = text
                messages.append({"role": "assistant", "content": history.get((prompt.id, turn), text)})
    return records
