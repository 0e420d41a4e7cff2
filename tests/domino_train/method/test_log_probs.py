import pytest
import torch

from domino_train.method import log_probs
from domino_train.method.log_probs import log_probs_at


def _reference(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return logits.float().log_softmax(-1).gather(-1, ids)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk_elements", [1 << 19, 64])  # one chunk, and chunks of a row or two
def test_values_argmax_and_gradient_equal_the_full_log_softmax(monkeypatch, dtype, chunk_elements):
    monkeypatch.setitem(log_probs._CHUNK_ELEMENTS, "cpu", chunk_elements)
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(2, 5, 3, 40, generator=g) * 3).to(dtype)
    ids = torch.randint(0, 40, (2, 5, 3, 4), generator=g)
    ids[..., 1] = ids[..., 0]  # a repeated id: its gradients add up
    upstream = torch.randn(2, 5, 3, 4, generator=g)

    mine = logits.clone().requires_grad_(True)
    picked, greedy = log_probs_at(mine, ids)
    (picked * upstream).sum().backward()
    ref = logits.clone().requires_grad_(True)
    expected = _reference(ref, ids)
    (expected * upstream).sum().backward()

    assert picked.dtype == torch.float32 and mine.grad.dtype == dtype
    torch.testing.assert_close(picked, expected, rtol=1e-5, atol=1e-5)
    tol = 1e-5 if dtype == torch.float32 else 1e-2  # the reference rounds its gradient through bf16 too
    torch.testing.assert_close(mine.grad, ref.grad, rtol=tol, atol=tol)
    assert torch.equal(greedy, logits.float().argmax(-1)) and not greedy.requires_grad


def test_the_gradient_passes_gradcheck_in_float64():
    logits = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([[0, 3], [6, 6], [2, 1]])
    assert torch.autograd.gradcheck(lambda x: log_probs_at(x, ids)[0], (logits,))


def test_ids_over_other_rows_are_refused():
    with pytest.raises(ValueError, match="must be"):
        log_probs_at(torch.randn(2, 3, 10), torch.zeros(3, 2, 1, dtype=torch.long))
