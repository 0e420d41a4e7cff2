"""Golden loss masks: 1 exactly on what the target generates (response + end-of-turn), for the templates
users train on."""

import pytest

from domino_train.data.loss_mask import tokenize_conversation
from domino_train.data.schema import MalformedRow

CHAT = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital is Paris."},
    {"role": "user", "content": "And of Spain?"},
    {"role": "assistant", "content": "Madrid."},
]


def masked_runs(tokenizer, ids, mask):
    runs, cur = [], []
    for i, m in zip(ids, mask, strict=True):
        if m:
            cur.append(i)
        elif cur:
            runs.append(tokenizer.decode(cur))
            cur = []
    return runs + ([tokenizer.decode(cur)] if cur else [])


def test_qwen3_thinking_off_golden(qwen3_tokenizer):
    tok = qwen3_tokenizer
    rows = tokenize_conversation(tok, CHAT, 4096, {"enable_thinking": False})
    # Qwen3's template renders earlier assistant turns bare, but each answer was generated after a prompt
    # ending in an empty think block: every turn is trained after its own prompt, so two rows.
    assert [tok.decode(ids) for ids, _ in rows] == [
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\nThe capital is Paris.<|im_end|>\n",
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\nThe capital is Paris.<|im_end|>\n"
        "<|im_start|>user\nAnd of Spain?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\nMadrid.<|im_end|>\n",
    ]
    assert [masked_runs(tok, ids, mask) for ids, mask in rows] == [
        ["The capital is Paris.<|im_end|>"],
        ["Madrid.<|im_end|>"],
    ]
    think = tok.convert_tokens_to_ids(["<think>", "</think>"])
    for ids, mask in rows:
        assert all(m == 0 for i, m in zip(ids, mask, strict=True) if i in think)  # the think block is prompt
    prompts = [
        tok.apply_chat_template(CHAT[:k], add_generation_prompt=True, tokenize=False, enable_thinking=False)
        for k in (1, 3)
    ]
    assert all(tok.decode(ids).startswith(p) for (ids, _), p in zip(rows, prompts, strict=True))  # as generated
    assert rows[0][0][:3] == [151644, 872, 198]  # <|im_start|> user \n in the real Qwen vocabulary


@pytest.mark.slow
def test_smollm2_golden():
    from inference import load_target

    tok = load_target("smollm2", device="meta").tokenizer
    [(ids, mask)] = tokenize_conversation(tok, CHAT, 4096)
    text = tok.decode(ids)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")  # injected
    assert masked_runs(tok, ids, mask) == ["The capital is Paris.<|im_end|>", "Madrid.<|im_end|>"]


def test_every_assistant_token_in_every_other_token_out(qwen_target):
    tok = qwen_target.tokenizer  # byte level: one token per byte, so spans are easy to check exactly
    chat = [{"role": "system", "content": "sys prompt"}, *CHAT]
    [(ids, mask)] = tokenize_conversation(tok, chat, 4096)  # ChatML: one row holds every turn
    text = tok.decode(ids)
    spans = [
        (text.find(m["content"]), text.find(m["content"]) + len(m["content"]) + len("<|im_end|>"))
        for m in chat
        if m["role"] == "assistant"
    ]
    offsets = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert mask == [int(any(a <= start < b for a, b in spans)) for start, _ in offsets]
    assert sum(mask) == len((CHAT[1]["content"] + CHAT[3]["content"]).encode()) + 2


def test_truncation_and_unmaskable_rows(qwen_target):
    tok = qwen_target.tokenizer
    [(ids, mask)] = tokenize_conversation(tok, CHAT, 60)
    assert len(ids) == len(mask) == 60 and sum(mask) > 0
    with pytest.raises(MalformedRow) as e:
        tokenize_conversation(tok, CHAT, 20)  # the cut falls before the first answer
    assert e.value.reason == "no_assistant_tokens"
    rewriting = tok.chat_template.replace("message['content']", "message['content'] | upper")
    with pytest.raises(MalformedRow) as e:
        tokenize_conversation(tok, CHAT, 4096, {"chat_template": rewriting})
    assert e.value.reason == "template_rewrote_content"


def test_an_answer_that_also_occurs_in_the_header_masks_the_answer_only(qwen_target):
    tok = qwen_target.tokenizer
    chat = [{"role": "user", "content": "Say the word assistant."}, {"role": "assistant", "content": "assistant"}]
    [(ids, mask)] = tokenize_conversation(tok, chat, 4096)
    assert tok.decode(ids).endswith("<|im_start|>assistant\nassistant<|im_end|>\n")
    assert masked_runs(tok, ids, mask) == ["assistant<|im_end|>"]  # not the header's "assistant\n..."
