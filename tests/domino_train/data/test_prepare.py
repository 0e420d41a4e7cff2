import json

import pytest

from domino_train.data.prepare import prepare
from domino_train.data.shards import list_shards, read_shards
from domino_train.data.sources import LocalFiles, ShareGPTPackage


def test_prepare_counts_every_drop_and_shards_the_rest(tmp_path, tiny_corpus):
    extra = tmp_path / "extra.jsonl"
    rows = [
        {"id": "dup", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
        {"id": "long", "conversations": [{"from": "human", "value": "x" * 500}]},
        {"id": "bad", "conversations": [{"from": "alien", "value": "x"}]},
    ]
    extra.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    sources = {
        "tiny": LocalFiles(name="tiny", paths=[str(tiny_corpus)]),
        "extra": LocalFiles(name="extra", paths=[str(extra)]),
    }
    summary = prepare(sources, tmp_path / "out", max_chars=300, max_user_turns=1, shard_size=4)
    assert summary["sources"]["tiny"] == {"kept": 6, "dropped": {}}
    assert summary["sources"]["extra"]["dropped"] == {
        "duplicate": 1,
        "too_long": 1,
        "unknown_role": 1,
        "malformed_json": 1,
    }
    assert [len(list(open(p))) for p in list_shards(tmp_path / "out")] == [4, 2]
    out = list(read_shards(tmp_path / "out"))
    assert [r["id"] for r in out] == ["tiny/a", "tiny/b", "tiny/c", "tiny/d", "tiny/e", "tiny/f"]
    assert out[1]["conversations"] == [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary


def test_limit_per_source(tmp_path, tiny_corpus):
    summary = prepare({"t": LocalFiles(name="t", paths=[str(tiny_corpus)], limit=2)}, tmp_path / "o")
    assert summary["kept"] == 2


def test_skip_and_limit_carve_disjoint_slices(tmp_path, tiny_corpus):
    def ids(**kw):
        prepare({"t": LocalFiles(name="t", paths=[str(tiny_corpus)], **kw)}, tmp_path / "o")
        return [r["id"] for r in read_shards(tmp_path / "o")]

    everything = ids()
    head, tail = ids(limit=2), ids(skip=2)
    assert head + tail == everything and not set(head) & set(tail)
    summary = prepare({"t": LocalFiles(name="t", paths=[str(tiny_corpus)], skip=2, limit=1)}, tmp_path / "o")
    assert summary["kept"] == 1 and summary["sources"]["t"]["dropped"]["skipped"] == 2


@pytest.mark.slow
def test_bundled_sharegpt_is_read_to_its_truncated_end(tmp_path):
    summary = prepare({"sharegpt": ShareGPTPackage(name="sharegpt")}, tmp_path / "sg", shard_size=100_000)
    s = summary["sources"]["sharegpt"]
    assert s["kept"] > 16_000 and s["dropped"]["truncated"] == 1 and "malformed_json" not in s["dropped"]


def test_bytes_that_are_not_utf8_drop_their_rows_counted_and_named(tmp_path):
    def row(i, answer):
        question = b'{"conversations": [{"from": "human", "value": "question %d"}, ' % i
        return question + b'{"from": "gpt", "value": "' + answer + b'"}]}'

    jsonl, array = tmp_path / "a.jsonl", tmp_path / "b.json"
    jsonl.write_bytes(b"\n".join(row(i, b"caf\xe9" if i == 3 else b"fine") for i in range(6)) + b"\n")
    array.write_bytes(b"[\n" + b",\n".join(row(i, b"\xff" if i == 11 else b"ok") for i in range(10, 13)) + b"\n]")
    sources = {"a": LocalFiles(name="a", paths=[str(jsonl)]), "b": LocalFiles(name="b", paths=[str(array)])}
    summary = prepare(sources, tmp_path / "out")
    assert summary["sources"]["a"] == {"kept": 5, "dropped": {"not_utf8": 1}, "where": {"not_utf8": [f"{jsonl}:4"]}}
    assert summary["sources"]["b"] == {"kept": 2, "dropped": {"not_utf8": 1}, "where": {"not_utf8": [f"{array}:3"]}}
    assert len(list(read_shards(tmp_path / "out"))) == 7


def test_openai_rows_with_tools_or_content_parts_are_kept_or_dropped_by_name(tmp_path):
    call = {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "weather"}}]}
    rows = [
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": "yo"},
            ]
        },
        {"messages": [{"role": "user", "content": "rain?"}, call, {"role": "tool", "content": "no"}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "a.png"}}]}]},
    ]
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    summary = prepare({"a": LocalFiles(name="a", paths=[str(path)])}, tmp_path / "out")
    assert summary["sources"]["a"] == {
        "kept": 2,
        "dropped": {"non_text_content": 1},
        "where": {"non_text_content": [f"{path}:3"]},
        "cut": {"tool_call": 1},
    }
    assert [r["conversations"] for r in read_shards(tmp_path / "out")] == [
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        [{"role": "user", "content": "rain?"}],
    ]


def test_a_prepare_that_keeps_no_row_names_the_reason_and_the_fix(tmp_path):
    alpaca = tmp_path / "alpaca.jsonl"
    alpaca.write_text("\n".join(json.dumps({"instruction": f"do {i}", "input": "", "output": "ok"}) for i in range(3)))
    with pytest.raises(ValueError) as e:
        prepare({"mine": LocalFiles(name="mine", paths=[str(alpaca)])}, tmp_path / "out")
    message = str(e.value)
    assert (
        "\n" not in message and "3 dropped as no_messages" in message and "keys: instruction, input, output" in message
    )
    assert f"{alpaca}:1" in message and "pipeline.source.sources.mine.prompt_fields" in message
    assert not (tmp_path / "out").exists()
    summary = prepare(  # the fix it names works
        {
            "mine": LocalFiles(
                name="mine", paths=[str(alpaca)], prompt_fields=["instruction", "input"], response_field="output"
            )
        },
        tmp_path / "out",
    )
    assert summary["kept"] == 3
