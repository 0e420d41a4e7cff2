import torch

from domino_train.method.objectives import block_targets
from domino_train.method.source_tau import SourceTau


def test_tau_per_source_is_block_weighted_over_the_batches():
    ids = torch.arange(100, 112).repeat(3, 1)
    mask = torch.ones_like(ids)
    anchors = torch.tensor([[1, 5], [2, -1], [3, 6]])  # row 1 has one padding block
    t = block_targets(ids, mask, anchors, 3, 7.0)
    right = t.labels.clone()  # greedy drafts
    base = right.clone()
    base[0, 0, 1] = 0  # row 0, block 0: right, then wrong -> run 1
    base[2, :, 0] = 0  # row 2: both blocks wrong at once -> run 0
    tau = SourceTau(["chat", "code"])
    tau.add(torch.tensor([0, 1, 0]), base, right, t)
    tau.add(torch.tensor([1]), right[1:2], right[1:2], block_targets(ids[1:2], mask[1:2], anchors[1:2], 3, 7.0))
    out = tau.results()
    assert out["tau_base/chat"] == (2 + 4 + 1 + 1) / 4 and out["tau_final/chat"] == 4.0
    assert out["tau_base/code"] == out["tau_final/code"] == 4.0  # one block per batch, padding left out
    assert SourceTau(["only"]).results() == {}
