"""The lossless check tells numerical ties from bugs (fp32 tiny target): planted acceptance, tree-walk and
tree-mask bugs are `algorithmic`, through the own-argmax audit or the proof at the divergence (replayed at
batch 1, or from the logits a batched run captured, bounded by batched `ar` replayed along `ar`'s output),
and a proof holds only where both sides chose their own argmax and the logits sit within rounding."""

import pytest
import torch

from inference import DominoDrafter
from inference.decoding import batched_rules, build_decoder, speculative
from inference.decoding.ar import ARDecoder
from inference.decoding.batched import BatchedDecoder
from inference.decoding.chain import verify as chain_verify
from inference.decoding.generation import Generation
from inference.decoding.logits_probe import LogitsProbe
from inference.decoding.options import DecodeOptions, TreeOptions
from inference.decoding.sampling import sample
from inference.decoding.speculative import Verdict
from inference.decoding.stats import GenerationStats
from inference.decoding.tree import verify as tree_verify
from inference.decoding.tree.decoder import TreeDecoder
from inference.eval import divergence
from inference.eval.divergence import first_difference, measure_noise, prove_divergence
from inference.eval.loop import run_dataset
from inference.eval.planted_bugs import (
    accepts_within,
    sees_a_sibling,
    sibling_seeing_windows,
    takes_a_close_sibling,
)
from inference.eval.prompt_sets import BenchmarkPrompt
from inference.eval.results import summarize
from inference.targets.engine import install_engine
from inference.targets.ragged_window import RaggedWindow
from inference.targets.tiny import tiny_target

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


class _FlipsAtCloseCall(ARDecoder):
    """`ar`, except that at output position `at` it commits the runner-up, reporting logits in which the
    two are swapped (`honest`: the method's own argmax is its token) or left as they are (not)."""

    def __init__(self, target, at: int, honest: bool = True) -> None:
        super().__init__(target)
        self.at, self.honest = at, honest

    @torch.inference_mode()
    def generate(self, prompt_ids, max_new_tokens, generator=None):
        ids, tokens = torch.tensor([list(prompt_ids)]), []
        cache = self.target.new_cache()
        while len(tokens) < max_new_tokens:
            logits = self.target(ids, cache=cache, last_logits_only=True).logits[0, -1].clone()
            token = sample(logits[None], self.sampling)[0].item()
            if len(tokens) == self.at:
                first, second = logits.topk(2).indices.tolist()
                if self.honest:
                    logits[[first, second]] = logits[[second, first]]
                token = second
            if self.probe is not None:
                self.probe.observe(len(tokens), logits[None], 1, [0])
            tokens.append(token)
            ids = torch.tensor([[token]])
        return Generation(tokens, "length", GenerationStats(len(prompt_ids)))


def test_a_divergence_is_proven_only_by_both_sides_own_argmax_and_logits_within_rounding(qwen_target, monkeypatch):
    ids = qwen_target.chat_ids([{"role": "user", "content": "hello"}])
    ar = build_decoder("ar", qwen_target)
    expected = ar.generate(ids, 8).tokens
    assert prove_divergence(ar, ar, ids, expected, list(expected), 8) is None
    ended = prove_divergence(ar, ar, ids, expected, expected[:5], 8)
    assert (ended.position, ended.token, ended.kind) == (5, None, "algorithmic")

    honest = _FlipsAtCloseCall(qwen_target, at=3)
    tokens = honest.generate(ids, 8).tokens
    found = prove_divergence(honest, ar, ids, expected, tokens, 8)
    assert (found.position, found.ar_token, found.token) == (3, expected[3], tokens[3])
    assert found.method_margin > 0 and found.ar_margin == pytest.approx(found.method_margin, abs=1e-4)
    assert found.reference_distance < 1e-4 and found.distance == pytest.approx(found.ar_margin, abs=1e-4)
    # In fp32 a swap of two logits a real margin apart is no rounding: (c) fails.
    assert found.kind == "algorithmic" and found.reason.startswith("(c)")
    bound = divergence.DISTANCE_FACTOR * found.reference_distance + divergence.DISTANCE_SLACK
    assert found.distance > found.allowed == pytest.approx(bound)  # the bound it failed, reported
    monkeypatch.setattr(divergence, "DISTANCE_SLACK", found.distance + 1e-3)  # were rounding that coarse
    assert prove_divergence(honest, ar, ids, expected, tokens, 8).kind == "numerical"
    liar = _FlipsAtCloseCall(qwen_target, at=3, honest=False)
    dishonest = prove_divergence(liar, ar, ids, expected, tokens, 8)
    assert dishonest.kind == "algorithmic" and dishonest.reason.startswith("(a)") and dishonest.method_margin < 0
    lying_ar = prove_divergence(ar, liar, ids, tokens, expected, 8)  # the roles swapped: the reference lies
    assert lying_ar.kind == "algorithmic" and lying_ar.reason.startswith("(b)") and lying_ar.ar_margin < 0


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


def test_an_acceptance_bug_in_a_chain_is_algorithmic(qwen_target, trained_drafter, monkeypatch):
    drafter, _ = trained_drafter(qwen_target)
    monkeypatch.setattr(chain_verify, "accepted_prefix", _keeps_one_past_the_first_mismatch)
    decoders = {m: build_decoder(m, qwen_target, drafter) for m in ("ar", "domino")}
    s = _summary(qwen_target, decoders)["domino"]
    assert s["lossless"] is False and s["divergences"]["algorithmic"] >= 1


def test_a_chain_that_accepts_a_close_runner_up_violates_its_own_argmax(qwen_target, trained_drafter, monkeypatch):
    drafter, _ = trained_drafter(qwen_target)
    monkeypatch.setattr(chain_verify.MatchVerifier, "__call__", accepts_within(0.5))
    decoders = {m: build_decoder(m, qwen_target, drafter) for m in ("ar", "domino")}
    s = _summary(qwen_target, decoders)["domino"]
    assert s["own_argmax_violations"] >= 1 and s["lossless"] is False


def test_a_tree_walk_that_takes_a_close_sibling_is_algorithmic(qwen_target, trained_drafter, monkeypatch):
    drafter, _ = trained_drafter(qwen_target)
    monkeypatch.setitem(tree_verify.TREE_WALKS, "match", takes_a_close_sibling(0.5))
    decoders = {m: build_decoder(m, qwen_target, drafter, tree=TreeOptions(budget=6)) for m in ("ar", "ddtree")}
    s = _summary(qwen_target, decoders)["ddtree"]
    assert s["lossless"] is False and s["divergences"]["algorithmic"] >= 1 and s["own_argmax_violations"] >= 1


def test_a_tree_mask_that_shows_a_node_its_sibling_is_algorithmic(qwen_target, trained_drafter, monkeypatch):
    drafter, seqs = trained_drafter(qwen_target)  # prompts from its training rows: it accepts most drafts
    mask = speculative.tree_attention_mask
    planted = lambda n, v, *a: mask(n, sees_a_sibling(v), *a)  # noqa: E731
    monkeypatch.setattr(speculative, "tree_attention_mask", planted)
    ar = build_decoder("ar", qwen_target)
    # A budget past the drafter's confident chain, so that the accepted path's nodes have siblings.
    tree = build_decoder("dominotree", qwen_target, drafter, DecodeOptions(stop_token_ids=[]), TreeOptions(budget=16))
    proofs = []
    for row in range(len(seqs)):
        prompt = seqs[row, : 5 + 3 * row].tolist()
        expected, got = ar.generate(prompt, 30).tokens, tree.generate(prompt, 30)
        # Every token is the argmax of the (wrong) logits it came from: only the replayed proof can tell.
        assert got.stats.own_argmax_violations == 0
        proofs.append(prove_divergence(tree, ar, prompt, expected, got.tokens, 30))
    found = [p for p in proofs if p is not None]
    assert found and all(p.kind == "algorithmic" and p.reason.startswith("(c)") for p in found), found


def _lean(target):
    """The tiny target on the lean engine (batched decoding needs it)."""
    return install_engine(tiny_target(target.name.removeprefix("tiny-")), engine="lean", prepack=False)


def test_a_batched_row_is_proven_from_the_logits_its_batch_captured(qwen_target, monkeypatch):
    """Planted in the batched `ar` only: at output 3 every row commits the runner-up, with the two logits
    swapped (its own argmax stays its token). The rows keep the logits where they part from batch-1 `ar`
    (no batch-1 replay), and the plain reference runs in the batch's shape."""
    target = _lean(qwen_target)
    ar = build_decoder("ar", target, options=DecodeOptions(stop_token_ids=[]))
    prompts = [target.chat_ids([{"role": "user", "content": text}]) for text in ("hello", "2 + 2 =", "def f(x):")]
    expected = [ar.generate(p, 8).tokens for p in prompts]
    judge = batched_rules.ARRule.judge

    def flips_at_3(self, state, draft, logits, features):
        verdict = judge(self, state, draft, logits, features)
        if 8 - state.tokens_left == 3:
            swapped = logits.clone()
            first, second = swapped[0].topk(2).indices.tolist()
            swapped[0, [first, second]] = swapped[0, [second, first]]
            verdict = Verdict(tokens=[second], features=features, logits=swapped)
        return verdict

    monkeypatch.setattr(batched_rules.ARRule, "judge", flips_at_3)
    gens = BatchedDecoder(ar, 2).generate(prompts, 8, references=expected)
    monkeypatch.setattr(batched_rules.ARRule, "judge", judge)  # the batched ar that bounds rounding is correct
    for i, (prompt, want, gen) in enumerate(zip(prompts, expected, gens, strict=True)):
        assert gen.tokens[:3] == want[:3] and gen.tokens[3] != want[3]
        alone = 1 if i == 2 else 2  # the third prompt runs after the first two, alone: the forward runs its row only
        assert (gen.probe.position, gen.probe.width, gen.probe.batch_rows, gen.probe.batch_width) == (3, 1, alone, 1)
        args = (ar, ar, prompt, want, gen.tokens, 8)
        found = prove_divergence(*args, captured=gen.probe, batched=True)
        assert found.position == 3 and found.method_margin > 0 and found.reference_distance < 1e-4
        assert found.kind == "algorithmic" and found.reason.startswith("(c)"), found  # a real margin, swapped

        def rows(around, i=i):
            return divergence.batched_ar_rows(ar, 2, prompts, expected, i, around)

        bounded = prove_divergence(*args, captured=gen.probe, batched=True, batch=rows)
        assert bounded.kind == "algorithmic" and bounded.batch_distance < 1e-4, bounded  # batched ar rounds finely

        def coarse(around, far=found.distance):  # were batched ar's logits that far from batch 1's
            return {q: row + far for q, row in rows(around).items()}

        proof = prove_divergence(*args, captured=gen.probe, batched=True, batch=coarse)
        assert proof.kind == "numerical" and proof.batch_distance >= found.distance * 0.99, proof
        monkeypatch.setattr(divergence, "DISTANCE_SLACK", found.distance + 1e-3)  # were rounding that coarse
        unused = prove_divergence(*args, captured=gen.probe, batched=True, batch=lambda around: 1 / 0)
        assert unused.kind == "numerical" and unused.batch_distance is None  # replayed only where needed
        monkeypatch.setattr(divergence, "DISTANCE_SLACK", 1e-4)
        missing = prove_divergence(*args, batched=True)
        assert missing.kind == "algorithmic" and "captured no logits" in missing.reason


def test_a_tree_mask_bug_in_a_batch_is_algorithmic(qwen_target, trained_drafter, monkeypatch):
    """A tree whose nodes see a sibling, decoded at concurrency 2: the outputs part from batch-1 `ar`, every
    committed token is its own logits' argmax, and the proof from the captured rows fails (c)."""
    drafter, seqs = trained_drafter(qwen_target)
    target = _lean(qwen_target)
    lean_drafter = DominoDrafter(drafter.config)
    lean_drafter.load_state_dict(drafter.state_dict())
    lean_drafter.bind_target(target.embed_tokens, target.lm_head)
    options = DecodeOptions(stop_token_ids=[])
    ar = build_decoder("ar", target, options=options)
    tree = build_decoder("dominotree", target, lean_drafter, options, TreeOptions(budget=16))
    monkeypatch.setattr(TreeDecoder, "verify_window", sibling_seeing_windows(TreeDecoder.verify_window))
    prompts = [seqs[row, : 5 + 3 * row].tolist() for row in range(len(seqs))]
    expected = [ar.generate(p, 30).tokens for p in prompts]
    gens = BatchedDecoder(tree, 2).generate(prompts, 30, references=expected)
    proofs = []
    for i, (prompt, want, gen) in enumerate(zip(prompts, expected, gens, strict=True)):
        assert gen.stats.own_argmax_violations == 0

        def rows(around, i=i):
            return divergence.batched_ar_rows(ar, 2, prompts, expected, i, around)

        proof = prove_divergence(tree, ar, prompt, want, gen.tokens, 30, captured=gen.probe, batched=True, batch=rows)
        proofs.append(proof)
    found = [p for p in proofs if p is not None]
    assert found and all(p.kind == "algorithmic" and p.reason.startswith("(c)") for p in found), found
    assert all(p.batch_distance < 1e-4 for p in found), found  # batched ar, replayed, bounds nothing away


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_the_plain_reference_of_a_batched_row_has_the_batch_s_key_span(arch):
    """A row verified next to a longer row attends over the longer row's span, and the attention kernel
    may round by span (here it did, by 4e-7, when this was written): the proof's plain forward reproduces
    the batch's rows, width and span, so over the same prefix it gives the captured logits bit for bit; a
    refill's prefill is reproduced from its own rows and width alone."""
    target = install_engine(tiny_target(arch), engine="lean", prepack=False)
    g = torch.Generator().manual_seed(0)
    prefix, long, tok = (torch.randint(0, 256, (n,), generator=g) for n in (7, 90, 1))
    cache = target.new_ragged_cache(2, 200)
    first = target.prefill_ragged([prefix, None], cache).logits[0, 0]
    target.prefill_ragged([None, long], cache)
    window = RaggedWindow.stack([divergence._Plain(tok), divergence._Plain(tok)])
    captured = target.forward_ragged(window, cache).logits[0, 0]
    sequence = [*prefix.tolist(), *tok.tolist(), 0]
    probe = LogitsProbe(8, width=1, row=0, batch_rows=2, batch_width=1, batch_span=long.numel() + 1)
    plain, start = divergence._plain_rows(target, sequence, 7, probe)
    assert start == 7 and torch.equal(plain[0], captured.float())
    refill = LogitsProbe(0, width=7, row=6, batch_rows=1, batch_width=7, batch_span=7)
    assert torch.equal(divergence._plain_rows(target, sequence, 6, refill, prefill=True)[0][0], first.float())


def test_the_plain_reference_of_a_packed_batch_runs_as_many_real_tokens():
    """A ragged verify runs its real tokens packed, and a linear's kernel may round by its row count: the
    proof's plain forward fills the other rows up to the batch's real tokens (here row 0's 1 token next
    to a 3-token row: 4 tokens, not 1 or 6), and gives the captured logits bit for bit."""
    target = install_engine(tiny_target("qwen3"), engine="lean", prepack=False)
    g = torch.Generator().manual_seed(1)
    prefix, other, tok, three = (torch.randint(0, 256, (n,), generator=g) for n in (7, 9, 1, 3))
    cache = target.new_ragged_cache(2, 64)
    target.prefill_ragged([prefix, None], cache)  # the prefix as the proof prefills it: alone
    target.prefill_ragged([None, other], cache)
    window = RaggedWindow.stack([divergence._Plain(tok), divergence._Plain(three)])
    captured = target.forward_ragged(window, cache).logits[0, 0]
    sequence = [*prefix.tolist(), *tok.tolist(), 0]
    probe = LogitsProbe(8, width=1, row=0, batch_rows=2, batch_width=3, batch_span=other.numel() + 3, batch_tokens=4)
    assert divergence._fillers(probe, 1) == [3]
    wide = LogitsProbe(8, width=1, row=0, batch_rows=4, batch_width=3, batch_tokens=6)
    assert divergence._fillers(wide, 1) == [3, 1, 1]  # every other row at least one token, none past the width
    plain, start = divergence._plain_rows(target, sequence, 7, probe)
    assert start == 7 and torch.equal(plain[0], captured.float())
