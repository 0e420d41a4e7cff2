"""The fixed-width path of `engine: graphed` (`inference.targets.graphed_forward`), run uncaptured on the
CPU: padded steps over the whole storage under a mask give the lean loop's logits, features, cache and
tokens, on prefill, steps, chain and tree windows, sliding windows and batches; on a GPU the captured
graphs must decode what the lean loop decodes."""

import pytest
import torch

from inference import DominoDrafter
from inference.decoding import DecodeOptions, build_decoder
from inference.decoding.tree.draft_tree import tree_attention_mask
from inference.targets.engine import engine_report, install_engine
from inference.targets.graphed_forward import WIDTHS, GraphedForward
from inference.targets.tiny import tiny_target


def _graphed(arch: str, capture: bool = False):
    target = install_engine(tiny_target(arch), engine="lean", prepack=False)
    target.lean = GraphedForward(target.lean, capture=capture)
    return target


def _ids(n: int, seed: int, batch: int = 1) -> torch.Tensor:
    return torch.randint(0, 256, (batch, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_fixed_width_steps_match_the_lean_loop(arch):
    lean, graphed = install_engine(tiny_target(arch), engine="lean", prepack=False), _graphed(arch)
    lean_cache, cache = lean.new_cache(capacity=64), graphed.new_cache(capacity=64)
    layers = [0, 3, 5]
    for i, n in enumerate([40, 1, 3, 1, 16, 5, 2]):  # 40: prefill runs the loop eagerly
        ids = _ids(n, i)
        ref = lean(ids, cache=lean_cache, layer_ids=layers)
        out = graphed(ids, cache=cache, layer_ids=layers)
        torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out.features, ref.features, rtol=1e-5, atol=1e-5)
        assert graphed.cache_length(cache) == lean.cache_length(lean_cache)
    n = cache.length
    torch.testing.assert_close(cache.keys[:, :, :, :n], lean_cache.keys[:, :, :, :n], rtol=1e-5, atol=1e-5)
    last = graphed(_ids(3, 99), cache=cache, last_logits_only=True).logits
    assert last.shape == (1, 1, graphed.config.vocab_size)
    steps = graphed.lean._steps
    assert {key[4] for key in steps} <= set(WIDTHS) and len(steps) == len(set(steps))


def test_a_tree_window_its_compaction_and_a_padded_batch_match_the_lean_loop():
    lean, graphed = install_engine(tiny_target("qwen3"), engine="lean", prepack=False), _graphed("qwen3")
    caches = [lean.new_cache(), graphed.new_cache()]
    for model, cache in zip((lean, graphed), caches, strict=True):
        model(_ids(9, 1), cache=cache)
    visible = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]], dtype=torch.bool)
    positions = torch.tensor([[9, 10, 10, 11]])
    mask = tree_attention_mask(9, visible, torch.float32)
    pair = list(zip((lean, graphed), caches, strict=True))
    outs = [m(_ids(4, 2), cache=c, position_ids=positions, attention_mask=mask) for m, c in pair]
    torch.testing.assert_close(outs[1].logits, outs[0].logits, rtol=1e-5, atol=1e-5)
    for model, cache in pair:
        model.compact_cache(cache, 9, torch.tensor([0, 2, 3]))
    after = [m(_ids(1, 3), cache=c).logits for m, c in pair]
    torch.testing.assert_close(after[1], after[0], rtol=1e-5, atol=1e-5)

    pad = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])  # row 0 left-padded by two
    ids = _ids(6, 4, batch=2)
    batch_caches = [lean.new_cache(), graphed.new_cache()]
    ref = lean(ids, cache=batch_caches[0], attention_mask=pad)
    got = graphed(ids, cache=batch_caches[1], attention_mask=pad)
    torch.testing.assert_close(got.logits[1], ref.logits[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.logits[0, 2:], ref.logits[0, 2:], rtol=1e-5, atol=1e-5)
    step = torch.cat([pad, torch.ones(2, 1, dtype=pad.dtype)], dim=1)
    ref = lean(_ids(1, 5, batch=2), cache=batch_caches[0], attention_mask=step)
    got = graphed(_ids(1, 5, batch=2), cache=batch_caches[1], attention_mask=step)
    torch.testing.assert_close(got.logits, ref.logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["ar", "domino", "dominotree"])
def test_every_method_on_the_fixed_width_path_emits_the_lean_tokens(method, trained_drafter):
    lean = install_engine(tiny_target("qwen3"), engine="lean", prepack=False)
    trained, seqs = trained_drafter(lean)
    drafter = DominoDrafter(trained.config)  # a copy: the trained drafter is shared between tests
    drafter.load_state_dict(trained.state_dict())
    options = DecodeOptions(stop_token_ids=[])
    prompts = [seqs[row, : 5 + 3 * row] for row in range(2)]
    expected = [build_decoder("ar", lean, options=options).generate(p, 30).tokens for p in prompts]
    graphed = _graphed("qwen3")
    drafter.bind_target(graphed.embed_tokens, graphed.lm_head)
    decoder = build_decoder(method, graphed, None if method == "ar" else drafter, options)
    assert [decoder.generate(p, 30).tokens for p in prompts] == expected


def test_graphed_needs_cuda_and_reports_its_captures():
    with pytest.raises(ValueError, match="engine=graphed captures CUDA graphs"):
        install_engine(tiny_target("qwen3"), engine="graphed", prepack=False)
    target = _graphed("qwen3")
    target.engine = "graphed"
    report = engine_report(target)
    assert report["engine"] == "graphed" and report["graphs"] == {"captured": 0, "capture_seconds": 0.0}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_captured_graphs_decode_what_the_lean_loop_decodes():
    lean, graphed = tiny_target("qwen3"), tiny_target("qwen3")
    lean.model.cuda(), graphed.model.cuda()
    install_engine(lean, engine="lean", prepack=False)
    install_engine(graphed, engine="graphed", prepack=False)
    assert graphed.engine == "graphed"
    options = DecodeOptions(stop_token_ids=[])
    prompt = _ids(12, 7)[0].cuda()
    expected = build_decoder("ar", lean, options=options).generate(prompt, 40).tokens
    for _ in range(2):  # the second prompt replays the first one's graphs
        assert build_decoder("ar", graphed, options=options).generate(prompt, 40).tokens == expected
    assert graphed.lean.captured == 1
