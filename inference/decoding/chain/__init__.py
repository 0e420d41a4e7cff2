"""Chain decoding (`dflash`, `domino`): one drafted block per round, verified causally by the target.

`decoder.py` (`ChainDecoder` and the reference rollout `draft_chain`), `rollout.py` (the same rollout on
static buffers, replayed as a CUDA graph) and `verify.py` (the chain's acceptance rules).

The public names are re-exported by `inference.decoding`; this file imports nothing, so the method
table (`inference.decoding.methods`) can read the verify rules without importing the decoders.
"""
