"""Chat template -> `input_ids` and `loss_mask` (1 exactly on the tokens the target generates).

The conversation is rendered by the target's own chat template (with its `chat_template_kwargs`, e.g.
Qwen3's `enable_thinking=False`), so the drafter trains on exactly the text it will see when serving.
Each assistant turn is trained after the prompt it was generated from: the template's rendering of the
conversation before it with the generation prompt (`add_generation_prompt=True`). Its loss span starts
at the first occurrence of its content after that prompt (never inside the prompt, so an answer that
also occurs in the template's header, "assistant" say, does not put the header in the loss) and runs to
the end of the end-of-turn marker that follows it (`<|im_end|>` for ChatML templates: the model
generates it too). Everything the template adds around a response is masked out, including the empty
`<think>\\n\\n</think>\\n\\n` block Qwen3 places before an answer: with thinking off that block is part of
the prompt at serving time, never generated.

Templates that render earlier turns unlike the prompt they were generated from (Qwen3 drops the think
block of every turn but the last) cannot hold every turn in one text: the conversation is then cut into
several rows, each the rendering up to a turn, holding the turns whose prompts it starts with. Where the
whole rendering starts with every turn's prompt (ChatML, Llama 3, ...) it is one row. A token is masked
in when its first character lies inside a span.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from domino_train.data.schema import MalformedRow

Render = Callable[[list[dict[str, str]], bool], str]  # (messages, add_generation_prompt) -> the template's text


def assistant_pieces(render: Render, messages: list[dict[str, str]]) -> list[tuple[str, list[tuple[int, str]]]]:
    """The texts a conversation is trained on, each with its assistant turns as (where that turn's
    prompt ends in the text, content): one text where the template allows, else one per run of turns
    whose prompts the rendering up to the last of them starts with."""
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    prompts = {i: render(messages[:i], True) if i else "" for i in turns}
    full = render(messages[: turns[-1] + 1], False) if turns else ""
    groups: list[tuple[str, list[int]]] = [(full, turns)]
    if not all(full.startswith(prompts[i]) for i in turns):
        groups = []
        for i in turns:
            text = render(messages[: i + 1], False)
            if groups and all(text.startswith(prompts[j]) for j in [*groups[-1][1], i]):
                groups[-1] = (text, [*groups[-1][1], i])
            else:
                groups.append((text, [i]))
    return [
        (text, [(len(os.path.commonprefix([text, prompts[i]])), messages[i]["content"]) for i in group])
        for text, group in groups
    ]


def assistant_spans(text: str, turns: list[tuple[int, str]], end_of_turn: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of each assistant response (content + end-of-turn marker) in `text`;
    `turns` holds (where the turn's prompt ends, content)."""
    spans = []
    for prompt_end, content in turns:
        start = text.find(content, prompt_end)
        if start < 0:  # templates may strip surrounding whitespace
            content = content.strip()
            start = text.find(content, prompt_end)
        if start < 0:
            raise MalformedRow("template_rewrote_content", "an assistant message not found in the rendered chat")
        marker = text.find(end_of_turn, start + len(content))
        if marker < 0:
            raise MalformedRow("no_end_of_turn", f"no {end_of_turn!r} after an assistant message")
        spans.append((start, marker + len(end_of_turn)))
    return spans


def tokenize_conversation(
    tokenizer: Any,
    messages: list[dict[str, str]],
    max_length: int,
    chat_template_kwargs: dict[str, Any] | None = None,
    end_of_turn: str | None = None,
) -> list[tuple[list[int], list[int]]]:
    """Render, tokenize and mask one conversation: (input_ids, loss_mask) per row it is trained as (see
    the module docstring), each truncated to `max_length` tokens; rows left without an assistant token
    are left out.

    Raises `MalformedRow` when the template hides an answer or no assistant token survives truncation.
    """

    def render(prefix: list[dict[str, str]], add_generation_prompt: bool) -> str:
        return tokenizer.apply_chat_template(
            prefix, tokenize=False, add_generation_prompt=add_generation_prompt, **(chat_template_kwargs or {})
        )

    rows = []
    for text, turns in assistant_pieces(render, messages):
        spans = assistant_spans(text, turns, end_of_turn or tokenizer.eos_token)
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
        ids, offsets = enc["input_ids"][:max_length], enc["offset_mapping"][:max_length]
        mask, s = [], 0
        for begin, _ in offsets:
            while s < len(spans) and begin >= spans[s][1]:
                s += 1
            mask.append(int(s < len(spans) and spans[s][0] <= begin < spans[s][1]))
        if any(mask):
            rows.append((ids, mask))
    if not rows:
        raise MalformedRow("no_assistant_tokens", f"no assistant token within max_length={max_length}")
    return rows
