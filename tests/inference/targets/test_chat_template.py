"""The chat-template fingerprint: what renders differently is told apart, what renders alike is not."""

from inference.targets.chat_template import chat_template_mismatch, chat_template_record
from inference.targets.tiny import CHATML_TEMPLATE, tiny_tokenizer

THINKING = CHATML_TEMPLATE + "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"


def _tokenizer(template: str):
    tok = tiny_tokenizer()
    tok.chat_template = template
    return tok


def test_renderings_are_compared_not_arguments_the_template_ignores():
    chatml = chat_template_record(_tokenizer(CHATML_TEMPLATE), {})
    assert chat_template_mismatch(chat_template_record(_tokenizer(CHATML_TEMPLATE), {}), chatml) is None
    assert (
        chat_template_mismatch(chat_template_record(_tokenizer(CHATML_TEMPLATE), {"enable_thinking": False}), chatml)
        is None
    )
    off = chat_template_record(_tokenizer(THINKING), {"enable_thinking": False})
    on = chat_template_record(_tokenizer(THINKING), {})
    assert "enable_thinking" in chat_template_mismatch(off, on)
    assert chat_template_mismatch(on, chatml) is None  # another template that renders this chat alike


def test_records_without_a_rendering_fall_back_to_the_template_and_its_arguments():
    current = chat_template_record(_tokenizer(THINKING), {"enable_thinking": False})
    assert chat_template_mismatch({}, current) is None  # a record from before any of this was kept
    old = {k: v for k, v in current.items() if k != "chat_rendering_sha256"}
    assert chat_template_mismatch(old, current) is None
    assert chat_template_mismatch({**old, "chat_template_kwargs": {}}, current)
    assert chat_template_mismatch({"chat_template_sha256": "0" * 64}, current)
    refusing = _tokenizer("{{ raise_exception('no') }}")
    assert chat_template_record(refusing, {})["chat_rendering_sha256"] is None
