"""Which chat template a target renders conversations with: the fingerprint that training data, drafter
exports and decoding runs record and compare.

A drafter learns the text it was trained on, template tokens included. Trained on conversations
rendered one way (say Qwen3 with thinking on) and served on prompts rendered another (thinking off), it
drafts for text the target never writes, and acceptance drops with no error anywhere. So the template's
hash, its keyword arguments and the hash of one fixed conversation rendered with both travel with the
data, and a decoding run compares them with its target's.
"""

from __future__ import annotations

import hashlib
from typing import Any

PROBE = [
    {"role": "user", "content": "Name a prime number."},
    {"role": "assistant", "content": "Seven."},
    {"role": "user", "content": "And another?"},
]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _rendering(tokenizer: Any, kwargs: dict[str, Any]) -> str | None:
    """The probe conversation as the template renders it for generation; None if it cannot."""
    try:
        return tokenizer.apply_chat_template(PROBE, tokenize=False, add_generation_prompt=True, **kwargs)
    except Exception:  # a template may refuse any conversation shape; the hashes still compare
        return None


def chat_template_record(tokenizer: Any, chat_template_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """The template's hash, the keyword arguments every rendering passes it, and the hash of a fixed
    conversation rendered with both (None where there is no template or it cannot render that)."""
    template = getattr(tokenizer, "chat_template", None)
    template = template if isinstance(template, str) else ""
    kwargs = dict(chat_template_kwargs or {})
    rendered = _rendering(tokenizer, kwargs) if template else None
    return {
        "chat_template_sha256": _sha256(template) if template else None,
        "chat_template_kwargs": kwargs,
        "chat_rendering_sha256": _sha256(rendered) if rendered is not None else None,
    }


def _described(record: dict[str, Any]) -> str:
    digest = record.get("chat_template_sha256")
    kwargs = record.get("chat_template_kwargs")
    return f"template {digest[:8] if digest else 'none'}" + (f" with {kwargs}" if kwargs else "")


def chat_template_mismatch(recorded: dict[str, Any], current: dict[str, Any]) -> str | None:
    """How a recorded rendering (`chat_template_record`) differs from the current one, or None.

    Where both sides rendered the probe, the renderings decide (arguments the template ignores do not
    matter); otherwise the template's hash and its arguments do. A field the record lacks (data written
    before it was recorded) is not compared."""
    if recorded.get("chat_rendering_sha256") and current.get("chat_rendering_sha256"):
        differs = recorded["chat_rendering_sha256"] != current["chat_rendering_sha256"]
    else:
        keys = ("chat_template_sha256", "chat_template_kwargs")
        differs = any(key in recorded and (recorded[key] or {}) != (current[key] or {}) for key in keys)
    return f"{_described(recorded)}, not {_described(current)}" if differs else None
