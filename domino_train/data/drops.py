"""Why the data stages drop rows, and the fix each reason points to when a stage keeps no row at all.

A stage that keeps nothing would hand the next stage (or training) an empty set, which then fails far
from the cause; instead it ends with `nothing_kept`'s one line: the most frequent drop reason, an
example of it, where it happened, and the knob that fixes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from domino_train.data.schema import ROLE_ALIASES

SHOWN_PER_REASON = 5  # dropped rows named (where they are) per source and reason

_FILE_FORMAT = "the file must be UTF-8 JSON Lines (.jsonl, one object per line) or a JSON array (.json)"
FIXES = {  # `{source}` is the source's key under pipeline.source.sources
    # prepare
    "no_messages": "for instruction / response rows set pipeline.source.sources.{source}.prompt_fields "
    "(e.g. [instruction,input]) and pipeline.source.sources.{source}.response_field (e.g. output)",
    "bad_fields": "pipeline.source.sources.{source}.prompt_fields / response_field must name string columns",
    "unknown_role": f"message roles must be one of {', '.join(sorted(ROLE_ALIASES))}",
    "bad_message": "each message must be an object with role / content (or from / value)",
    "bad_content": "a message's content must be a string or a list of text parts",
    "non_text_content": "only text is trained on: remove the rows' non-text parts (images, audio)",
    "not_an_object": "each record must be a JSON object",
    "empty": "each conversation needs a user message",
    "tool_call": "the conversations open with a tool call, so no user turn precedes it",
    "late_system_message": "a system message may only open a conversation",
    "malformed_json": _FILE_FORMAT,
    "not_utf8": _FILE_FORMAT,
    "truncated": _FILE_FORMAT,
    "too_long": "raise prepare.max_chars",
    "duplicate": "every row repeats an earlier one",
    "skipped": "pipeline.source.sources.{source}.skip leaves out every row: lower it",
    # regenerate
    "prompt_too_long": "raise regenerate.max_context (up to the target's context) or lower regenerate.max_new_tokens",
    "backend_error": "check that the backend (pipeline.backend) answers",
    "empty_response": "the target answered nothing: check its chat template and regenerate's sampling",
    # tokenize
    "no_assistant_tokens": "raise tokenize.max_length, and check the rows hold answers "
    "(tokenize.input=prepared trains on the source's own)",
    "template_rewrote_content": "the chat template changes the answers' text (see target.chat_template_kwargs)",
    "no_end_of_turn": "set tokenize.end_of_turn to the text that closes an assistant turn in this template",
}


@dataclass
class Drops:
    """A stage's (or one source's) dropped rows: counts per reason, the first detail of each, and where
    the first rows are."""

    counts: Counter = field(default_factory=Counter)
    detail: dict[str, str] = field(default_factory=dict)
    where: dict[str, list[str]] = field(default_factory=dict)

    def add(self, reason: str, at: str | None = None, why: str = "") -> None:
        self.counts[reason] += 1
        self.detail.setdefault(reason, why)
        if at is not None and len(self.where.setdefault(reason, [])) < SHOWN_PER_REASON:
            self.where[reason].append(at)


def nothing_kept(what: str, drops: Drops, source: str = "<name>") -> ValueError:
    """The error a stage raises when it kept no row: `what` (e.g. "tokenize") names the stage; the most
    frequent reason of `drops` is named with its first example and its fix."""
    if not drops.counts:
        return ValueError(f"{what} kept no row: its input holds none (check the source's files, split, limit)")
    reason, count = drops.counts.most_common(1)[0]
    first = (drops.where.get(reason) or [None])[0]
    parts = [p for p in (drops.detail.get(reason), first and f"first at {first}") if p]
    example = f" ({'; '.join(parts)})" if parts else ""
    fix = FIXES.get(reason, "see the stage's summary for the counts").format(source=source)
    return ValueError(f"{what} kept no row of {drops.counts.total()}: {count} dropped as {reason}{example}; {fix}")


def counted_drops(counts: Mapping[str, int]) -> Drops:
    """The drops of a stage that counts them as `dropped_<reason>` among its other counters."""
    return Drops(Counter({k.removeprefix("dropped_"): v for k, v in counts.items() if k.startswith("dropped_") and v}))
