"""Both tree verify rules commit exactly the target's distribution: every random outcome of the rule is
enumerated on a toy Markov target over 3 tokens (no sampling), for trees of several shapes, drafts outside
the target's top-k support included."""

import pytest
import torch

from inference.decoding.sampling import SamplingParams, probabilities
from inference.decoding.tree.draft_tree import DraftTree
from inference.decoding.tree.verify import TREE_VERIFY_RULES, TREE_WALKS

VOCAB = 3
TARGET_LOGITS = 1.5 * torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
PARAMS = {
    "T=1": SamplingParams(temperature=1.0),
    "T=0.7 top-2": SamplingParams(temperature=0.7, top_k=2),
    "T=1.3 top-p 0.8": SamplingParams(temperature=1.3, top_p=0.8),
    "greedy": SamplingParams(),
}
# (token, parent node) per node, parents first; -1 is the root.
TREES = {
    "chain": [(0, -1), (1, 0), (2, 1)],
    "every token under the root": [(2, -1), (0, -1), (1, -1)],
    "branching": [(1, -1), (0, -1), (2, 0), (0, 0), (1, 2)],
}


def _tree(nodes: list[tuple[int, int]]) -> DraftTree:
    tree = DraftTree()
    for token, parent in nodes:
        tree.add(token, parent, 1 if parent < 0 else tree.depths[parent] + 1, 0.0)
    return tree


@pytest.mark.parametrize("params", PARAMS.values(), ids=PARAMS.keys())
@pytest.mark.parametrize("shape", TREES)
@pytest.mark.parametrize("rule", TREE_VERIFY_RULES)
def test_a_tree_round_commits_the_target_distribution_exactly(rule, shape, params, exact_law, assert_round_lossless):
    """The accepted path and the bonus, continued by plain sampling, have exactly the target's law."""
    tree, walk = _tree(TREES[shape]), TREE_WALKS[rule]
    p = probabilities(TARGET_LOGITS, params).double()
    length = max(tree.depths) + 1
    for root in range(VOCAB):
        window = TARGET_LOGITS[[root, *tree.tokens]]  # the Markov target's next-token logits per window entry

        def commit(gen: torch.Generator, window: torch.Tensor = window) -> tuple:
            path, bonus = walk(tree, window, params, gen)
            return (*(tree.tokens[w - 1] for w in path), bonus)

        assert_round_lossless(exact_law(commit), root, p, length)
