"""Tree decoding (`ddtree`, `dominotree`): a best-first draft tree per round, verified with tree attention.

`draft_tree.py` (the tree's data, its visibility and the target's tree attention mask), `build.py` (the
best-first heap and the reference expanders), `expander.py` (the graphed DominoTree expander, identical
trees bit for bit), `verify.py` (the tree's acceptance rules) and `decoder.py` (`TreeDecoder`).
"""

from inference.decoding.tree.decoder import TREE_METHODS, TreeDecoder
from inference.decoding.tree.draft_tree import DraftTree, tree_attention_mask
from inference.decoding.tree.verify import TREE_VERIFY_RULES

__all__ = ["TREE_METHODS", "TREE_VERIFY_RULES", "DraftTree", "TreeDecoder", "tree_attention_mask"]
