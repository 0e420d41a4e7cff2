"""Linear kernels (`inference.kernels.linear`): every kernel that runs here computes F.linear of its
precision, and `MeasuredLinear` runs each row count on its plan's kernel."""

import pytest
import torch
import torch.nn.functional as F

from inference.kernels.linear import (
    KERNELS,
    PRECISIONS,
    ROW_BUCKETS,
    MeasuredLinear,
    available_kernels,
    bucket_of,
    kernel_unavailable_reason,
)


def _weights(precision: str, bias: bool):
    g = torch.Generator().manual_seed(0)
    dtype = torch.bfloat16 if precision == "bfloat16" else torch.float32
    w = (torch.randn(40, 24, generator=g) * 0.2).to(torch.bfloat16).to(dtype)  # bf16 values: bf16w stores them exactly
    b = torch.randn(40, generator=g).to(dtype) if bias else None
    return w, b


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("bias", [False, True])
def test_every_available_kernel_computes_the_plain_linear(precision, bias):
    w, b = _weights(precision, bias)
    tol = dict(rtol=2e-2, atol=2e-2) if precision == "bfloat16" else dict(rtol=1e-5, atol=1e-5)
    for kernel in available_kernels(precision):
        layer = MeasuredLinear(w, b, dict.fromkeys(ROW_BUCKETS, kernel))
        for rows in (1, 3, 17, 300):
            x = torch.randn(1, rows, 24, generator=torch.Generator().manual_seed(rows)).to(w.dtype)
            torch.testing.assert_close(layer(x), F.linear(x, w, b), **tol, msg=f"{kernel} at {rows} rows")


def test_a_plan_picks_the_kernel_per_row_bucket(monkeypatch):
    w, _ = _weights("float32", False)
    plan = {r: ("transposed" if r <= 4 else "plain") for r in ROW_BUCKETS}
    layer = MeasuredLinear(w, None, plan)
    calls = []
    layer._kernels = {k: (lambda x, k=k: calls.append(k) or F.linear(x, w)) for k in layer._kernels}
    for rows in (1, 4, 5, 1000):
        layer(torch.randn(rows, 24))
    assert calls == ["transposed", "transposed", "plain", "plain"]
    assert [bucket_of(r) for r in (1, 3, 5, 64, 65, 10_000)] == [1, 4, 8, 64, 256, 256]
    with pytest.raises(ValueError, match="lacks row buckets"):
        MeasuredLinear(w, None, {1: "plain"})


def test_unavailable_kernels_say_why():
    assert "serves the bf16-weights precision" in kernel_unavailable_reason("bf16w", "float32")
    assert "CPU kernel" in kernel_unavailable_reason("onednn", "float32", "cuda")
    assert "unknown kernel" in kernel_unavailable_reason("magic", "float32")
    assert kernel_unavailable_reason("plain", "bfloat16", "cuda") is None
    assert set(available_kernels("float32")) <= set(KERNELS) - {"bf16w"}
