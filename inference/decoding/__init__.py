"""Decoding: the lean AR baseline and lossless speculative decoding with a Domino / DFlash drafter.

`generate` / `build_decoder` (api.py) are the entry points; `Decoder` (generation.py) is the base of every
decoder and `SpeculativeDecoder` (speculative.py) the shared draft -> verify -> commit loop that the chain
decoders (`chain/`) and the tree decoders (`tree/`) plug into. Each family folder holds its decoder
(`decoder.py`), its verification rules (`verify.py`) and its drafting: the chain's reference rollout is
`chain/decoder.py:draft_chain` and its graphed one `chain/rollout.py`; the tree's heap and reference
expander are `tree/build.py` and its graphed expander `tree/expander.py`. `sampling.py` is the one
temperature / top-k / top-p transform that drafting, verification and plain sampling share.
"""

from inference.decoding.api import DECODING_METHODS, build_decoder, generate, prompt_ids
from inference.decoding.ar import ARDecoder
from inference.decoding.chain.decoder import ChainDecoder, draft_chain
from inference.decoding.chain.verify import VERIFY_RULES, ChainDraft, MatchVerifier, RejectionVerifier, make_verifier
from inference.decoding.generation import Decoder, Generation, PromptTooLongError
from inference.decoding.speculative import DecodeState, SpeculativeDecoder, Verdict
from inference.decoding.stats import GenerationStats

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
