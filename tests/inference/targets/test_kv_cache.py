"""The target's KV cache operations (`inference.targets.kv_cache`) on a bare cache: appends grow the
storage in place, crop drops the tail, compaction moves the kept window entries to its front."""

import pytest
import torch

from inference.targets.kv_cache import GrowingKVLayer, cache_length, compact_cache, crop_cache, new_cache


def _filled(config, n: int) -> tuple:
    cache = new_cache(config)
    keys = torch.arange(n, dtype=torch.float32).view(1, 1, n, 1).expand(1, 2, n, 4).contiguous()
    for i in range(len(cache.layers)):
        cache.update(keys, -keys, i)
    return cache, keys


def test_layers_grow_in_place_past_their_first_capacity(any_tiny_target):
    cache, keys = _filled(any_tiny_target.config, 300)  # more than MIN_CAPACITY
    assert all(isinstance(layer, GrowingKVLayer) for layer in cache.layers)
    assert cache_length(cache) == 300 and torch.equal(cache.layers[0].keys, keys)


def test_crop_keeps_the_head_and_refuses_to_grow(any_tiny_target):
    cache, keys = _filled(any_tiny_target.config, 10)
    crop_cache(cache, 6)
    assert cache_length(cache) == 6 and torch.equal(cache.layers[-1].values, -keys[:, :, :6])
    with pytest.raises(ValueError, match="cannot crop"):
        crop_cache(cache, 7)


def test_compaction_moves_the_kept_entries_to_the_window_start(any_tiny_target):
    cache, _ = _filled(any_tiny_target.config, 10)
    compact_cache(cache, 4, torch.tensor([0, 2, 5]))
    assert cache_length(cache) == 7
    assert cache.layers[0].keys[0, 0, :, 0].tolist() == [0, 1, 2, 3, 4, 6, 9]
