"""The concurrency side of results (inference/eval/concurrency.py): levels, reference arms, serving metrics."""

import pytest

from inference.decoding.stats import GenerationStats
from inference.eval.concurrency import by_concurrency, concurrency_levels, reference_arm, serving_metrics
from inference.eval.records import Record
from inference.eval.results import summarize


def _batched(method, prompt_id, tokens, level, wall_s, latency, prefill_s=None):
    stats = GenerationStats(4, len(tokens), [1] * len(tokens), prefill_s=0.1, decode_s=latency - 0.1)
    batch = {"id": f"{method}/turn0", "wall_s": wall_s}
    if prefill_s is not None:
        batch["prefill_s"] = prefill_s
    return Record("mt-bench", method, prompt_id, 0, tokens, "length", stats, "x", concurrency=level, batch=batch)


def test_levels_are_sorted_unique_and_refused_when_not_positive_integers():
    assert concurrency_levels(4) == [4] and concurrency_levels([4, 1, 2, 4]) == [1, 2, 4]
    for bad in (0, [], [1, "2"], True):
        with pytest.raises(ValueError, match="concurrency must be"):
            concurrency_levels(bad)


def test_arms_compare_with_batch_1_ar_where_the_run_has_it():
    assert reference_arm("domino@4", ["ar", "ar@4", "domino@4"]) == "ar"
    assert reference_arm("domino@4", ["ar@4", "domino@4"]) == "ar@4"
    assert reference_arm("ar@4", ["ar@4", "domino@4"]) is None and reference_arm("ar", ["ar"]) is None


def test_throughput_counts_a_batched_run_once_and_latency_is_per_request():
    records = [_batched("ar", p, [1, 2, 3, 4], 2, wall_s=2.0, latency=t) for p, t in (("a", 1.0), ("b", 2.0))]
    m = serving_metrics(records)
    assert m["throughput_tok_s"] == 8 / 2.0 and m["latency_s_p50"] in (1.0, 2.0) and m["latency_s_p90"] == 2.0
    faster = [_batched("domino", p, [1, 2, 3, 4], 2, wall_s=1.0, latency=0.5) for p in "ab"]
    skipped = Record("mt-bench", "dflash", "a", 0, None, None, None, skip_reason="long", concurrency=2)
    results = summarize([*records, *faster, skipped], check_lossless=False)
    assert results["mt-bench"]["domino@2"]["speedup"] == 2.0
    levels = by_concurrency(results)["mt-bench"]
    assert set(levels) == {"ar", "domino", "dflash"} and set(levels["dflash"]) == {2}  # all skipped: still at 2


def test_decode_throughput_leaves_out_the_prefills_and_each_requests_first_token():
    """Two requests of 4 tokens in a 2 s run that spent 1.5 s prefilling (long prompts): throughput 4 tokens
    / s, decode 6 tokens (each request's first came from its prefill) / 0.5 s; a method whose decode is
    twice as fast but whose prefill is as long has a throughput speedup of 1.33x only, a decode one of 2x."""
    ar = [_batched("ar", p, [1, 2, 3, 4], 2, wall_s=2.0, latency=2.0, prefill_s=1.5) for p in "ab"]
    m = serving_metrics(ar)
    assert m["throughput_tok_s"] == 4.0 and m["decode_tok_s"] == pytest.approx(12.0)
    fast = [_batched("domino", p, [1, 2, 3, 4], 2, wall_s=1.5, latency=1.5, prefill_s=1.25) for p in "ab"]
    results = summarize([*ar, *fast], check_lossless=False)["mt-bench"]["domino@2"]
    assert results["speedup"] == pytest.approx(4 / 3) and results["decode_speedup"] == pytest.approx(2.0)
    older = [_batched("ar", p, [1, 2], 2, wall_s=1.0, latency=1.0) for p in "ab"]  # recorded before prefill_s
    assert serving_metrics(older)["decode_tok_s"] is None
