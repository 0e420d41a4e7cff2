"""Decoding: the lean AR baseline and lossless speculative decoding with a Domino / DFlash drafter.

`generate` / `build_decoder` (api.py) are the entry points; `SpeculativeDecoder` (speculative.py) is
the shared draft -> verify -> commit loop that chain (chain.py) and tree decoders plug into.
"""

from inference.decoding.api import DECODING_METHODS, build_decoder, generate, prompt_ids
from inference.decoding.ar import ARDecoder
from inference.decoding.chain import ChainDecoder, draft_chain
from inference.decoding.generation import Decoder, Generation, PromptTooLongError
from inference.decoding.speculative import DecodeState, SpeculativeDecoder, Verdict
from inference.decoding.stats import GenerationStats
from inference.decoding.verify import VERIFY_RULES, ChainDraft, MatchVerifier, RejectionVerifier, make_verifier

__all__ = [
    "ARDecoder",
    "ChainDecoder",
    "ChainDraft",
    "DECODING_METHODS",
    "DecodeState",
    "Decoder",
    "Generation",
    "GenerationStats",
    "MatchVerifier",
    "PromptTooLongError",
    "RejectionVerifier",
    "SpeculativeDecoder",
    "VERIFY_RULES",
    "Verdict",
    "build_decoder",
    "draft_chain",
    "generate",
    "make_verifier",
    "prompt_ids",
]
