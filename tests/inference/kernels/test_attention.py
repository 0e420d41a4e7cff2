"""`kernels/attention.py`: the folded layout computes SDPA's grouped attention, masks included, and the
measurement only folds where it can."""

import pytest
import torch
import torch.nn.functional as F

from inference.kernels.attention import FOLD_MAX_QUERIES, attend, fold_mask, measure_folding


@pytest.mark.parametrize("queries", [1, 3, 8])
@pytest.mark.parametrize("mask_rows", [0, 1, 2])  # no mask, one shared by the batch, one per sequence
def test_folded_attention_equals_grouped_sdpa(queries, mask_rows):
    torch.manual_seed(queries)
    b, heads, kv, keys, d = 2, 6, 2, 11, 8
    q = torch.randn(b, heads, queries, d)
    k, v = torch.randn(b, kv, keys, d), torch.randn(b, kv, keys, d)
    mask = None
    if mask_rows:
        mask = torch.zeros(mask_rows, 1, queries, keys)
        mask[..., -queries:] = torch.full((queries, queries), float("-inf")).triu(1)  # causal over the new keys
        mask[-1, ..., 2] = float("-inf")  # and one hidden key, in one sequence's mask only
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3, enable_gqa=True)
    assert torch.allclose(attend(q, k, v, fold_mask(mask, heads // kv), 0.3, fold=True), expected, atol=1e-6)
    assert torch.equal(attend(q, k, v, mask, 0.3, fold=False), expected)


def test_measured_folding_stays_within_the_few_query_counts_and_never_folds_ungrouped_heads():
    folded = measure_folding(6, 2, 8, torch.float32, "cpu", repeats=1)
    assert folded <= set(range(1, FOLD_MAX_QUERIES + 1))
    assert measure_folding(4, 4, 8, torch.float32, "cpu") == frozenset()
    assert measure_folding(6, 2, 8, torch.float32, "meta") == frozenset()
