"""The static-buffer paths (replayed as CUDA graphs on GPUs) compute exactly what the eager code computes."""

import pytest
import torch

from inference.decoding.chain.decoder import draft_chain
from inference.decoding.chain.rollout import GreedyChainRollout
from inference.decoding.tree.build import best_first, build_dominotree_reference
from inference.decoding.tree.expander import FastDominoExpander
from inference.kernels.cuda_graph import use_cuda_graphs


def _block(drafter, target, seed, device="cpu"):
    ids = torch.randint(0, 256, (1, 17), generator=torch.Generator().manual_seed(seed)).to(device)
    cache = drafter.new_cache(1, 40)
    drafter.append_context(cache, target(ids, layer_ids=drafter.config.target_layer_ids).features)
    root = ids[:, -1]
    hidden = drafter.draft_hidden_slice(drafter.draft_block(cache, root))[0]
    return cache, hidden, drafter.lm_head(hidden), root


@pytest.mark.parametrize("prefix", [0, 1, 3])
@torch.inference_mode()
def test_static_chain_rollout_equals_draft_chain(qwen_target, prefix, make_drafter):
    drafter = make_drafter(qwen_target, block_size=8, pure_draft_prefix_len=prefix).eval()
    rollout = GreedyChainRollout(drafter)
    for seed in range(4):
        cache, hidden, base, root = _block(drafter, qwen_target, seed)
        expected = draft_chain(drafter, cache, root, drafter.config.num_draft_tokens, use_head=True).tokens
        assert torch.equal(rollout(hidden, base, root), expected)


def test_cuda_graph_modes():
    assert use_cuda_graphs("off", "cuda") is False and use_cuda_graphs("auto", "cpu") is False
    with pytest.raises(ValueError, match="needs a CUDA device"):
        use_cuda_graphs("on", "cpu")
    with pytest.raises(ValueError, match="must be one of"):
        use_cuda_graphs("sometimes", "cpu")


@pytest.mark.gpu
@torch.inference_mode()
def test_graphed_tree_and_chain_equal_eager_on_cuda(qwen_target, trained_drafter):
    cpu_drafter, _ = trained_drafter(qwen_target)
    target_model = qwen_target.model.to("cuda")
    try:
        drafter = cpu_drafter.to("cuda")
        drafter.bind_target(qwen_target.embed_tokens, qwen_target.lm_head)
        eager = FastDominoExpander(drafter, 16, 4, 16, cuda_graph=False)
        graph = FastDominoExpander(drafter, 16, 4, 16, cuda_graph=True)
        chain_eager, chain_graph = GreedyChainRollout(drafter), GreedyChainRollout(drafter, cuda_graph=True)
        for seed in range(3):
            _, hidden, base, root = _block(drafter, qwen_target, seed, "cuda")
            d = hidden.shape[0]
            ref = build_dominotree_reference(drafter.head, drafter.embed, hidden, base, root, 1, 16, 16, 4)
            assert best_first(eager.prepare(hidden, base, root), 16, d) == ref
            assert best_first(graph.prepare(hidden, base, root), 16, d) == ref
            assert torch.equal(chain_graph(hidden, base, root), chain_eager(hidden, base, root))
    finally:
        target_model.to("cpu")
        cpu_drafter.to("cpu")
