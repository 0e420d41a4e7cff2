"""The ragged batched forward (`inference.targets.ragged_forward`) on tiny fp32 targets: rows of different
lengths prefilled, verifying chains, trees and lone roots, cropped, compacted, reset and refilled, all in
one forward per round, give every row what a batch-1 lean forward of the same window on a batch-1
`StaticKVCache` holding the same prefix gives; pad tokens never change a real row; and a widened tree
visibility is caught (the comparisons would see a mask bug)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, MistralConfig

from inference.decoding.speculative import VerifyWindow
from inference.decoding.tree.draft_tree import DraftTree, tree_attention_mask
from inference.targets.adapter import TargetModel
from inference.targets.engine import install_engine
from inference.targets.ragged_cache import RaggedKVCache
from inference.targets.ragged_forward import lean_of, ragged_mask
from inference.targets.ragged_window import RaggedWindow
from inference.targets.tiny import tiny_target

LAYERS = [0, 2, 3]
TOL = dict(rtol=1e-5, atol=1e-5)


def _target(arch: str) -> TargetModel:
    target = install_engine(tiny_target(arch), engine="lean", prepack=False)
    assert target.engine == "lean"
    return target


def _ids(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed))


def _chain(n: int, seed: int) -> VerifyWindow:
    return VerifyWindow(_ids(n, seed).unsqueeze(0))


def _tree(seed: int) -> VerifyWindow:
    """Root, two children (a, b) and a grandchild under a: window [root, a, b, g]."""
    tree = DraftTree()
    a, b, g = _ids(3, seed).tolist()
    tree.add(a, -1, 1, -0.1)
    tree.add(b, -1, 1, -0.2)
    tree.add(g, 0, 2, -0.3)
    ids = torch.tensor([[int(_ids(1, seed + 1000)), *tree.tokens]])
    return VerifyWindow(ids, torch.tensor(tree.window_depths()), tree.visibility())


def _reference(target: TargetModel, prefix: torch.Tensor, win: VerifyWindow) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits [n, V] and features [n, K*H] of `win` after `prefix`, batch 1 on a static cache."""
    cache = target.new_cache()
    if prefix.numel():
        target(prefix.unsqueeze(0), cache=cache)
    start = prefix.numel()
    positions = None if win.depths is None else (start + win.depths).unsqueeze(0)
    mask = None if win.visible is None else tree_attention_mask(start, win.visible, target.dtype)
    out = target(win.ids, cache=cache, position_ids=positions, attention_mask=mask, layer_ids=LAYERS)
    return out.logits[0], out.features[0]


def _check_round(target, out, windows, prefixes) -> None:
    """Every real row's logits and features at its real tokens equal its batch-1 reference."""
    for r, (win, prefix) in enumerate(zip(windows, prefixes, strict=True)):
        if win is None:
            continue
        n = win.ids.shape[1]
        logits, features = _reference(target, prefix, win)
        torch.testing.assert_close(out.logits[r, :n], logits, **TOL)
        torch.testing.assert_close(out.features[r, :n], features, **TOL)


def _prefill(target: TargetModel, prompts: list[torch.Tensor], capacity: int | None = None) -> RaggedKVCache:
    cache = target.new_ragged_cache(len(prompts), capacity)
    out = target.prefill_ragged(prompts, cache, layer_ids=LAYERS)
    assert cache.lengths.tolist() == [p.numel() for p in prompts]
    for r, prompt in enumerate(prompts):
        ref = target(prompt.unsqueeze(0), cache=target.new_cache(), layer_ids=LAYERS)
        torch.testing.assert_close(out.logits[r, 0], ref.logits[0, -1], **TOL)
        torch.testing.assert_close(out.features[r, : prompt.numel()], ref.features[0], **TOL)
    return cache


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_prefill_verify_commit_and_verify_again_match_batch_one(arch):
    target = _target(arch)
    prompts = [_ids(5, 1), _ids(9, 2), _ids(3, 3)]
    cache = _prefill(target, prompts, capacity=12)  # 9 + a 5-wide window passes 12: the storage grows
    seqs = list(prompts)

    tree = _tree(10)
    windows = [_chain(5, 11), tree, _chain(1, 12)]  # chain of 4 drafts, a tree, a lone root
    out = target.forward_ragged(RaggedWindow.stack(windows), cache, layer_ids=LAYERS)
    assert cache.capacity >= 14 and cache.lengths.tolist() == [10, 14, 8]
    assert out.logits.shape == (3, 5, target.config.vocab_size)
    _check_round(target, out, windows, seqs)

    starts = [s.numel() for s in seqs]
    cache.crop(0, starts[0] + 3)  # root + 2 accepted drafts
    cache.compact(1, starts[1], torch.tensor([0, 1, 3]))  # the path root -> a -> g
    cache.crop(2, starts[2] + 1)  # the root alone
    kept = [windows[0].ids[0, :3], windows[1].ids[0, [0, 1, 3]], windows[2].ids[0]]
    seqs = [torch.cat([s, k]) for s, k in zip(seqs, kept, strict=True)]
    assert cache.lengths.tolist() == [s.numel() for s in seqs]

    tree = _tree(20)
    windows = [tree, _chain(3, 21), _chain(2, 22)]
    out = target.forward_ragged(RaggedWindow.stack(windows, pad_id=7), cache, layer_ids=LAYERS)
    _check_round(target, out, windows, seqs)

    for r, seq in enumerate(seqs):  # the committed entries are those of the batch-1 prefill of the same tokens
        ref = target.new_cache()
        target(seq.unsqueeze(0), cache=ref)
        n = seq.numel()
        torch.testing.assert_close(cache.keys[:, r, :, :n], ref.keys[:, 0, :, :n], **TOL)
        torch.testing.assert_close(cache.values[:, r, :, :n], ref.values[:, 0, :, :n], **TOL)


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_a_reset_row_is_refilled_while_the_others_go_on(arch):
    target = _target(arch)
    prompts = [_ids(6, 31), _ids(4, 32), _ids(7, 33)]
    cache = _prefill(target, prompts)
    seqs = list(prompts)

    windows = [_chain(3, 34), _chain(1, 35), _chain(2, 36)]
    target.forward_ragged(RaggedWindow.stack(windows), cache)
    for r, win in enumerate(windows):  # every row accepts its whole chain
        cache.crop(r, seqs[r].numel() + win.ids.shape[1])
        seqs[r] = torch.cat([seqs[r], win.ids[0]])

    cache.reset(2)  # row 2 finished: its new prompt is its window, in the round the others verify in
    new_prompt = _ids(6, 37)
    tree = _tree(38)
    windows = [tree, _chain(2, 39), VerifyWindow(new_prompt.unsqueeze(0))]
    seqs[2] = torch.zeros(0, dtype=torch.long)
    out = target.forward_ragged(RaggedWindow.stack(windows), cache, layer_ids=LAYERS)
    _check_round(target, out, windows, seqs)
    cache.compact(0, seqs[0].numel(), torch.tensor([0, 2]))  # root -> b
    cache.crop(1, seqs[1].numel() + 1)
    cache.crop(2, new_prompt.numel())
    seqs = [torch.cat([seqs[0], windows[0].ids[0, [0, 2]]]), torch.cat([seqs[1], windows[1].ids[0, :1]]), new_prompt]

    cache.reset(1)  # row 1 finished: refilled by a prefill that leaves rows 0 and 2 as they are
    refill = _ids(5, 40)
    before = cache.lengths.clone()
    out = target.prefill_ragged([None, refill, None], cache, layer_ids=LAYERS)
    assert cache.lengths.tolist() == [before[0].item(), 5, before[2].item()]
    last = _reference(target, refill[:-1], VerifyWindow(refill[None, -1:]))[0][0]
    torch.testing.assert_close(out.logits[1, 0], last, **TOL)
    seqs[1] = refill

    windows = [_chain(2, 41), _tree(42), _chain(4, 43)]
    out = target.forward_ragged(RaggedWindow.stack(windows), cache, layer_ids=LAYERS)
    _check_round(target, out, windows, seqs)


def test_pad_tokens_never_change_a_real_row():
    """The same batch twice, the pads' ids, depths and claimed visibility changed: real rows bit-identical."""
    target = _target("qwen3")
    outs = []
    lengths = [4, 8, 2]
    for pad in (0, 299):
        cache = target.new_ragged_cache(3)
        first = target.prefill_ragged([_ids(n, 50 + n) for n in lengths], cache, layer_ids=LAYERS)
        prompt_real = torch.arange(8).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
        window = RaggedWindow.stack([_chain(5, 54), _tree(55), _chain(1, 56)], pad_id=pad)
        if pad:
            pads = ~window.valid
            window.depths[pads] = 3
            window.visible |= pads.unsqueeze(1)  # real queries "see" the pad columns: must be ignored
        second = target.forward_ragged(window, cache, layer_ids=LAYERS)
        real = window.valid
        outs.append((first.logits, first.features[prompt_real], second.logits[real], second.features[real]))
    for a, b in zip(*outs, strict=True):
        assert torch.equal(a, b)


def test_a_ragged_round_runs_only_its_real_tokens_through_the_linears():
    """Rows of 5, 1 and 4 real tokens padded to 5: every linear and the lm_head see 10 rows, not 15, the
    pad columns' logits are 0, and every real row still equals its batch-1 reference."""
    target = _target("qwen3")
    prompts = [_ids(4, 71), _ids(7, 72), _ids(2, 73)]
    cache = _prefill(target, prompts)
    lean = lean_of(target.lean)
    seen: dict[str, list[int]] = {"qkv": [], "down": [], "lm_head": []}

    def counting(name, module):
        def run(x):
            seen[name].append(x.reshape(-1, x.shape[-1]).shape[0])
            return module(x)

        return run

    first, last = lean.layers[0], lean.layers[-1]
    kept = first.qkv, last.down, lean.lm_head
    first.qkv, last.down, lean.lm_head = (counting(n, m) for n, m in zip(seen, kept, strict=True))
    windows = [_chain(5, 74), _chain(1, 75), _tree(76)]
    batch = RaggedWindow.stack(windows)
    out = target.forward_ragged(batch, cache, layer_ids=LAYERS)
    first.qkv, last.down, lean.lm_head = kept  # the references below run the loop as it was
    assert seen == {"qkv": [10], "down": [10], "lm_head": [10]}
    assert not out.logits[~batch.valid].any() and not out.features[~batch.valid].any()
    _check_round(target, out, windows, prompts)


def test_a_widened_tree_visibility_is_caught():
    """Sibling b must not see a: letting it changes b's logits (and only those of b), so a mask bug in the
    ragged forward would fail the comparisons above."""
    target = _target("qwen3")
    prompts = [_ids(5, 61), _ids(6, 62)]
    tree = _tree(63)
    wide = VerifyWindow(tree.ids, tree.depths, tree.visible.clone())
    wide.visible[2, 1] = True
    logits = []
    for win in (tree, wide):
        cache = target.new_ragged_cache(2)
        target.prefill_ragged(prompts, cache)
        logits.append(target.forward_ragged(RaggedWindow.stack([_chain(2, 64), win]), cache).logits[1])
    ref = _reference(target, prompts[1], tree)[0]
    torch.testing.assert_close(logits[0], ref, **TOL)
    torch.testing.assert_close(logits[1][[0, 1, 3]], ref[[0, 1, 3]], **TOL)
    assert not torch.allclose(logits[1][2], ref[2], rtol=1e-3, atol=1e-3)


def _mistral(window: int) -> TargetModel:
    torch.manual_seed(0)
    common = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=4, head_dim=16)
    config = MistralConfig(
        **common, num_attention_heads=4, num_key_value_heads=2, sliding_window=window, max_position_embeddings=512
    )
    config._attn_implementation = "sdpa"
    model = TargetModel(AutoModelForCausalLM.from_config(config), name=f"tiny-mistral-w{window}", mask_token_id=299)
    return install_engine(model, engine="lean", prepack=False)


def test_a_sliding_window_target_matches_batch_one_past_its_window():
    target = _mistral(4)
    assert target.lean.window == 4
    prompts = [_ids(7, 71), _ids(3, 72)]
    cache = _prefill(target, prompts)
    windows = [_tree(73), _chain(5, 74)]
    out = target.forward_ragged(RaggedWindow.stack(windows), cache, layer_ids=LAYERS)
    _check_round(target, out, windows, prompts)


def test_the_mask_shows_pads_only_themselves_and_the_cache_refuses_bad_edits():
    window = RaggedWindow.stack([_chain(3, 81), _chain(1, 82)])
    allowed = ragged_mask(torch.tensor([2, 4]), window, 7, None, torch.float32)[:, 0] == 0
    assert allowed[0].tolist()[:3] == [[1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0]]
    assert allowed[1].tolist() == [[1, 1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 1]]

    cache = RaggedKVCache(2, 2, 1, 4, torch.float32, "cpu", capacity=4)
    cache.lengths[0] = 3
    with pytest.raises(ValueError, match="cannot crop row 0"):
        cache.crop(0, 4)
    with pytest.raises(ValueError, match="reaches outside row 0"):
        cache.compact(0, 1, torch.tensor([0, 2]))
    cache.reset(0)
    assert cache.lengths.tolist() == [0, 0]
    with pytest.raises(ValueError, match="depths must be"):
        RaggedWindow(window.ids, window.depths[:, :1], window.visible, window.valid)
    with pytest.raises(ValueError, match="need the lean engine; target tiny-qwen3 runs on engine=hf"):
        tiny_target("qwen3").new_ragged_cache(2)


def test_a_refill_computes_only_its_rows():
    """Refilling one row of a busy batch runs that row alone: its logits and features are bit-identical to
    the same prompt's prefill on a one-row cache (the forward's shape, key span included, does not depend
    on the other rows), and the other rows' lengths and entries stay as they were."""
    target = _target("llama")
    cache = _prefill(target, [_ids(9, 50), _ids(3, 51), _ids(14, 52)])
    keys, values = cache.keys.clone(), cache.values.clone()
    cache.reset(1)
    refill = _ids(6, 53)
    out = target.prefill_ragged([None, refill, None], cache, layer_ids=LAYERS)
    alone = target.prefill_ragged([refill], target.new_ragged_cache(1), layer_ids=LAYERS)
    assert torch.equal(out.logits[1], alone.logits[0])
    assert torch.equal(out.features[1, :6], alone.features[0, :6])
    assert not out.logits[[0, 2]].any()
    assert cache.lengths.tolist() == [9, 6, 14]
    for r in (0, 2):
        assert torch.equal(cache.keys[:, r], keys[:, r]) and torch.equal(cache.values[:, r], values[:, r])


def test_a_draining_batch_runs_its_first_rows_alone_and_moves_rows_there():
    """A row moved to a free row (`RaggedKVCache.move`) keeps its entries and length; a forward over the
    first rows only (`rows=2`) gives them what the batch-1 reference gives, and the rows after them keep
    their lengths and entries."""
    target = _target("qwen3")
    prompts = [_ids(5, 60), _ids(9, 61), _ids(7, 62)]
    cache = _prefill(target, prompts)
    cache.reset(0)
    cache.move(2, 0)
    assert cache.lengths.tolist() == [7, 9, 0]
    keys = cache.keys.clone()
    windows = [_chain(3, 63), _tree(64)]
    out = target.forward_ragged(RaggedWindow.stack(windows), cache, layer_ids=LAYERS, rows=2)
    assert out.logits.shape[0] == 2 and cache.lengths.tolist() == [11, 13, 0]
    _check_round(target, out, windows, [prompts[2], prompts[1]])
    assert torch.equal(cache.keys[:, 2], keys[:, 2])
    with pytest.raises(ValueError, match="a ragged window of 2 rows on 3 cache rows"):
        target.forward_ragged(RaggedWindow.stack(windows), cache, rows=3)
