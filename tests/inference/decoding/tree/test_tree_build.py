"""Best-first tree construction: DDTree's prefixes, DominoTree's fast builder against the reference, and
a case where the path-conditional correction must change the tree."""

import itertools
import math

import pytest
import torch

from inference import DominoDrafter, load_target
from inference.decoding.batch_budget import batch_prefix_settled, best_choice, merged_gains
from inference.decoding.budget import best_prefix, prefix_settled
from inference.decoding.tree.build import (
    best_first,
    best_first_batched,
    best_first_rows,
    build_ddtree,
    build_dominotree_reference,
    ddtree_children,
)
from inference.decoding.tree.draft_tree import DraftTree
from inference.decoding.tree.expander import FastDominoExpander
from inference.decoding.tree.rows_expander import DominoRowsExpander
from inference.kernels.linear import kernel_unavailable_reason


def test_ddtree_children_of_many_blocks_build_each_block_s_tree():
    """`ddtree_children` over 3 blocks at once (a batched round) gives each block the tree it builds alone,
    through a draft vocabulary's token map too."""
    g = torch.Generator().manual_seed(1)
    base = torch.randn(3, 4, 12, generator=g) * 2
    token_map = torch.randperm(50, generator=g)[:12]
    for tmap in (None, token_map):
        children = ddtree_children(base, 6, tmap)
        for r in range(3):
            alone = build_ddtree(base[r], 6, 3, tmap)
            together = build_ddtree(base[r], 6, 3, tmap, children[r])
            assert (together.tokens, together.parents) == (alone.tokens, alone.parents)
            assert together.scores == pytest.approx(alone.scores)
            capped = build_ddtree(base[r], 2, 3, tmap, ddtree_children(base, 2, tmap)[r])  # a batch's cap of 2
            assert (capped.tokens, capped.parents) == (alone.tokens[:2], alone.parents[:2])


def test_ddtree_holds_the_most_probable_prefixes():
    torch.manual_seed(0)
    logits = torch.randn(3, 5) * 2
    lp = torch.log_softmax(logits, -1)
    for budget in (1, 4, 9, 20):
        tree = build_ddtree(logits, budget)
        assert len(tree) == min(budget, 5 + 25 + 125)
        assert all(a >= b for a, b in zip(tree.scores, tree.scores[1:], strict=False))  # popped best first
        prefixes = {
            p: sum(lp[d, t].item() for d, t in enumerate(p))
            for n in (1, 2, 3)
            for p in itertools.product(range(5), repeat=n)
        }
        best = sorted(prefixes.values(), reverse=True)[: len(tree)]
        assert sorted(tree.scores, reverse=True) == pytest.approx(best)
        for i in range(len(tree)):
            path = tuple(tree.tokens[j] for j in tree.path(i))
            assert tree.scores[i] == pytest.approx(prefixes[path])


def test_tree_visibility_and_depths():
    tree = DraftTree()
    a = tree.add(5, -1, 1, -0.1)
    b = tree.add(6, -1, 1, -0.2)
    tree.add(7, a, 2, -0.3)
    tree.add(8, b, 2, -0.4)
    v = tree.visibility()
    assert v.tolist() == [
        [True, False, False, False, False],
        [True, True, False, False, False],
        [True, False, True, False, False],
        [True, True, False, True, False],
        [True, False, True, False, True],
    ]
    assert tree.window_depths() == [0, 1, 1, 2, 2]
    assert tree.children() == [{5: 1, 6: 2}, {7: 3}, {8: 4}, {}, {}]


def _round_inputs(drafter, target, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 256, (1, 20), generator=g)
    feats = target(ids, layer_ids=drafter.config.target_layer_ids).features
    cache = drafter.new_cache(1, 32)
    drafter.append_context(cache, feats)
    root = ids[:, -1]
    hidden = drafter.draft_hidden_slice(drafter.draft_block(cache, root))[0]
    return hidden, drafter.lm_head(hidden), root


@pytest.mark.parametrize(
    "top_m, node_topk, prefix, vocab",
    [(16, 4, 1, None), (0, 3, 1, None), (8, 8, 0, None), (32, 2, 2, None), (16, 4, 0, 96)],
)
def test_fast_builder_equals_the_reference(any_tiny_target, top_m, node_topk, prefix, vocab, make_drafter):
    target = any_tiny_target
    drafter = make_drafter(target, block_size=8, pure_draft_prefix_len=prefix, draft_vocab_size=vocab).eval()
    if vocab:
        drafter.vocab.set_ids(torch.arange(vocab) * 2)  # ids the random rounds draft from
    token_map = drafter.vocab.draft_to_target()
    with torch.inference_mode():
        fast = FastDominoExpander(drafter, top_m, node_topk, budget=4)  # grows its state pool when needed
        assert (fast.gate_table is not None) == bool(vocab)  # draft-vocabulary tokens: their W_ih . e tabulated
        for seed, budget in itertools.product(range(3), (1, 5, 16, 40)):
            hidden, base, root = _round_inputs(drafter, target, seed)
            args = (hidden, base, root, prefix, budget, top_m, node_topk)
            ref = build_dominotree_reference(drafter.head, drafter.embed, *args, token_map=token_map)
            got = best_first(fast.prepare(hidden, base, root), budget, hidden.shape[0])
            assert (got.tokens, got.parents, got.depths) == (ref.tokens, ref.parents, ref.depths)  # same nodes, order
            assert got.scores == pytest.approx(ref.scores, abs=1e-5)  # tabulated, batched products round differently
            assert len(got) == budget and max(got.depths) <= hidden.shape[0]


class _PathExpander:
    """Children that depend only on a node's path (so any numbering of the nodes sees the same tree):
    `k` tokens with log-probabilities drawn per path, rounded to `step` so that ties are frequent."""

    def __init__(self, k: int, step: float, seed: int) -> None:
        self.k, self.step, self.seed = k, step, seed
        self.path = {-1: ()}
        self.calls = self.single = 0

    def _children(self, path):
        g = torch.Generator().manual_seed(hash((self.seed, path)) % 2**31)
        logprobs = torch.log_softmax(torch.randn(self.k, generator=g) * 2, -1)
        logprobs = (logprobs / self.step).round() * self.step if self.step else logprobs
        values, order = logprobs.sort(descending=True, stable=True)
        return [int(t) * 7 + len(path) for t in order], [min(v, 0.0) for v in values.tolist()]

    def root(self):
        return self._children(())

    def expand(self, node, parent, rank, depth):
        self.single += 1
        return self._expand(node, parent, rank)

    def _expand(self, node, parent, rank):
        self.path[node] = (*self.path[parent], rank)
        return self._children(self.path[node])

    def expand_many(self, requests):
        self.calls += 1
        return [self._expand(*r[:3]) for r in requests]


@pytest.mark.parametrize("step", [0.0, 0.5])
def test_batched_expansion_builds_the_sequential_tree(step):
    for seed, budget, depth, width, k in itertools.product(range(4), (1, 3, 16, 40), (1, 3, 6), (2, 3, 8), (2, 5)):
        sequential = best_first(_PathExpander(k, step, seed), budget, depth)
        batched = _PathExpander(k, step, seed)
        tree = best_first_batched(batched, budget, depth, width)
        assert tree == sequential, (seed, budget, depth, width, k)  # nodes, order, scores: ties included
    wide = _PathExpander(8, 0.0, 0)
    best_first_batched(wide, 16, 3, 8)
    assert wide.calls <= 4 and wide.single == 0  # 16 nodes in a few steps, not 16, and none left to replay


@pytest.mark.parametrize("step_cost", [0.0, 0.3])
def test_a_cost_aware_build_stops_early_and_keeps_the_same_prefix(step_cost):
    """`enough` (budget.prefix_settled) stops the build, and the prefix best_prefix keeps is the one the
    whole `budget` tree gives; most builds stop well short of the budget."""
    depth = 4

    def gains(scores):  # a monotone acceptance map, as AcceptanceModel's
        return [0.8 * math.exp(s) for s in scores]

    def verify(n):  # grows with the window, with a step past 16 tokens
        return 4.0 + 0.15 * n + (0.6 if n > 16 else 0.0)

    def round_cost(depths, width):  # as TreeDecoder's: a head step per `width` expanded nodes, then the verify
        expanded = list(itertools.accumulate(int(d < depth) for d in depths))
        return lambda n: step_cost * -(-expanded[n - 1] // width) + verify(n + 1)

    stopped = 0
    for seed, width, k in itertools.product(range(12), (1, 3, 8), (3, 8)):

        def enough(scores, depths, bound, width=width):
            cost = round_cost(depths, width)
            floor = cost(len(depths)) - verify(len(depths) + 1)
            return prefix_settled(gains(scores), gains([bound])[0], 32, cost, lambda m: floor + verify(m + 1))

        full = best_first(_PathExpander(k, 0.0, seed), 32, depth)
        early = best_first_batched(_PathExpander(k, 0.0, seed), 32, depth, width, enough)
        assert early == full.prefix(len(early)), (seed, width, k)  # a prefix of the full tree
        keep = best_prefix(gains(full.scores), round_cost(full.depths, width))
        assert best_prefix(gains(early.scores), round_cost(early.depths, width)) == keep <= len(early)
        stopped += len(early) < 24
    assert stopped > 48  # of 72 builds: the rule does stop early


class _PathRows:
    """`_PathExpander`s as the rows of one batched round (a `RowsExpander`), counting the steps."""

    def __init__(self, rows):
        self.rows, self.steps = rows, 0

    def row(self, r):
        return self.rows[r]

    def expand_rows(self, requests):
        self.steps += 1
        return [self.rows[r]._expand(*request[:3]) for r, request in requests]


def test_a_batch_s_build_stops_once_it_holds_the_batch_s_choice():
    """`best_first_rows` with a batch rule (`batch_prefix_settled` on one cost per kept count) stops every
    row at a prefix of its own tree, the batch keeps the drafts it keeps from the whole trees, and the
    build takes fewer steps than the whole trees do."""
    rows, budget, depth = 4, 32, 5

    def gains(scores):  # a monotone acceptance map, as AcceptanceModel's
        return [0.9 * math.exp(s) for s in scores]

    def cost(t, width):  # drafting, a verify of 4 + t tokens, and each pad slot of a `width`-wide forward
        return 6.0 + 27.0 + 0.8 * t + 0.3 * max(rows * width - rows - t, 0)

    def enough(leading):
        bound = max(node.bound for node in leading.values())
        most = gains([bound])[0] if bound > float("-inf") else None
        return batch_prefix_settled({r: gains(n.scores) for r, n in leading.items()}, most, rows, cost, rows * budget)

    def kept(trees):  # the batch's choice (`BatchBudget.settle`)
        kept, _ = best_choice(merged_gains({r: gains(t.scores) for r, t in enumerate(trees)}), rows, cost)
        return kept

    fewer = 0
    for seed, width, k in itertools.product(range(8), (2, 8), (3, 8)):
        seeds = [seed * 10 + r for r in range(rows)]
        whole = _PathRows([_PathExpander(k, 0.0, s) for s in seeds])
        full = best_first_rows(whole, budget, [depth] * rows, width)
        early = _PathRows([_PathExpander(k, 0.0, s) for s in seeds])
        stopped = best_first_rows(early, budget, [depth] * rows, width, enough)
        for got, tree in zip(stopped, full, strict=True):
            assert got == tree.prefix(len(got)), (seed, width, k)
        assert kept(stopped) == kept(full), (seed, width, k)
        fewer += early.steps < whole.steps
    assert fewer >= 16  # of 32 batches


@pytest.mark.parametrize("width", [2, 8])
@torch.inference_mode()
def test_fast_batched_builder_equals_the_reference(qwen_target, make_drafter, width):
    drafter = make_drafter(qwen_target, block_size=8, pure_draft_prefix_len=1).eval()
    fast = FastDominoExpander(drafter, 16, 4, budget=4, width=width)
    for seed, budget in itertools.product(range(3), (5, 16, 40)):
        hidden, base, root = _round_inputs(drafter, qwen_target, seed)
        ref = build_dominotree_reference(drafter.head, drafter.embed, hidden, base, root, 1, budget, 16, 4)
        got = best_first_batched(fast.prepare(hidden, base, root), budget, hidden.shape[0], width)
        assert (got.tokens, got.parents, got.depths) == (ref.tokens, ref.parents, ref.depths)
        assert got.scores == pytest.approx(ref.scores, abs=1e-5)  # rows batched together may round differently


@pytest.mark.parametrize(
    "top_m, node_topk, prefix, vocab", [(16, 4, 1, None), (0, 3, 1, None), (8, 8, 0, None), (16, 4, 0, 96)]
)
def test_rows_built_together_are_each_row_s_reference_tree(qwen_target, make_drafter, top_m, node_topk, prefix, vocab):
    """A batched round's rows (`best_first_rows` on `DominoRowsExpander`: each step expands every row's next
    nodes together), of different depths, give each row the reference tree of its own block."""
    drafter = make_drafter(qwen_target, block_size=8, pure_draft_prefix_len=prefix, draft_vocab_size=vocab).eval()
    if vocab:
        drafter.vocab.set_ids(torch.arange(vocab) * 2)
    token_map = drafter.vocab.draft_to_target()
    with torch.inference_mode():
        rows = DominoRowsExpander(FastDominoExpander(drafter, top_m, node_topk, budget=4, width=4))
        inputs = [_round_inputs(drafter, qwen_target, seed) for seed in range(3)]
        hidden = torch.stack([h for h, _, _ in inputs])
        base = torch.stack([b for _, b, _ in inputs])
        roots = torch.cat([r for _, _, r in inputs])
        depths = [7, 2, 5]
        built = {}
        for budget in (5, 16, 40):
            trees = built[budget] = best_first_rows(rows.prepare(hidden, base, roots), budget, depths, width=4)
            for (h, b, root), depth, got in zip(inputs, depths, trees, strict=True):
                args = (h, b, root, prefix, budget, top_m, node_topk, depth)
                ref = build_dominotree_reference(drafter.head, drafter.embed, *args, token_map=token_map)
                assert (got.tokens, got.parents, got.depths) == (ref.tokens, ref.parents, ref.depths)
                assert got.scores == pytest.approx(ref.scores, abs=1e-5)
        for small, whole in zip(built[5], built[40], strict=True):  # a batch's cap builds the whole tree's first nodes
            assert (small.tokens, small.parents) == (whole.tokens[: len(small)], whole.parents[: len(small)])
        assert best_first_rows(rows.prepare(hidden, base, roots), 0, depths) == [DraftTree()] * 3


class _ToyHead:
    """A head whose GRU state is the last token seen (one-hot) and whose correction favours, after token
    a, the token a + 10: conditioning on the path changes which child is best."""

    def __init__(self, vocab):
        self.vocab = vocab

    def first_step(self, embeds):
        return embeds

    def step(self, embeds, state):
        return embeds

    def correction(self, hidden, state, candidate_ids=None):
        last = state.argmax(-1)
        bonus = torch.nn.functional.one_hot((last + 10) % self.vocab, self.vocab).float() * 5.0
        return bonus if candidate_ids is None else bonus[..., candidate_ids]


def test_conditioning_changes_the_tree_where_marginals_tie():
    vocab = 30
    base = torch.zeros(2, vocab)
    base[0, 1] = base[0, 2] = 3.0  # tokens 1 and 2 tie at depth 1
    base[1, 20] = 2.0  # the marginal favours 20 after either
    head = _ToyHead(vocab)
    embed = lambda ids: torch.nn.functional.one_hot(ids, vocab).float()  # noqa: E731
    hidden = torch.zeros(2, 4)
    tree = build_dominotree_reference(head, embed, hidden, base, torch.tensor([0]), 1, budget=4, top_m=0, node_topk=2)
    kids = {tree.tokens[tree.parents[i]]: tree.tokens[i] for i in range(len(tree)) if tree.depths[i] == 2}
    assert kids == {1: 11, 2: 12}  # each path's own best continuation
    marginal = build_ddtree(base, budget=4)
    assert {marginal.tokens[i] for i in range(len(marginal)) if marginal.depths[i] == 2} == {20}


def test_dominotree_scores_match_a_direct_computation(qwen_target, trained_drafter):
    drafter, _ = trained_drafter(qwen_target)
    with torch.inference_mode():
        hidden, base, root = _round_inputs(drafter, qwen_target, 7)
        tree = build_dominotree_reference(drafter.head, drafter.embed, hidden, base, root, 1, 6, 16, 4)
        head = drafter.head
        for i in range(len(tree)):
            path = tree.path(i)
            state = head.step(drafter.embed(root), head.init_state(1, "cpu", torch.float32))
            total = 0.0
            for depth, node in enumerate(path, start=1):
                token = tree.tokens[node]
                if depth == 1:
                    total += torch.log_softmax(base[0], -1)[token].item()
                else:
                    cand = base[depth - 1].topk(16).indices
                    logits = base[depth - 1, cand] + head.correction(hidden[depth - 1 : depth], state, cand)[0]
                    total += torch.log_softmax(logits, -1)[(cand == token).nonzero()[0, 0]].item()
                state = head.step(drafter.embed(torch.tensor([token])), state)
            assert math.isclose(tree.scores[i], total, rel_tol=1e-5, abs_tol=1e-5)


@pytest.mark.skipif(kernel_unavailable_reason("onednn", "bfloat16") is not None, reason="no prepacked bf16 linears")
def test_the_gate_table_holds_what_a_step_computes_on_a_packed_bf16_target(make_drafter, tmp_path):
    target = load_target("tiny-qwen3", dtype="bfloat16", device="cpu", prepack=True)
    plain = load_target("tiny-qwen3", dtype="bfloat16", device="cpu", prepack=False)
    drafter = make_drafter(plain, draft_vocab_size=300)
    drafter.vocab.set_ids(torch.arange(300))
    drafter.save_pretrained(tmp_path)
    drafter = DominoDrafter.from_pretrained(tmp_path, target=target)
    with torch.inference_mode():
        fast = FastDominoExpander(drafter, 16, 4, width=8)
        ids = torch.tensor([3, 299, 17, 256, 255, 0, 42, 8])  # both sides of a 256-row chunk
        step = drafter.head.input_projection(drafter.embed(ids))
        table = fast.gate_table.index_select(0, fast.draft_index.index_select(0, ids))
    if torch.backends.cpu.get_cpu_capability() == "AVX512":  # where prepacked rows were measured bit-identical
        assert torch.equal(table, step)
    torch.testing.assert_close(table, step)
