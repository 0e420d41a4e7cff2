"""The lossless check tells numerical ties from bugs: injected acceptance bugs are `algorithmic`."""

import pytest
import torch

from inference.decoding import build_decoder
from inference.decoding.chain import verify as chain_verify
from inference.decoding.options import DecodeOptions, TreeOptions
from inference.decoding.tree import verify as tree_verify
from inference.eval.divergence import first_difference, measure_divergence, measure_noise
from inference.eval.loop import run_dataset
from inference.eval.prompt_sets import BenchmarkPrompt
from inference.eval.results import summarize

PROMPTS = [BenchmarkPrompt(f"p{i}", (text,)) for i, text in enumerate(["Tell me a story.", "2 + 2 =", "def f(x):"])]


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2, 3], [1, 2]) == 2 and first_difference([1], [1, 2]) == 1


def test_fp32_noise_is_far_below_any_real_gap(qwen_target):
    ids = qwen_target.chat_ids([{"role": "user", "content": "hello"}])
    ar = build_decoder("ar", qwen_target).generate(ids, 12).tokens
    noise = measure_noise(qwen_target, ids, ar, 8)
    assert 0 <= noise < 1e-3


def test_the_gap_is_the_targets_logit_margin_between_the_two_tokens(qwen_target):
    ids = qwen_target.chat_ids([{"role": "user", "content": "hello"}])
    ar = build_decoder("ar", qwen_target).generate(ids, 6).tokens
    with torch.no_grad():
        logits = qwen_target(torch.tensor([ids + ar[:3]])).logits[0, -1]
    second = logits.topk(2).indices[1].item()
    found = measure_divergence(qwen_target, ids, ar, ar[:3] + [second])
    assert (found.position, found.ar_token, found.token) == (3, ar[3], second)
    assert found.gap == pytest.approx((logits[ar[3]] - logits[second]).item(), abs=1e-4)
    assert measure_divergence(qwen_target, ids, ar, list(ar)) is None
    assert measure_divergence(qwen_target, ids, ar, ar[:2]).gap is None  # one side ended


def _summary(target, decoders):
    records = run_dataset("set", PROMPTS, decoders, target, 24, progress=False, noise_window=8)
    return summarize(records, check_lossless=True)["set"]


def test_correct_methods_are_exact_on_the_fp32_tiny_target(qwen_target, trained_drafter):
    drafter, _ = trained_drafter(qwen_target)
    methods = ("ar", "dflash", "domino", "ddtree", "dominotree")
    decoders = {m: build_decoder(m, qwen_target, drafter, DecodeOptions(), TreeOptions(budget=6)) for m in methods}
    for method, s in _summary(qwen_target, decoders).items():
        if method != "ar":
            assert s["lossless"] is True and s["divergences"]["exact"] == len(PROMPTS), method
            assert 0 <= s["noise_floor"] < 1e-3


def _keeps_one_past_the_first_mismatch(draft, choice):
    a = 0
    while a < len(draft) and draft[a] == choice[a]:
        a += 1
    return min(a + 1, len(draft))


def _follows_a_child_the_target_did_not_pick(tree, logits, params, generator):
    path, bonus = tree_verify.walk_match(tree, logits, params, generator)
    wrong = [node for token, node in tree.children()[0].items() if token != logits[0].argmax().item()]
    return ([wrong[0]], logits[wrong[0]].argmax().item()) if wrong else (path, bonus)


def test_an_acceptance_bug_in_a_chain_is_algorithmic(qwen_target, trained_drafter, monkeypatch):
    drafter, _ = trained_drafter(qwen_target)
    monkeypatch.setattr(chain_verify, "accepted_prefix", _keeps_one_past_the_first_mismatch)
    decoders = {m: build_decoder(m, qwen_target, drafter) for m in ("ar", "domino")}
    s = _summary(qwen_target, decoders)["domino"]
    assert s["lossless"] is False and s["divergences"]["algorithmic"] >= 1


def test_a_tree_walk_that_follows_a_child_the_target_did_not_pick_is_algorithmic(
    qwen_target, trained_drafter, monkeypatch
):
    drafter, _ = trained_drafter(qwen_target)
    monkeypatch.setitem(tree_verify.TREE_WALKS, "match", _follows_a_child_the_target_did_not_pick)
    decoders = {m: build_decoder(m, qwen_target, drafter, tree=TreeOptions(budget=6)) for m in ("ar", "ddtree")}
    s = _summary(qwen_target, decoders)["ddtree"]
    assert s["lossless"] is False and s["divergences"]["algorithmic"] >= 1
