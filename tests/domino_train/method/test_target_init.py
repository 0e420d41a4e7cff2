import pytest
import torch

from domino_train.method.target_init import init_from_target


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_draft_layers_start_as_the_targets_top_layers(family, make_drafter):
    from inference import tiny_target

    target = tiny_target(family)
    drafter = make_drafter(target, num_draft_layers=2, intermediate_size=None, target_layer_ids=[0, 1])
    init_from_target(drafter, target)
    n = target.num_layers
    for i, layer in enumerate(drafter.backbone.layers):
        src = dict(target.layers[n - 2 + i].named_parameters())
        for name, p in layer.named_parameters():
            if name in src:
                assert torch.equal(p, src[name]), (i, name)
            else:  # Llama has no q/k norms: they stay at 1
                assert family == "llama" and "norm" in name and torch.equal(p, torch.ones_like(p))
    assert torch.equal(drafter.backbone.norm.weight, target.model.model.norm.weight)
    h = target.config.hidden_size
    features = torch.randn(3, 2 * h)
    torch.testing.assert_close(drafter.backbone.fc(features), features[:, h:])  # pass-through of layer 1


def test_shapes_that_differ_are_refused_and_nothing_is_copied(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target, intermediate_size=96)  # the tiny target's MLP is wider
    before = {k: v.clone() for k, v in drafter.state_dict().items()}
    with pytest.raises(ValueError, match="mlp.gate_proj.weight.*intermediate_size"):
        init_from_target(drafter, qwen_target)
    assert all(torch.equal(before[k], v) for k, v in drafter.state_dict().items())
