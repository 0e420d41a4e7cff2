"""One rendering of a prompt from data to decoding: the prompts the target regenerates answers to, the
prompts inside training rows and the prompts domino-decode serves are the same tokens, template arguments
included; a backend that renders otherwise stops the regenerate stage."""

from pathlib import Path

import pytest

from domino_train.data.backends import LocalBackend, Request
from domino_train.data.loss_mask import tokenize_conversation
from domino_train.data.prepare import prepare
from domino_train.data.regenerate import regenerate
from domino_train.data.shards import list_shards
from domino_train.data.sources import LocalFiles
from inference.decoding.api import prompt_ids
from inference.decoding.sampling import SamplingParams
from inference.targets.tiny import tiny_target

QWEN3_TEMPLATE = (Path(__file__).parent / "fixtures" / "qwen3_chat_template.jinja").read_text()


def _qwen3_rendering(enable_thinking: bool):
    """A tiny target rendering chats with Qwen3's template (its byte tokenizer spells <think> out)."""
    target = tiny_target("qwen3")
    target.tokenizer.chat_template = QWEN3_TEMPLATE
    target.chat_template_kwargs = {"enable_thinking": enable_thinking}
    return target


@pytest.mark.parametrize("template", ["chatml", "qwen3 thinking off"])
def test_regeneration_training_rows_and_decoding_render_a_prompt_alike(template):
    target = tiny_target("qwen3") if template == "chatml" else _qwen3_rendering(False)
    messages = [{"role": "user", "content": "name a color"}]
    served = prompt_ids(target, messages)  # what domino-decode feeds the target
    assert ("<think>" in target.tokenizer.decode(served)) == (template != "chatml")
    request = Request(messages=messages, seed=0)
    [response] = LocalBackend(target, SamplingParams(), max_new_tokens=3).generate([request])
    assert request.prompt_ids == served and response.prompt_tokens == len(served)
    answer = {"role": "assistant", "content": "blue"}
    [(ids, mask)] = tokenize_conversation(target.tokenizer, [*messages, answer], 256, target.chat_template_kwargs)
    first = mask.index(1)
    assert ids[:first] == served  # the drafter trains on the text that follows exactly this prompt
    assert target.tokenizer.decode(ids[first : first + 4]) == "blue"


def test_a_backend_that_renders_prompts_otherwise_stops_before_writing(tmp_path, tiny_corpus):
    prepare({"t": LocalFiles(name="t", paths=[str(tiny_corpus)])}, tmp_path / "prepared")
    local, server = _qwen3_rendering(False), _qwen3_rendering(True)
    backend = LocalBackend(server, SamplingParams(), max_new_tokens=3)  # the server thinks
    backend.prompt_tokens = lambda messages: len(local.chat_ids(messages))  # the target here does not
    with pytest.raises(ValueError, match="another length than the target's chat template"):
        regenerate(backend, tmp_path / "prepared", tmp_path / "r", {"t": 1}, 3, shard_size=4)
    assert not list_shards(tmp_path / "r")
    summary = regenerate(
        backend, tmp_path / "prepared", tmp_path / "r", {"t": 1}, 3, shard_size=4, check_template=False
    )
    assert summary["prompts_rendered_otherwise"] == summary["turns"] > 0
    agreeing = LocalBackend(local, SamplingParams(), max_new_tokens=3)
    summary = regenerate(agreeing, tmp_path / "prepared", tmp_path / "ok", {"t": 1}, 3, shard_size=4)
    assert "prompts_rendered_otherwise" not in summary and summary["turns"] > 0
