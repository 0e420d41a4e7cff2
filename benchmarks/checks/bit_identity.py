"""Stage 2: the CUDA-graph paths draft exactly what the eager paths draft, on Qwen3-4B-shaped drafters.

Per round (random context features, root and therefore block): `FastDominoExpander` replayed as CUDA
graphs vs the same expander eager, node for node, scores included; the eager one vs the reference
expander (`build_dominotree_reference`): in fp32 the same nodes in the same order, and scores within
`SCORE_TOL` wherever the nodes agree (the fast expander tabulates its GRU input projections and reads
every position's candidates in one product, which rounds differently; in bf16 the rounded GRU states may
order near-ties otherwise); and the chain of `draft_chain` vs `GreedyChainRollout` eager and graphed,
token for token. GPU run: bf16, 50 rounds, budgets 16 and 64, one draft layer (the tree and the chain
never see the backbone's depth). Dry run: the tiny Qwen3 shape, fp32, 3 rounds, graphs off (the
static-buffer code still runs).
"""

from __future__ import annotations

import torch
from tree_build import drafter_for

from checks.context import CheckFailed, Context, table
from inference.decoding.chain.decoder import draft_chain
from inference.decoding.chain.rollout import GreedyChainRollout
from inference.decoding.tree.build import best_first, build_dominotree_reference
from inference.decoding.tree.expander import FastDominoExpander

SCORE_TOL = 1e-3  # path log-probabilities, fast expander against the reference


def _round(drafter, seed: int, context: int, device: str):
    """One round's inputs: a draft cache over random features, its root, the block's hidden and base logits."""
    cfg = drafter.config
    g = torch.Generator(device=device).manual_seed(seed)
    cache = drafter.new_cache(1, context + cfg.block_size + 1)
    feats = torch.randn(1, context, cfg.num_context_features * cfg.hidden_size, device=device, generator=g)
    drafter.append_context(cache, feats.to(next(drafter.parameters()).dtype))
    root = torch.randint(0, cfg.vocab_size, (1,), device=device, generator=g)
    hidden = drafter.draft_hidden_slice(drafter.draft_block(cache, root))[0]
    return cache, root, hidden, drafter.lm_head(hidden)


@torch.inference_mode()
def run(ctx: Context) -> tuple[dict, list]:
    spec, rounds, budgets = ("tiny-qwen3", 3, [4, 16]) if ctx.dry_run else ("Qwen/Qwen3-4B", 50, [16, 64])
    graphs = [False] if ctx.dry_run else [False, True]
    drafter = drafter_for(spec, ctx.device, ctx.dtype).eval()
    cfg = drafter.config
    d = cfg.num_draft_tokens
    top_m, node_topk = 64, 8
    expanders = {
        (b, g): FastDominoExpander(drafter, top_m, node_topk, b, cuda_graph=g) for b in budgets for g in graphs
    }
    rollouts = {g: GreedyChainRollout(drafter, cuda_graph=g) for g in graphs}
    mismatches: dict[str, list[int]] = {}
    for r in range(rounds):
        cache, root, hidden, base = _round(drafter, 1000 + r, 64, ctx.device)
        chain = draft_chain(drafter, cache, root, d, use_head=True).tokens
        for g, rollout in rollouts.items():
            if not torch.equal(rollout(hidden, base, root), chain):
                mismatches.setdefault(f"chain {'graph' if g else 'eager'}", []).append(r)
        for b in budgets:
            ref = build_dominotree_reference(
                drafter.head,
                drafter.embed,
                hidden,
                base,
                root,
                cfg.pure_draft_prefix_len,
                b,
                top_m,
                node_topk,
                token_map=drafter.vocab.draft_to_target(),
            )
            eager = best_first(expanders[(b, False)].prepare(hidden, base, root), b, d)
            same = (eager.tokens, eager.parents, eager.depths) == (ref.tokens, ref.parents, ref.depths)
            gaps = [abs(x - y) for x, y in zip(eager.scores, ref.scores, strict=True)] if same else []
            if max(gaps, default=0.0) > SCORE_TOL or (not same and ctx.dtype == torch.float32):
                mismatches.setdefault(f"tree budget {b} eager", []).append(r)
            if True in graphs and best_first(expanders[(b, True)].prepare(hidden, base, root), b, d) != eager:
                mismatches.setdefault(f"tree budget {b} graph", []).append(r)
    paths = ["chain " + ("graph" if g else "eager") for g in graphs]
    paths += [f"tree budget {b} {'graph' if g else 'eager'}" for b in budgets for g in graphs]
    rows = [[p, rounds, len(mismatches.get(p, [])), str(mismatches.get(p, [])[:5])] for p in paths]
    results = {"target_shape": spec, "dtype": str(ctx.dtype), "rounds": rounds, "mismatched_rounds": mismatches}
    header = ["path vs reference (tree graph: vs eager)", "rounds", "mismatches", "first"]
    tables = [table(f"{spec} shape, {ctx.dtype}", header, rows)]
    if mismatches:
        raise CheckFailed(f"static / graphed paths differ from the references: {mismatches}", results, tables)
    return results, tables
