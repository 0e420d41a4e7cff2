"""Chat template -> `input_ids` and `loss_mask` (1 exactly on the tokens the target generates).

The conversation is rendered by the target's own chat template (with its `chat_template_kwargs`, e.g.
Qwen3's `enable_thinking=False`), so the drafter trains on exactly the text it will see when serving.
The loss mask comes from character spans, not from hard-coded separators: each assistant message's
content is located in the rendered text (in message order), and its span runs to the end of the
end-of-turn marker that follows it (`<|im_end|>` for ChatML templates: the model generates it too).
Everything the template adds around a response is masked out, including the empty
`<think>\\n\\n</think>\\n\\n` block Qwen3 places before the final assistant turn: with thinking off
that block is part of the prompt at serving time, never generated. A token is masked in when its first
character lies inside a span.
"""

from __future__ import annotations

from typing import Any

from domino_train.data.schema import MalformedRow


def assistant_spans(text: str, messages: list[dict[str, str]], end_of_turn: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of each assistant response (content + end-of-turn marker) in `text`."""
    spans, cursor = [], 0
    for m in messages:
        if m["role"] == "system":  # templates may rewrite or drop it; never part of a span
            continue
        content = m["content"]
        start = text.find(content, cursor)
        if start < 0:  # templates may strip surrounding whitespace
            content = content.strip()
            start = text.find(content, cursor)
        if start < 0:
            raise MalformedRow("template_rewrote_content", f"{m['role']} message not found in the rendered chat")
        end = start + len(content)
        if m["role"] == "assistant":
            marker = text.find(end_of_turn, end)
            if marker < 0:
                raise MalformedRow("no_end_of_turn", f"no {end_of_turn!r} after an assistant message")
            end = marker + len(end_of_turn)
            spans.append((start, end))
        cursor = end
    return spans


def tokenize_conversation(
    tokenizer: Any,
    messages: list[dict[str, str]],
    max_length: int,
    chat_template_kwargs: dict[str, Any] | None = None,
    end_of_turn: str | None = None,
) -> tuple[list[int], list[int]]:
    """Render, tokenize and mask one conversation, truncated to `max_length` tokens.

    Raises `MalformedRow` when the template hides a message or no assistant token survives truncation.
    """
    text = tokenizer.apply_chat_template(messages, tokenize=False, **(chat_template_kwargs or {}))
    spans = assistant_spans(text, messages, end_of_turn or tokenizer.eos_token)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
    ids, offsets = enc["input_ids"][:max_length], enc["offset_mapping"][:max_length]
    mask, s = [], 0
    for begin, _ in offsets:
        while s < len(spans) and begin >= spans[s][1]:
            s += 1
        mask.append(int(s < len(spans) and spans[s][0] <= begin < spans[s][1]))
    if not any(mask):
        raise MalformedRow("no_assistant_tokens", f"no assistant token within max_length={max_length}")
    return ids, mask
