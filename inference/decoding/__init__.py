"""Decoding: the lean AR baseline and lossless speculative decoding with a Domino / DFlash drafter.

`generate` / `build_decoder` (api.py) are the entry points, `DECODING_METHODS` (methods.py) the one
method table and `DecodeOptions` / `TreeOptions` (options.py) a decoder's typed options. `Decoder`
(generation.py) is the base of every decoder and `SpeculativeDecoder` (speculative.py) the shared
draft -> verify -> commit loop that the chain decoders (`chain/`) and the tree decoders (`tree/`) plug
into. Each family folder holds its decoder (`decoder.py`), its verification rules (`verify.py`) and its
drafting: the chain's reference rollout is `chain/decoder.py:draft_chain` and its graphed one
`chain/rollout.py` (both run the head's one rollout, `inference.drafter.rollout`); the tree's heap and
reference expander are `tree/build.py` and its graphed expander `tree/expander.py`. `sampling.py` is the
one temperature / top-k / top-p transform that drafting, verification and plain sampling share;
`batch_generation.py` samples many prompts from the target alone in one left-padded batch (the data
pipeline's regeneration); `batched.py` (`BatchedDecoder`) decodes many prompts with any method, the
rows' drafting shared and one ragged target forward per round for all of them, each row exactly as its
batch-1 decoder would at a fixed window (a cost-aware one sizes its drafts across the batch).
"""

from inference.decoding.api import build_decoder, generate, prompt_ids
from inference.decoding.ar import ARDecoder
from inference.decoding.batched import BatchedDecoder
from inference.decoding.chain.decoder import ChainDecoder, draft_chain
from inference.decoding.chain.verify import VERIFY_RULES, ChainDraft, MatchVerifier, RejectionVerifier, make_verifier
from inference.decoding.generation import Decoder, Generation, PromptTooLongError
from inference.decoding.methods import DECODING_METHODS, MethodSpec
from inference.decoding.options import DecodeOptions, TreeOptions
from inference.decoding.speculative import DecodeState, SpeculativeDecoder, Verdict
from inference.decoding.stats import GenerationStats
from inference.decoding.tree.decoder import TreeDecoder
from inference.decoding.tree.draft_tree import DraftTree, tree_attention_mask
from inference.decoding.tree.verify import TREE_VERIFY_RULES

__all__ = [
    "ARDecoder",
    "BatchedDecoder",
    "ChainDecoder",
    "ChainDraft",
    "DECODING_METHODS",
    "DecodeOptions",
    "DraftTree",
    "DecodeState",
    "Decoder",
    "Generation",
    "GenerationStats",
    "MatchVerifier",
    "MethodSpec",
    "PromptTooLongError",
    "RejectionVerifier",
    "SpeculativeDecoder",
    "TREE_VERIFY_RULES",
    "TreeDecoder",
    "TreeOptions",
    "VERIFY_RULES",
    "Verdict",
    "build_decoder",
    "draft_chain",
    "generate",
    "make_verifier",
    "prompt_ids",
    "tree_attention_mask",
]
