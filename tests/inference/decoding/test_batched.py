"""`BatchedDecoder` (inference/decoding/batched.py) on the fp32 tiny targets (lean engine): 5 prompts of
different lengths and token limits, some ended early by stop tokens, decoded at concurrency 1, 2 and 3
(so finished rows are refilled while the others go on, and a draining batch's forwards run its live rows
alone, moved to its first rows) with one ragged target forward per round, give
every prompt exactly its batch-1 `decoder.generate` tokens, finish reason and accept lengths, for `ar`,
the chains and the trees (fixed budgets), with the rows' drafter blocks drafted in one forward (and the
chains' rollouts in one); a planted
crop bug is caught; what cannot batch is refused."""

from __future__ import annotations

import pytest
import torch

from inference import DominoDrafter
from inference.decoding import DecodeOptions, TreeOptions, batched, build_decoder
from inference.decoding.batched import BatchedDecoder, prefill_groups
from inference.decoding.chain import decoder as chain_decoder
from inference.decoding.cost_model import VerifyCurve
from inference.decoding.logits_probe import LogitsProbe
from inference.targets.adapter import TargetModel
from inference.targets.engine import install_engine
from inference.targets.ragged_cache import RaggedKVCache, RowCache
from inference.targets.tiny import tiny_target

# Rows of the trained drafter's sequences whose continuations change token within the limit (where drafts
# are partly accepted; the tiny targets repeat a token for a while, where whole blocks are accepted).
PROMPT_ROWS_AND_LENGTHS = [(1, 9), (4, 10), (6, 12), (0, 9), (7, 11)]
MAX_NEW_TOKENS = [20, 16, 30, 12, 26]
CASES = [("ar", None), ("dflash", None), ("domino", None), ("ddtree", 4), ("ddtree", 8), ("dominotree", 4)]
CASES += [("dominotree", 8)]

_SETUPS: dict[str, tuple[TargetModel, DominoDrafter, list[torch.Tensor], list[int]]] = {}


def _setup(any_tiny_target, trained_drafter) -> tuple[TargetModel, DominoDrafter, list[torch.Tensor], list[int]]:
    """The lean copy of the tiny target, the trained drafter bound to it, the 5 prompts and stop tokens that
    end some of their outputs early (once per arch)."""
    arch = any_tiny_target.name.removeprefix("tiny-")
    if arch not in _SETUPS:
        trained, seqs = trained_drafter(any_tiny_target)
        target = install_engine(tiny_target(arch), engine="lean", prepack=False)
        drafter = DominoDrafter(trained.config)  # a copy: binding to another target rebinds its shared weights
        drafter.load_state_dict(trained.state_dict())
        drafter.bind_target(target.embed_tokens, target.lm_head)
        prompts = [seqs[row, :length] for row, length in PROMPT_ROWS_AND_LENGTHS]
        plain = build_decoder("ar", target, options=DecodeOptions(stop_token_ids=[]))
        outputs = [plain.generate(p, m).tokens for p, m in zip(prompts, MAX_NEW_TOKENS, strict=True)]
        stops = sorted({_first_change(outputs[0]), _first_change(outputs[2])})
        _SETUPS[arch] = (target, drafter, prompts, stops)
    return _SETUPS[arch]


def _first_change(tokens: list[int]) -> int:
    """The first token of an output that differs from all before it (past the first two): a stop token
    that ends this output early but not on its first token."""
    for k in range(2, len(tokens)):
        if tokens[k] not in tokens[:k]:
            return tokens[k]
    raise AssertionError(f"no token change to stop at in {tokens}")


def _decoder(target, drafter, method: str, budget: int | None, stops: list[int]):
    options = DecodeOptions(stop_token_ids=stops)
    tree = None if budget is None else TreeOptions(budget=budget)
    return build_decoder(method, target, None if method == "ar" else drafter, options, tree)


@pytest.mark.parametrize(("method", "budget"), CASES)
def test_every_row_decodes_what_batch_1_decodes(any_tiny_target, trained_drafter, method, budget, monkeypatch):
    target, drafter, prompts, stops = _setup(any_tiny_target, trained_drafter)
    shared = []  # rows per shared backbone forward
    blocks = DominoDrafter.draft_blocks

    def counted(self, caches, roots):
        shared.append(len(caches))
        return blocks(self, caches, roots)

    monkeypatch.setattr(DominoDrafter, "draft_blocks", counted)
    computed = []  # rows per verify forward
    forward = TargetModel.forward_ragged

    def verified(self, window, cache, layer_ids=None, rows=None):
        computed.append(cache.batch if rows is None else rows)
        return forward(self, window, cache, layer_ids, rows)

    monkeypatch.setattr(TargetModel, "forward_ragged", verified)
    chained = []  # rows per chain rollout
    chains = chain_decoder.draft_chains

    def rolled(drafter, hidden, *args, **kwargs):
        chained.append(hidden.shape[0])
        return chains(drafter, hidden, *args, **kwargs)

    monkeypatch.setattr(chain_decoder, "draft_chains", rolled)
    decoder = _decoder(target, drafter, method, budget, stops)
    expected = [decoder.generate(p, m) for p, m in zip(prompts, MAX_NEW_TOKENS, strict=True)]
    reasons = [g.finish_reason for g in expected]
    assert "stop" in reasons and "length" in reasons  # stop tokens end some rows early, limits the others
    assert any(len(g.tokens) < m for g, m in zip(expected, MAX_NEW_TOKENS, strict=True) if g.finish_reason == "stop")
    lengths = [k for g in expected for k in g.stats.accept_lengths]
    if method != "ar":  # the trained drafter: rejected, partly and fully accepted drafts all occur
        assert 1 in lengths and max(lengths) > 2, lengths
    for concurrency in (1, 2, 3):
        got = BatchedDecoder(decoder, concurrency).generate(prompts, MAX_NEW_TOKENS)
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            where = (method, budget, concurrency, i)
            assert g.tokens == e.tokens, where
            assert g.finish_reason == e.finish_reason, where
            assert g.stats.accept_lengths == e.stats.accept_lengths, where
            assert g.stats.draft_sizes == e.stats.draft_sizes, where
            assert g.stats.output_tokens == len(e.tokens) and g.stats.prompt_tokens == e.stats.prompt_tokens, where
            assert g.stats.own_argmax_violations == 0, where
            walk = ("main_steps", "main_accepted", "sibling_steps", "sibling_accepted")
            assert [getattr(g.stats, k) for k in walk] == [getattr(e.stats, k) for k in walk], where
        if method != "ar" and concurrency > 1:  # the rows' blocks were drafted together
            assert shared and max(shared) == concurrency, (where, shared)
        if method in ("dflash", "domino"):  # the rows' chains were rolled out together
            assert max(chained) == concurrency, (where, chained)
        if concurrency == 3:  # a draining batch's forwards run its live rows alone (moved first)
            assert max(computed) == 3 and min(computed) < 3, (where, computed)
        shared.clear()
        computed.clear()
        chained.clear()


def test_prefill_groups_keep_the_padding_small():
    assert prefill_groups({0: 600, 1: 40, 2: 38, 3: 45}) == [[0], [3, 1, 2]]  # not four rows of 600 columns
    assert prefill_groups({2: 12, 5: 10}) == [[2, 5]]  # short prompts share a forward: padding costs less
    assert prefill_groups({}) == []


@pytest.mark.parametrize(("method", "budget"), [("ar", None), ("dominotree", 4)])
def test_refills_prefilled_in_groups_decode_what_batch_1_decodes(
    qwen_target, trained_drafter, method, budget, monkeypatch
):
    """With no padding allowed, a refill of prompts of 9-12 tokens runs one prefill per length; every row
    still decodes its batch-1 output."""
    target, drafter, prompts, stops = _setup(qwen_target, trained_drafter)
    monkeypatch.setattr(batched, "PREFILL_SLACK", 1.0)
    monkeypatch.setattr(batched, "PREFILL_ROOM", 0)
    prefills = []  # rows per prefill forward
    prefill = TargetModel.prefill_ragged

    def counted(self, prompts, cache, layer_ids=None):
        prefills.append(sum(p is not None for p in prompts))
        return prefill(self, prompts, cache, layer_ids)

    monkeypatch.setattr(TargetModel, "prefill_ragged", counted)
    decoder = _decoder(target, drafter, method, budget, stops)
    expected = [decoder.generate(p, m).tokens for p, m in zip(prompts, MAX_NEW_TOKENS, strict=True)]
    prefills.clear()
    got = BatchedDecoder(decoder, 3).generate(prompts, MAX_NEW_TOKENS)
    assert [g.tokens for g in got] == expected
    assert prefills[:3] == [1, 1, 1]  # the first refill: prompts of 9, 10 and 12 tokens, one forward each


def test_a_run_counts_its_prefill_seconds_apart_from_its_rounds(qwen_target, trained_drafter, monkeypatch):
    """Each prefill forward (here 1 s on a clock nothing else moves) is counted in `prefill_s`, reset per run:
    the run's decode seconds are the rest of its wall time (`inference.eval.concurrency`)."""
    target, drafter, prompts, stops = _setup(qwen_target, trained_drafter)
    decoder = _decoder(target, drafter, "ar", None, stops)
    clock = decoder.clock = _StillClock()
    prefill = TargetModel.prefill_ragged

    def slow(self, prompts, cache, layer_ids=None):
        clock.t += 1.0
        return prefill(self, prompts, cache, layer_ids)

    monkeypatch.setattr(TargetModel, "prefill_ragged", slow)
    runner = BatchedDecoder(decoder, 2)
    runner.generate(prompts, MAX_NEW_TOKENS)
    assert runner.prefill_s == clock.t >= 2.0  # at least the first two rows' prefill and one refill
    clock.t = 0.0
    runner.generate(prompts[:1], MAX_NEW_TOKENS[:1])
    assert runner.prefill_s == 1.0


class _StillClock:
    """A clock that moves only when a test moves it."""

    exact = True
    t = 0.0

    def now(self) -> float:
        return self.t


def test_a_row_crop_that_keeps_one_stale_entry_is_caught(qwen_target, trained_drafter, monkeypatch):
    """Planted bug: each row keeps one entry past what it accepted (a rejected draft's K/V stays visible).
    The equality check above would see it."""
    target, drafter, prompts, stops = _setup(qwen_target, trained_drafter)
    decoder = _decoder(target, drafter, "dflash", None, stops)
    expected = [decoder.generate(p, m).tokens for p, m in zip(prompts, MAX_NEW_TOKENS, strict=True)]
    assert BatchedDecoder(decoder, 2).generate(prompts, MAX_NEW_TOKENS)[0].tokens == expected[0]

    def sloppy_crop(self: RowCache, length: int) -> None:
        self.ragged.crop(self.row, min(length + 1, self.length))

    monkeypatch.setattr(RowCache, "crop", sloppy_crop)
    got = [g.tokens for g in BatchedDecoder(decoder, 2).generate(prompts, MAX_NEW_TOKENS)]
    assert got != expected


def test_the_first_token_can_end_a_prompt_and_generators_are_per_prompt(qwen_target, trained_drafter):
    """A prompt whose limit is 1 ends on its prefill token and frees its row at once (the next is
    refilled in the same wave); sampled rows draw from their own generators as batch 1 does."""
    target, drafter, prompts, _ = _setup(qwen_target, trained_drafter)
    from inference.decoding.sampling import SamplingParams

    options = DecodeOptions(SamplingParams(temperature=0.8, top_k=4), verify="rejection", stop_token_ids=[])
    decoder = build_decoder("domino", target, drafter, options)
    limits = [1, 12, 1, 15, 10]
    expected = [
        decoder.generate(p, m, torch.Generator().manual_seed(i)).tokens
        for i, (p, m) in enumerate(zip(prompts, limits, strict=True))
    ]
    gens = [torch.Generator().manual_seed(i) for i in range(len(prompts))]
    got = BatchedDecoder(decoder, 2).generate(prompts, limits, gens)
    assert [g.tokens for g in got] == expected
    assert [len(g.tokens) for g in got][::2] == [1, 1, 10]


def test_row_cache_crops_and_compacts_only_its_row():
    cache = RaggedKVCache(num_layers=1, batch=2, kv_heads=1, head_dim=1, dtype=torch.float32, device="cpu", capacity=8)
    with torch.inference_mode():
        cache.keys[0, :, 0, :, 0] = torch.arange(16.0).view(2, 8)
    cache.lengths[:] = torch.tensor([6, 5])
    row = RowCache(cache, 1)
    TargetModel.compact_cache(row, 2, torch.tensor([0, 2]))
    assert TargetModel.cache_length(row) == 4 and cache.lengths.tolist() == [6, 4]
    assert cache.keys[0, 1, 0, :4, 0].tolist() == [8.0, 9.0, 10.0, 12.0]
    TargetModel.crop_cache(row, 3)
    assert cache.lengths.tolist() == [6, 3] and cache.keys[0, 0, 0, :6, 0].tolist() == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize(("method", "auto"), [("ddtree", "tree"), ("dominotree", "tree"), ("domino", "chain")])
def test_cost_aware_rows_size_their_drafts_across_the_batch_and_stay_ar(any_tiny_target, trained_drafter, method, auto):
    """`auto` at concurrency > 1 (`batch_budget.py`): each row's output is its batch-1 `ar` output and every
    committed token its own verify argmax, whatever sizes the batch chooses: on a flat verify curve (every
    draft but the negligible ones kept, up to the cap on a row's), a steep one (every round plain) and the one
    measured here."""
    target, drafter, prompts, stops = _setup(any_tiny_target, trained_drafter)
    options = DecodeOptions(stop_token_ids=stops, chain_window="auto" if auto == "chain" else None)
    tree = TreeOptions(budget="auto", max_budget=8) if auto == "tree" else None
    decoder = build_decoder(method, target, drafter, options, tree)
    plain = build_decoder("ar", target, options=DecodeOptions(stop_token_ids=stops))
    expected = [plain.generate(p, m).tokens for p, m in zip(prompts, MAX_NEW_TOKENS, strict=True)]
    decoder.batch_curves[2] = VerifyCurve([2, 64], [1.0, 1.0], 8)  # verifying is all that costs: draft all
    decoder.batch_curves[3] = VerifyCurve([1, 2], [1e-3, 1.0], 8)  # past one token, each costs 1000x the first
    for concurrency in (2, 3, 4):
        calibrate = concurrency == 4  # the hand-made curves are taken as given; the measured one is corrected
        got = BatchedDecoder(decoder, concurrency, calibrate=calibrate).generate(prompts, MAX_NEW_TOKENS)
        assert [g.tokens for g in got] == expected, (method, concurrency)
        assert all(g.stats.own_argmax_violations == 0 for g in got)
        sizes = [n for g in got for n in g.stats.draft_sizes]
        assert len(sizes) == sum(len(g.stats.accept_lengths) for g in got) and max(sizes) <= decoder.max_window() - 1
        if concurrency == 2:  # every draft kept up to the measured cap on a row's (`DraftCap`), but negligible ones
            assert 2 <= max(sizes) <= max(decoder.batch_caps[2].moves)
        if concurrency == 3:
            assert set(sizes) == {0}
    assert set(decoder.batch_curves) == {2, 3, 4}  # the one not given was measured
    assert set(decoder.batch_costs) == {4} and decoder.batch_costs[4].observations > 0


def test_prepare_measures_the_batch_curve_once_before_generate(qwen_target, trained_drafter, monkeypatch):
    """A caller that times `generate` calls `prepare` first: the curve is measured there, at the prompts'
    median length, and `generate` does not measure again."""
    import inference.decoding.batch_budget as batch_budget

    target, drafter, prompts, stops = _setup(qwen_target, trained_drafter)
    decoder = build_decoder(
        "ddtree", target, drafter, DecodeOptions(stop_token_ids=stops), TreeOptions(budget="auto", max_budget=8)
    )
    measured, measure = [], batch_budget.measure_batch_curve
    monkeypatch.setattr(batch_budget, "measure_batch_curve", lambda *a, **k: measured.append(a[2]) or measure(*a, **k))
    batched = BatchedDecoder(decoder, 2)
    batched.prepare(prompts)
    assert measured == [sorted(p.numel() for p in prompts)[2]]
    batched.generate(prompts, MAX_NEW_TOKENS)
    assert len(measured) == 1 and set(decoder.batch_curves) == {2}


def test_follow_is_batched_ar_teacher_forced_along_given_outputs(qwen_target, trained_drafter):
    """`follow` along batched `ar`'s own outputs runs its rounds and shapes: the logits row of every output
    position is, bit for bit, the one batched `ar` chose that token from (captured where a reference made
    the row keep it). Along other outputs every row commits what it is given (here: the prompts' batch-1
    outputs shifted by one token), whatever its argmax, and refills follow the given lengths."""
    target, _, prompts, _ = _setup(qwen_target, trained_drafter)
    ar = build_decoder("ar", target, options=DecodeOptions(stop_token_ids=[]))
    batched = BatchedDecoder(ar, 2)
    outputs = [g.tokens for g in batched.generate(prompts, MAX_NEW_TOKENS)]
    position = 5
    wrong = [o[:position] + [o[position] + 1] + o[position + 1 :] for o in outputs]
    captured = [g.probe for g in batched.generate(prompts, MAX_NEW_TOKENS, references=wrong)]
    probes = [LogitsProbe(0, range(len(o))) for o in outputs]
    batched.follow(prompts, outputs, probes)
    for probe, output, kept in zip(probes, outputs, captured, strict=True):
        assert sorted(probe.rows) == list(range(len(output)))
        assert [row.argmax().item() for row in probe.rows.values()] == output
        assert torch.equal(probe.rows[position], kept.logits)
    shifted = [o[1:] + [o[0]] for o in outputs]
    probes = [LogitsProbe(0, range(len(o))) for o in shifted]
    batched.follow(prompts, shifted, probes)
    rows = [row for p in probes for row in p.rows.values()]
    assert any(row.argmax().item() != t for row, t in zip(rows, sum(shifted, []), strict=True))
    assert [sorted(p.rows) for p in probes] == [list(range(len(o))) for o in shifted]
    with pytest.raises(ValueError, match="follow replays batched ar"):
        BatchedDecoder(_decoder(target, trained_drafter(qwen_target)[0], "dflash", None, []), 2).follow(
            prompts, outputs, probes
        )
    with pytest.raises(ValueError, match="output 0 has 0 tokens"):
        batched.follow(prompts, [[]] + outputs[1:], probes)


def test_what_cannot_batch_is_refused(qwen_target, trained_drafter):
    target, drafter, _, _ = _setup(qwen_target, trained_drafter)
    with pytest.raises(ValueError, match="lean engine"):
        BatchedDecoder(build_decoder("ar", qwen_target), 2)
    with pytest.raises(ValueError, match="concurrency"):
        BatchedDecoder(build_decoder("ar", target), 0)
