"""The bf16-weight kernel (`inference.kernels.native`): fp32 sums of fp32 inputs and bf16 weights, and
the same bits for a row whether it is computed alone or among others (batch invariance)."""

import pytest
import torch
import torch.nn.functional as F

from inference.kernels.native import bf16w_linear, bf16w_unavailable_reason

pytestmark = pytest.mark.skipif(bf16w_unavailable_reason() is not None, reason=str(bf16w_unavailable_reason()))


@pytest.mark.parametrize("k", [7, 64, 200])  # K not a multiple of 8 takes the scalar tail
def test_matches_an_fp32_linear_on_the_same_weights(k):
    g = torch.Generator().manual_seed(k)
    w, b = torch.randn(37, k, generator=g).bfloat16(), torch.randn(37, generator=g)
    x = torch.randn(2, 9, k, generator=g)
    torch.testing.assert_close(bf16w_linear(x, w, b), F.linear(x, w.float(), b), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(bf16w_linear(x, w), F.linear(x, w.float()), rtol=1e-5, atol=1e-4)


def test_a_row_is_the_same_bits_alone_and_in_any_batch():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(50, 96, generator=g).bfloat16()
    x = torch.randn(17, 96, generator=g)
    full = bf16w_linear(x, w)
    for rows in (1, 2, 3, 4, 5, 16):
        assert torch.equal(bf16w_linear(x[:rows], w), full[:rows])
    assert torch.equal(bf16w_linear(x[9:10], w), full[9:10])


def test_refuses_the_wrong_dtypes():
    with pytest.raises(TypeError, match="fp32 inputs and bf16 weights"):
        bf16w_linear(torch.randn(2, 8), torch.randn(4, 8))
