"""The one conversation schema every stage reads and writes, and the normaliser that produces it.

`{"id": str, "conversations": [{"role": "system" | "user" | "assistant", "content": str}, ...]}`

Sources disagree (ShareGPT's `from`/`value` with `human`/`gpt`, OpenAI-style `role`/`content`,
instruction/response pairs); `normalize` maps them all to this schema by fixed rules:
- OpenAI content-part lists keep their text parts, joined by a newline (a non-text part, such as an
  image, drops the row: `non_text_content`);
- a conversation is cut before its first tool call (an assistant message with `tool_calls` /
  `function_call`, or a `tool` / `function` / `ipython` message): the answers after it depend on tool
  results the target would not see when regenerating (counted in `cuts` as `tool_call`; a row left
  without a user message is dropped as `tool_call`);
- messages whose content is empty or whitespace are removed; consecutive messages of the same role are
  merged with a blank line; leading assistant messages are removed; a system message may only open the
  conversation;
- a row that is not a mapping, lacks a message list, or holds a message with an unknown role or a
  non-string content raises `MalformedRow` (counted and skipped by the caller).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

ROLE_ALIASES = {
    "user": "user",
    "human": "user",
    "prompter": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",  # OpenAI's newer name for the system message
}
TOOL_ROLES = ("tool", "function", "ipython")  # messages carrying a tool's result


class MalformedRow(ValueError):
    """A source row that cannot be normalised; `reason` is a short stable key for the summary counts."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def _messages_of(raw: dict[str, Any], prompt_fields: list[str] | None, response_field: str | None) -> list[Any]:
    if prompt_fields:
        parts = [raw.get(f) for f in prompt_fields]
        if any(p is not None and not isinstance(p, str) for p in parts) or not isinstance(raw.get(response_field), str):
            raise MalformedRow("bad_fields", f"{prompt_fields} -> {response_field}")
        prompt = "\n\n".join(p for p in parts if p and p.strip())
        return [{"role": "user", "content": prompt}, {"role": "assistant", "content": raw[response_field]}]
    for key in ("conversations", "messages", "conversation"):
        if isinstance(raw.get(key), list):
            return raw[key]
    keys = ", ".join(map(str, raw)) or "none"
    raise MalformedRow("no_messages", f"no 'conversations' / 'messages' list; keys: {keys}")


def _is_tool_call(message: dict[str, Any], role: Any) -> bool:
    return (isinstance(role, str) and role.lower() in TOOL_ROLES) or bool(
        message.get("tool_calls") or message.get("function_call")
    )


def _text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of an OpenAI content-part list."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise MalformedRow("bad_content", type(content).__name__)
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        if kind != "text" or not isinstance(part.get("text"), str):
            raise MalformedRow("non_text_content", f"a {kind!r} content part")
        texts.append(part["text"])
    return "\n".join(texts)


def normalize(
    raw: Any,
    default_id: str,
    prompt_fields: list[str] | None = None,
    response_field: str | None = None,
    cuts: Counter | None = None,
) -> dict[str, Any]:
    """One source row -> the schema (see module docstring); `cuts` counts the conversations cut short.

    Raises `MalformedRow`."""
    if not isinstance(raw, dict):
        raise MalformedRow("not_an_object", type(raw).__name__)
    messages: list[dict[str, str]] = []
    cut = False
    for m in _messages_of(raw, prompt_fields, response_field):
        if not isinstance(m, dict):
            raise MalformedRow("bad_message", type(m).__name__)
        role = m.get("role", m.get("from"))
        if _is_tool_call(m, role):
            cut = True
            break
        if not isinstance(role, str) or role.lower() not in ROLE_ALIASES:
            raise MalformedRow("unknown_role", repr(role))
        content = _text_of(m.get("content", m.get("value")))
        if not content.strip():
            continue
        role = ROLE_ALIASES[role.lower()]
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += "\n\n" + content
        else:
            messages.append({"role": role, "content": content})
    if any(m["role"] == "system" for m in messages[1:]):
        raise MalformedRow("late_system_message")
    system = messages[:1] if messages and messages[0]["role"] == "system" else []
    rest = messages[len(system) :]
    while rest and rest[0]["role"] == "assistant":
        rest = rest[1:]
    if not any(m["role"] == "user" for m in rest):
        if cut:
            raise MalformedRow("tool_call", "no user message before the first tool call")
        raise MalformedRow("empty", "no user message")
    if cut and cuts is not None:
        cuts["tool_call"] += 1
    row_id = raw.get("id", default_id)
    return {"id": str(row_id), "conversations": system + rest}


def user_turns(row: dict[str, Any]) -> int:
    return sum(m["role"] == "user" for m in row["conversations"])


def content_hash(row: dict[str, Any]) -> str:
    """Identity for de-duplication: the roles and contents, not the id."""
    payload = json.dumps([(m["role"], m["content"]) for m in row["conversations"]], ensure_ascii=False)
    return hashlib.sha1(payload.encode()).hexdigest()
