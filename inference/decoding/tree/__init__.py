"""Tree decoding (`ddtree`, `dominotree`): a best-first draft tree per round, verified with tree attention.

`draft_tree.py` (the tree's data, its visibility and the target's tree attention mask), `build.py` (the
best-first heap, its speculative batched form, for one row or a batched round's rows, and the reference
expanders), `expander.py` (the graphed DominoTree expander, identical trees bit for bit),
`rows_expander.py` (DominoTree's expander for every row of a batched round at once), `verify.py` (the
tree's acceptance rules) and `decoder.py` (`TreeDecoder`).

The public names are re-exported by `inference.decoding`; this file imports nothing, so the method
table (`inference.decoding.methods`) can read the verify rules without importing the decoders.
"""
