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
