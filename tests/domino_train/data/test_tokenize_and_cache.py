import json

import pytest
import torch

from domino_train.data.feature_cache import FeatureCache, build_feature_cache
from domino_train.data.prepare import prepare
from domino_train.data.sources import LocalFiles
from domino_train.data.tokenize import load_tokenized, tokenize


@pytest.fixture
def tokenized(tmp_path, tiny_corpus, qwen_target):
    prepare({"t": LocalFiles(name="t", paths=[str(tiny_corpus)])}, tmp_path / "prepared")
    manifest = tokenize(qwen_target, tmp_path / "prepared", tmp_path / "tokenized", 64, lineage={"x": 1})
    return tmp_path / "tokenized", manifest


def test_tokenized_set_and_manifest(tokenized, qwen_target):
    path, manifest = tokenized
    ds, on_disk = load_tokenized(path)
    assert on_disk == manifest
    assert manifest["counts"]["rows_in"] == 6
    assert manifest["counts"]["rows"] + manifest["counts"].get("dropped_no_assistant_tokens", 0) == 6
    assert manifest["target"]["name"] == "tiny-qwen3" and manifest["target"]["chat_template_sha256"]
    assert manifest["lineage"] == {"x": 1} and manifest["git_revision"]
    row = ds[0]
    assert len(row["input_ids"]) == len(row["loss_mask"]) <= 64 and set(row["loss_mask"]) == {0, 1}
    assert (
        row["input_ids"]
        == qwen_target.tokenizer(
            qwen_target.render_chat([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        )["input_ids"]
    )
    assert manifest["counts"]["tokens"] == sum(len(r) for r in ds["input_ids"])


def test_load_tokenized_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a tokenized set"):
        load_tokenized(tmp_path)


def test_cache_round_trip_and_resume(tokenized, qwen_target, tmp_path):
    path, _ = tokenized
    layer_ids = [1, 3]
    kw = dict(dtype=torch.float32, shard_bytes=12000, batch_tokens=128, window_rows=2)  # fp32: exact up to noise
    index = build_feature_cache(qwen_target, path, tmp_path / "f", layer_ids, **kw)
    assert len(index["shards"]) > 1 and index["bytes_per_token"] == 2 * 64 * 4
    cache, (ds, _) = FeatureCache(tmp_path / "f"), load_tokenized(path)
    assert len(cache) == len(ds)
    for i in range(len(ds)):
        ids = torch.tensor([ds[i]["input_ids"]])
        expected = qwen_target(ids, layer_ids=layer_ids).features[0]
        torch.testing.assert_close(cache[i], expected, rtol=1e-5, atol=1e-5)  # batched vs alone: fp32 noise
    # An interrupted run: the index and the last shard are missing; the restart fills them in.
    (tmp_path / "f" / "index.json").unlink()
    last = sorted((tmp_path / "f").glob("features-*.safetensors"))[-1]
    last.unlink()
    with pytest.raises(FileNotFoundError, match="not finished"):
        FeatureCache(tmp_path / "f")
    again = build_feature_cache(qwen_target, path, tmp_path / "f", layer_ids, **kw)
    assert again["shards"] == index["shards"] and torch.equal(
        FeatureCache(tmp_path / "f")[len(ds) - 1], cache[len(ds) - 1]
    )
    assert json.loads((tmp_path / "f" / "index.json").read_text())["num_tokens"] == index["num_tokens"]


def test_cache_stores_the_targets_greedy_next_ids(tokenized, qwen_target, tmp_path):
    path, _ = tokenized
    build_feature_cache(qwen_target, path, tmp_path / "f", [1], dtype=torch.float32, batch_tokens=96, window_rows=4)
    cache, (ds, _) = FeatureCache(tmp_path / "f"), load_tokenized(path)
    assert cache.has_next_ids
    for i in range(len(ds)):
        ids = torch.tensor([ds[i]["input_ids"]])
        assert torch.equal(cache.next_ids(i), qwen_target(ids).logits[0].argmax(-1).to(torch.int32))


def test_a_cache_is_never_resumed_over_another_tokenized_set(tokenized, qwen_target, tmp_path):
    path, _ = tokenized
    build_feature_cache(qwen_target, path, tmp_path / "f", [1], dtype=torch.float32)
    # tokenize again with another max_length: under the cache made from the old set it is refused ...
    with pytest.raises(ValueError, match=r"tokenized would change .* made from it; pass overwrite=true"):
        tokenize(qwen_target, tmp_path / "prepared", path, 40, dependents=[tmp_path / "f"])
    tokenize(qwen_target, tmp_path / "prepared", path, 64, dependents=[tmp_path / "f"])  # the same set: fine
    with pytest.raises(ValueError, match=r"/f was made with other settings or input \(layer_ids: \[1\] -> \[2\]\)"):
        build_feature_cache(qwen_target, path, tmp_path / "f", [2], dtype=torch.float32)
    # ... and a set changed behind the cache's back is not resumed into
    tokenize(qwen_target, tmp_path / "prepared", path, 40)
    with pytest.raises(ValueError, match=r"/f was made with other settings or input \(input_sha256: "):
        build_feature_cache(qwen_target, path, tmp_path / "f", [1], dtype=torch.float32)
    index = build_feature_cache(qwen_target, path, tmp_path / "f", [1], dtype=torch.float32, overwrite=True)
    assert index["num_rows"] == len(load_tokenized(path)[0])


def test_a_tokenize_that_keeps_no_row_names_the_reason_and_the_fix(tmp_path, tiny_corpus, qwen_target):
    prepare({"t": LocalFiles(name="t", paths=[str(tiny_corpus)])}, tmp_path / "prepared")
    with pytest.raises(ValueError) as e:
        tokenize(qwen_target, tmp_path / "prepared", tmp_path / "tokenized", 8)
    assert str(e.value).startswith("tokenize kept no row of 6: 6 dropped as no_assistant_tokens (")
    assert "first at row t/a" in str(e.value) and "raise tokenize.max_length" in str(e.value)
    assert not (tmp_path / "tokenized").exists()
