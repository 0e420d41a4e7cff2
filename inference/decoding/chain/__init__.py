"""Chain decoding (`dflash`, `domino`): one drafted block per round, verified causally by the target.

`decoder.py` (`ChainDecoder` and the reference rollout `draft_chain`), `rollout.py` (the same rollout on
static buffers, replayed as a CUDA graph) and `verify.py` (the chain's acceptance rules).
"""

from inference.decoding.chain.decoder import ChainDecoder, draft_chain
from inference.decoding.chain.verify import VERIFY_RULES, ChainDraft, MatchVerifier, RejectionVerifier, make_verifier

__all__ = [
    "VERIFY_RULES",
    "ChainDecoder",
    "ChainDraft",
    "MatchVerifier",
    "RejectionVerifier",
    "draft_chain",
    "make_verifier",
]
