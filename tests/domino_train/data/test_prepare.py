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
