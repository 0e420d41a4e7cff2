"""The drafter: one definition of the Domino / DFlash draft model, used by training, export and decoding.

`config.py` (every number that shapes it, and its `config.json` form), `layers.py` / `backbone.py` (the
DFlash backbone), `head.py` (the Domino GRU + low-rank correction), `model.py` (`DominoDrafter`: the
training forward over anchor blocks and the decoding steps), `draft_vocab.py` (`DraftVocab`: the draft
vocabulary's `d2t` / `t2d` buffers, their checks, the maps between draft and target ids and the choice from
label counts), `block_mask.py` (the training attention mask over anchor blocks), `draft_cache.py` (the
decoding-time KV cache) and `checkpoint.py` (the public config.json + model.safetensors format, validated
strictly; `layout.py` maps the public variants of config.json).
"""

from inference.drafter.checkpoint import DrafterCheckpointError
from inference.drafter.config import DrafterConfig
from inference.drafter.draft_cache import DraftKVCache
from inference.drafter.draft_vocab import DraftVocab
from inference.drafter.layout import default_target_layer_ids
from inference.drafter.model import BlockLogits, DominoDrafter

__all__ = [
    "BlockLogits",
    "DominoDrafter",
    "DraftKVCache",
    "DraftVocab",
    "DrafterCheckpointError",
    "DrafterConfig",
    "default_target_layer_ids",
]
