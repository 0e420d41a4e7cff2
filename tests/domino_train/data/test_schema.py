from collections import Counter

import pytest

from domino_train.data.schema import MalformedRow, content_hash, normalize


def test_sharegpt_and_openai_rows_normalise_to_one_schema():
    a = normalize({"id": 7, "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "r"}]}, "x")
    b = normalize({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}]}, "x")
    assert a == {"id": "7", "conversations": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}]}
    assert b["id"] == "x" and b["conversations"] == a["conversations"]
    assert content_hash(a) == content_hash(b)


def test_cleaning_rules():
    row = normalize(
        {
            "conversations": [
                {"from": "gpt", "value": "leading answer"},
                {"from": "human", "value": "one"},
                {"from": "human", "value": "two"},
                {"from": "gpt", "value": "   "},
                {"from": "gpt", "value": "ans"},
            ]
        },
        "x",
    )
    assert row["conversations"] == [{"role": "user", "content": "one\n\ntwo"}, {"role": "assistant", "content": "ans"}]


def test_instruction_pairs():
    row = normalize({"instruction": "do", "input": "", "output": "done"}, "x", ["instruction", "input"], "output")
    assert row["conversations"] == [{"role": "user", "content": "do"}, {"role": "assistant", "content": "done"}]


@pytest.mark.parametrize(
    "raw, reason",
    [
        ("text", "not_an_object"),
        ({"foo": 1}, "no_messages"),
        ({"conversations": [{"from": "robot", "value": "x"}]}, "unknown_role"),
        ({"conversations": [{"from": "human", "value": 3}]}, "bad_content"),
        ({"conversations": [{"from": "gpt", "value": "only an answer"}]}, "empty"),
        ({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]}, "late_system_message"),
        ({"conversations": ["not a message"]}, "bad_message"),
    ],
)
def test_malformed_rows_name_their_reason(raw, reason):
    with pytest.raises(MalformedRow) as e:
        normalize(raw, "x")
    assert e.value.reason == reason


def test_openai_content_parts_keep_their_text():
    parts = [{"type": "text", "text": "look"}, {"type": "text", "text": "closely"}]
    row = normalize({"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": "ok"}]}, "x")
    assert row["conversations"][0] == {"role": "user", "content": "look\nclosely"}
    image = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "x.png"}}]
    with pytest.raises(MalformedRow) as e:
        normalize({"messages": [{"role": "user", "content": image}]}, "x")
    assert e.value.reason == "non_text_content" and "image_url" in str(e.value)


def test_a_conversation_is_cut_before_its_first_tool_call():
    call = {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "w"}}]}
    messages = [
        {"role": "developer", "content": "use tools"},
        {"role": "user", "content": "weather in Paris?"},
        call,
        {"role": "tool", "tool_call_id": "1", "content": "18C"},
        {"role": "assistant", "content": "It is 18C."},
    ]
    cuts = Counter()
    row = normalize({"messages": messages}, "x", cuts=cuts)
    assert row["conversations"] == [
        {"role": "system", "content": "use tools"},
        {"role": "user", "content": "weather in Paris?"},
    ]
    assert cuts == {"tool_call": 1}
    with pytest.raises(MalformedRow) as e:  # nothing asked before the tool call: dropped, and the reason says why
        normalize({"messages": [messages[0], {"role": "tool", "content": "18C"}, messages[1]]}, "x")
    assert e.value.reason == "tool_call"
