"""A drafter folder's training data, as serving reads it: a chat template other than the target's is
named in one line; none is named where the renderings agree or nothing was recorded."""

import json

import pytest

from inference.drafter.training_data import DATA_MANIFEST_NAME, chat_template_warning, training_renderings
from inference.eval.drafters import warn_on_other_chat_templates
from inference.targets.chat_template import chat_template_record
from inference.targets.tiny import CHATML_TEMPLATE, tiny_target

THINKING = CHATML_TEMPLATE + "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"


@pytest.fixture
def thinking_off():
    target = tiny_target("qwen3")
    target.tokenizer.chat_template = THINKING
    target.chat_template_kwargs = {"enable_thinking": False}
    return target


def _folder(tmp_path, name, manifest):
    folder = tmp_path / name
    folder.mkdir()
    (folder / DATA_MANIFEST_NAME).write_text(json.dumps(manifest))
    return folder


def test_a_drafter_trained_on_another_rendering_is_named(tmp_path, thinking_off, caplog):
    record = {"name": "t", **chat_template_record(thinking_off.tokenizer, thinking_off.chat_template_kwargs)}
    single = _folder(tmp_path, "single", {"target": record})
    several = _folder(tmp_path, "several", {"sets": [{"path": "a", "manifest": {"target": record}}]})
    assert [r for _, r in training_renderings(several)] == [record]
    for folder in (single, several):
        assert chat_template_warning(folder, thinking_off.tokenizer, {"enable_thinking": False}) is None
        line = chat_template_warning(folder, thinking_off.tokenizer, {})
        assert "\n" not in line and "{'enable_thinking': False}" in line and "chat_template_kwargs" in line
    thinking_off.chat_template_kwargs = {}
    warnings = warn_on_other_chat_templates({"domino": str(single), "dominotree": str(single)}, thinking_off)
    assert len(warnings) == 1 and warnings[0] in caplog.text


def test_nothing_is_named_without_a_record(tmp_path, thinking_off):
    assert chat_template_warning(tmp_path, thinking_off.tokenizer, {}) is None  # no manifest at all
    bare = _folder(tmp_path, "bare", {"sets": [{"path": "a", "manifest": {"counts": {}}}]})
    assert training_renderings(bare) == []
