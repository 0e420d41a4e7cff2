"""Cost-aware drafting: the prefix that maximises expected tokens per second, a calibrated acceptance map,
a measured verify curve, and decoders that choose their draft size per round and stay lossless."""

import math

import pytest
import torch

from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.acceptance import AcceptanceModel
from inference.decoding.budget import best_prefix
from inference.decoding.cost_model import ObservedCosts, VerifyCurve, measure_verify_curve, non_decreasing
from inference.decoding.sampling import SamplingParams
from inference.decoding.stats import StageClock


def test_best_prefix_maximises_expected_tokens_per_second():
    gains = [0.9, 0.8, 0.5, 0.2, 0.05]
    flat = lambda n: 1.0  # noqa: E731 - a verify that costs the same for any window keeps every draft
    assert best_prefix(gains, flat) == 5
    steep = lambda n: 1.0 + 0.5 * n  # noqa: E731 - each draft costs half a round
    rates = {n: (1 + sum(gains[:n])) / steep(n) for n in range(1, 6)}
    assert best_prefix(gains, steep) == max(rates, key=rates.get)
    assert best_prefix(gains, lambda n: 1.0 + 10 * n, minimum=0) == 0  # drafts that never pay: plain AR
    assert best_prefix([], flat) == 0


def test_acceptance_starts_at_the_drafters_probability_and_learns_a_monotone_map():
    model = AcceptanceModel()
    p0 = model.predict([-0.05, -1.2, -5.0])
    assert p0[0] > p0[1] > p0[2] and p0[1] == pytest.approx(math.exp(-1.25), rel=0.2)
    # an overconfident drafter: paths it scores at ~exp(-0.05) are accepted only 40 % of the time
    for i in range(200):
        model.update([-0.05, -1.2], [i % 5 < 2, i % 10 == 0])
    p = model.predict([-0.05, -1.2, -5.0])
    assert p[0] == pytest.approx(0.4, abs=0.02) and p[1] == pytest.approx(0.1, abs=0.02)
    model.update([-3.5] * 50, [True] * 50)  # a worse score accepted more often is pooled, never ranked above
    p = model.predict([-0.05, -1.2, -3.5])
    assert p[0] >= p[1] >= p[2]


def test_verify_curve_interpolates_and_extrapolates():
    curve = VerifyCurve([1, 4, 16], [1.0, 1.0, 2.0], 10)
    assert curve(1) == 1.0 and curve(3) == 1.0 and curve(10) == pytest.approx(1.5) and curve(28) == pytest.approx(3.0)


def test_a_longer_window_never_costs_less_than_a_shorter_one():
    curve = VerifyCurve([1, 16, 24, 32], [1.0, 2.0, 2.5, 2.2], 10)  # 32 timed below 24: noise
    assert curve.seconds == pytest.approx([1.0, 2.0, 2.35, 2.35]) and curve(28) == pytest.approx(2.35)


def test_a_lone_slow_timing_is_pooled_with_its_neighbours_not_carried_to_every_larger_window():
    curve = VerifyCurve([1, 2, 4, 8, 16], [1.0, 3.0, 1.0, 1.0, 1.0], 10)  # a busy moment at 2 tokens
    assert curve.seconds == pytest.approx([1.0, 1.5, 1.5, 1.5, 1.5])  # a running maximum would say 3.0 from 2 on
    assert non_decreasing([3.0, 1.0, 2.0, 5.0]) == pytest.approx([2.0, 2.0, 2.0, 5.0])


def test_a_window_costs_more_after_a_longer_context_and_more_so_the_wider_it_is():
    curve = VerifyCurve([1, 16], [1.0, 2.0], 100, far_seconds=[1.5, 4.0], far_tokens=600)
    assert curve(16) == curve(16, 100) == 2.0  # no context: the prompt's
    assert curve(1, 600) == pytest.approx(1.5) and curve(16, 600) == pytest.approx(4.0)
    assert curve(16, 1100) == pytest.approx(6.0) and curve(1, 1100) == pytest.approx(2.0)  # linear past the far one
    near, far = 1.0 + 7 / 15, 1.5 + 2.5 * 7 / 15  # 8 tokens, between the measured windows
    assert curve(8, 350) == pytest.approx((near + far) / 2)  # and halfway between the contexts
    noisy = VerifyCurve([1, 16], [1.0, 2.0], 100, far_seconds=[0.9, 1.9], far_tokens=600)  # timed faster later
    assert noisy(16, 5000) == 2.0  # never cheaper with more context
    with pytest.raises(ValueError, match="far_tokens must exceed"):
        VerifyCurve([1], [1.0], 100, far_seconds=[1.0], far_tokens=100)


def test_timed_forwards_rescale_the_curve_per_size_at_their_context():
    curve = VerifyCurve([4, 16, 32], [0.020, 0.020, 0.030], 16, far_seconds=[0.020, 0.030, 0.050], far_tokens=528)
    costs = ObservedCosts(curve, weight=0.5)
    assert costs(16) == pytest.approx(0.020) and costs(16, 528) == pytest.approx(0.030)  # nothing timed: the curve
    costs.observe(16, 0.060, context=528)  # twice the curve's cost there: the device's speed, every size
    assert costs.speed == pytest.approx(2.0) and costs.correction(16) == pytest.approx(1.0)
    assert costs(16, 528) == pytest.approx(0.060) and costs(16, 16) == pytest.approx(0.040)
    assert costs(32, 528) == pytest.approx(0.100)  # not timed: the curve at the timed speed
    costs.observe(16, 0.030, context=528)
    assert 0.030 < costs(16, 528) < 0.060  # running, not the last forward
    for _ in range(30):  # a size that costs 1.5x what the others do at the same speed
        costs.observe(4, 0.020 * 2)
        costs.observe(32, 0.030 * 2 * 1.5)
    assert costs.correction(32) / costs.correction(4) == pytest.approx(1.5, rel=0.05)
    assert costs(32) / costs(4) == pytest.approx(1.5 * 0.030 / 0.020, rel=0.05)
    costs.observe(8, 3 * costs(8), rows=2)  # 8 tokens over 2 rows: not the same forward as 1 row x 8
    keys = {"1 rows, 4 tokens", "1 rows, 16 tokens", "1 rows, 32 tokens", "2 rows, 8 tokens"}
    assert costs(8, rows=2) > costs(8) and set(costs.to_dict()["corrections"]) == keys


def test_the_device_s_drift_does_not_become_a_price_of_size():
    """Two sizes cost the same; one is timed while the device runs 1.4x slow, then only the other while it
    recovers. Both must read the same again: with one running ratio per size, the size not timed after the
    slow minute stayed 1.35x dear and the rule kept avoiding it (2-row rounds, 2 Zen 4 cores)."""
    costs = ObservedCosts(VerifyCurve([2, 6], [0.020, 0.020], 16))
    for _ in range(10):
        costs.observe(2, 0.020)
        costs.observe(6, 0.020)
    for _ in range(10):  # a slow minute
        costs.observe(2, 0.028)
        costs.observe(6, 0.028)
    for _ in range(10):  # back to speed, only the small size timed
        costs.observe(2, 0.020)
    assert costs(6) == pytest.approx(costs(2), rel=0.05) and costs(2) == pytest.approx(0.020, rel=0.05)


def test_a_size_not_timed_yet_takes_its_row_count_s_correction():
    """A batch's full rounds run 1.4x the curve while its draining rounds run 0.8x: a size of the full
    batch not timed yet reads 1.4x, not a ratio over every round (which the drains pull down)."""
    costs = ObservedCosts(VerifyCurve([4, 32], [0.020, 0.040], 16), weight=0.25)
    for _ in range(40):
        costs.observe(4, 0.020 * 0.8, rows=2)
        costs.observe(3, 0.020 * 0.8, rows=3)
        costs.observe(8, costs.curve(8) * 1.4, rows=4)
    assert costs(16, rows=4) == pytest.approx(costs.curve(16) * 1.4, rel=0.03)
    assert costs(4, rows=2) == pytest.approx(0.020 * 0.8, rel=0.03)
    by_rows = costs.to_dict()["by_rows"]
    assert by_rows["4 rows"] / by_rows["2 rows"] == pytest.approx(1.75, rel=0.03)


def test_the_verify_curve_is_measured_on_the_target(qwen_target):
    curve = measure_verify_curve(qwen_target, 20, [1, 4, 8], repeats=2, far=32)
    assert curve.windows == [1, 4, 8] and all(s > 0 for s in curve.seconds) and curve.prompt_tokens == 20
    assert curve.far_tokens == 52 and len(curve.far_seconds) == 3
    assert measure_verify_curve(qwen_target, 20, [1, 2], repeats=1, far=None).far_seconds is None


def _prompt(seed):
    return torch.randint(0, 256, (12,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("method", ["ddtree", "dominotree"])
def test_auto_budget_trees_are_lossless_and_log_their_choices(qwen_target, trained_drafter, method):
    drafter, seqs = trained_drafter(qwen_target)
    tree = TreeOptions(budget="auto", max_budget=12)
    decoder = build_decoder(method, qwen_target, drafter, tree=tree)
    ar = build_decoder("ar", qwen_target)
    for row in range(3):
        prompt = seqs[row, :10].tolist()
        out = decoder.generate(prompt, 32)
        assert out.tokens == ar.generate(prompt, 32).tokens
        s = out.stats
        assert len(s.draft_sizes) == len(s.predicted) == s.rounds
        assert all(0 <= n <= 12 for n in s.draft_sizes) and all(p >= 1.0 for p in s.predicted)
    assert decoder.verify_curve is not None and decoder.verify_curve.windows[-1] <= 13


def test_chain_windows_are_lossless(qwen_target, trained_drafter):
    drafter, seqs = trained_drafter(qwen_target)
    ar = build_decoder("ar", qwen_target)
    for window in ("auto", 0, 3):
        decoder = build_decoder("domino", qwen_target, drafter, DecodeOptions(chain_window=window))
        prompt = seqs[1, :10].tolist()
        out = decoder.generate(prompt, 32)
        assert out.tokens == ar.generate(prompt, 32).tokens, window
        assert all(
            n <= (drafter.config.num_draft_tokens if window == "auto" else window) for n in out.stats.draft_sizes
        )
    assert (
        max(
            build_decoder("domino", qwen_target, drafter, DecodeOptions(chain_window=0))
            .generate(prompt, 8)
            .stats.accept_lengths
        )
        == 1
    )


@pytest.mark.parametrize(
    ("method", "verify"), [("dominotree", "match"), ("ddtree", "residual"), ("domino", "rejection")]
)
def test_cost_aware_sampling_keeps_the_targets_distribution(
    qwen_target, make_drafter, exact_joint, sample_counts, chi_square_pvalue, method, verify
):
    params = SamplingParams(temperature=1.5, top_k=4)
    drafter = make_drafter(qwen_target, block_size=4).eval()
    options = DecodeOptions(params, verify, chain_window="auto")
    decoder = build_decoder(method, qwen_target, drafter, options, TreeOptions(budget="auto", max_budget=6))
    prompt = torch.tensor(_prompt(3))
    counts, _ = sample_counts(decoder, prompt, 300)
    assert chi_square_pvalue(counts, exact_joint(qwen_target, prompt, params)) > 1e-3


def test_bad_budget_and_window_are_refused():
    with pytest.raises(ValueError, match="tree budget must be auto or >= 1"):
        TreeOptions(budget="sometimes")
    with pytest.raises(ValueError, match="chain window must be auto"):
        DecodeOptions(chain_window=-1)


def test_only_a_clock_that_times_the_device_corrects_the_costs():
    """Unsynchronised on a GPU, an interval is the host's kernel launches: rounds must not calibrate on it."""
    assert StageClock("cpu", sync=False).exact and StageClock("cuda", sync=True).exact
    assert not StageClock("cuda", sync=False).exact


def test_a_cost_aware_decoder_corrects_its_curve_by_the_verifies_it_times(qwen_target, make_drafter):
    decoder = build_decoder(
        "ddtree", qwen_target, make_drafter(qwen_target), DecodeOptions(stop_token_ids=[]), TreeOptions(budget="auto")
    )
    decoder.generate(list(range(40, 52)), 12)
    assert decoder.verify_timed is not None and decoder.verify_timed.observations > 0
