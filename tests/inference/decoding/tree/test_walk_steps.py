"""The accepted-after-sibling counters: `walk_steps` on a hand-built tree whose steps are known, and the
counters of real ddtree / dominotree generations against identities they must satisfy."""

import pytest
import torch

from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.stats import GenerationStats, walk_rates
from inference.decoding.tree.draft_tree import DraftTree
from inference.decoding.tree.verify import walk_steps

# (token, parent) per node, in the order a builder adds them: node index = window index - 1.
#   root -> A(0), B(1);  A -> C(2), D(3);  B -> E(4);  C -> F(5);  D -> G(6), H(7).
# A's token is larger than B's: the first child is the first added, whatever the tokens.
NODES = [(9, -1), (1, -1), (5, 0), (3, 0), (4, 1), (6, 2), (7, 3), (2, 3)]
A, B, C, D, E, F, G, H = (n + 1 for n in range(len(NODES)))  # window indices
# path -> its steps (sibling, accepted): F, H and E have no children, so they are no step.
CASES = {
    (): [],
    (A,): [(False, False)],
    (B,): [(True, False)],
    (A, C): [(False, True), (False, False)],
    (A, D): [(False, True), (True, False)],
    (A, C, F): [(False, True), (False, True)],
    (A, D, G): [(False, True), (True, True)],
    (A, D, H): [(False, True), (True, True)],
    (B, E): [(True, True)],
}


def _tree(nodes: list[tuple[int, int]]) -> DraftTree:
    tree = DraftTree()
    for token, parent in nodes:
        tree.add(token, parent, 1 if parent < 0 else tree.depths[parent] + 1, 0.0)
    return tree


@pytest.mark.parametrize("path", CASES)
def test_the_steps_of_a_known_accepted_path(path):
    assert walk_steps(_tree(NODES), list(path)) == CASES[path]


def test_counters_and_rates_of_known_paths():
    stats, tree = GenerationStats(prompt_tokens=1), _tree(NODES)
    for path in CASES:
        for sibling, accepted in walk_steps(tree, list(path)):
            stats.count_step(sibling, accepted)
    assert (stats.main_steps, stats.main_accepted, stats.sibling_steps, stats.sibling_accepted) == (8, 6, 5, 3)
    empty = GenerationStats(prompt_tokens=1)
    assert walk_rates([stats, empty]) == {"main": 6 / 8, "main_steps": 8, "sibling": 3 / 5, "sibling_steps": 5}
    assert walk_rates([empty]) == {"main": None, "main_steps": 0, "sibling": None, "sibling_steps": 0}


def test_generation_counters_follow_the_accepted_paths(qwen_target, trained_drafter):
    """Every accepted node but the deepest of its round is a step whose child was accepted (the root's own
    step is not counted), so without stop tokens the successes sum to sum(max(a - 2, 0)) over the rounds'
    accept lengths a (the accepted nodes plus the bonus); the failed steps are the rounds whose deepest
    accepted node has children. The builders add a parent's best-scored child first. The training rows'
    prefixes give main steps, random prompts sibling steps, accepted and not."""
    drafter, seqs = trained_drafter(qwen_target)
    prompts = [*seqs[:4, :9], *torch.randint(0, 256, (4, 12), generator=torch.Generator().manual_seed(3))]
    options, tree_options = DecodeOptions(stop_token_ids=[]), TreeOptions(budget=32, top_m=16, node_topk=4)
    every: list[GenerationStats] = []
    for method in ("ddtree", "dominotree"):
        decoder = build_decoder(method, qwen_target, drafter, options, tree_options)
        walk, rounds = decoder.walk, []

        def recording_walk(tree, *args, walk=walk, rounds=rounds):
            path, bonus = walk(tree, *args)
            rounds.append((tree, path))
            return path, bonus

        decoder.walk = recording_walk
        stats = [decoder.generate(prompt, 30).stats for prompt in prompts]
        lengths = [a for s in stats for a in s.accept_lengths]
        assert len(rounds) == len(lengths)
        steps = sum(s.main_steps + s.sibling_steps for s in stats)
        accepted = sum(s.main_accepted + s.sibling_accepted for s in stats)
        assert accepted == sum(max(a - 2, 0) for a in lengths), method
        assert steps - accepted == sum(bool(path) and path[-1] - 1 in tree.parents for tree, path in rounds), method
        rates = walk_rates(stats)
        assert all(0 <= rates[kind] <= 1 for kind in ("main", "sibling") if rates[kind] is not None), (method, rates)
        every += stats
        for tree, _ in rounds:
            for node, parent in enumerate(tree.parents):
                assert tree.scores[tree.parents.index(parent)] >= tree.scores[node], method
    rates = walk_rates(every)
    assert rates["main"] > 0 and 0 < rates["sibling"] < 1, rates  # both kinds occur, accepted and not


def test_chains_leave_the_counters_zero(qwen_target, trained_drafter):
    drafter, seqs = trained_drafter(qwen_target)
    stats = build_decoder("domino", qwen_target, drafter).generate(seqs[0, :9], 20).stats
    assert stats.rounds and walk_rates([stats])["main_steps"] == walk_rates([stats])["sibling_steps"] == 0
