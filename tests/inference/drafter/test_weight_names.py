"""The weight-name table read both ways: every drafter parameter has one public key, and back."""

import pytest

from inference.drafter.weight_names import canonical_key, to_module, to_public


@pytest.mark.parametrize("head", ["domino", None])
def test_every_parameter_round_trips(qwen_target, make_drafter, head):
    drafter = make_drafter(qwen_target, head=head, draft_vocab_size=64)
    for name in drafter.state_dict():
        assert to_module(to_public(name)) == name


def test_spellings_and_unknown_names():
    assert to_public("backbone.hidden_norm.weight") == "hidden_norm.weight"
    assert to_public("backbone.norm.weight") == "norm.weight"
    assert canonical_key("model.logit_head.prefix_gru.weight_ih_l0") == "prefix_gru.weight_ih_l0"
    assert canonical_key("logit_head.fc.weight") == "logit_head.fc.weight"  # only the head is aliased
    assert to_module("lm_head.weight") is None
    with pytest.raises(AssertionError, match="unexpected drafter parameter"):
        to_public("backbone.rotary.inv_freq")
