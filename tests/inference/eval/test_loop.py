"""The batch-1 evaluation loop's helpers (`inference/eval/loop.py`)."""

from __future__ import annotations

from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.eval.loop import warm_up
from inference.targets.engine import install_engine
from inference.targets.tiny import tiny_target


def test_a_warm_up_leaves_the_cost_aware_decoders_nothing_learned_but_their_measured_curves(make_drafter):
    """A warm-up pays first-call costs (allocations, kernel choices); the gates, caps, timed costs and
    acceptances learned from its rounds would carry them into the timed run."""
    target = install_engine(tiny_target("qwen3"), engine="lean", prepack=False)
    drafter = make_drafter(target)
    decoder = build_decoder(
        "dominotree", target, drafter, DecodeOptions(stop_token_ids=[]), TreeOptions(budget="auto", max_budget=4)
    )
    ar = build_decoder("ar", target, options=DecodeOptions(stop_token_ids=[]))
    warm_up({"ar": ar, "dominotree": decoder}, target, max_new_tokens=12, levels=(1, 2))
    assert decoder.verify_curve is not None and set(decoder.batch_curves) == {2}  # measured once, kept
    assert decoder.verify_timed is not None and decoder.verify_timed.observations == 0
    assert decoder.gate.plain_rate is None and decoder.gate.draft_rate is None
    assert decoder.batch_gates == {} and decoder.batch_caps == {} and decoder.batch_costs == {}
    assert decoder.acceptance.seen == type(decoder.acceptance)().seen
