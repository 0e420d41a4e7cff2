"""The drafter: one definition of the Domino / DFlash draft model, used by training, export and decoding.

`config.py` (every number that shapes it, and its `config.json` form), `layers.py` / `backbone.py` (the
DFlash backbone), `head.py` (the Domino GRU + low-rank correction), `model.py` (`DominoDrafter`: the
training forward over anchor blocks and the decoding steps), `block_mask.py` (the training attention mask
over anchor blocks), `draft_cache.py` (the decoding-time KV cache) and `checkpoint.py` (the public
config.json + model.safetensors format, validated strictly).
"""

from inference.drafter.checkpoint import DrafterCheckpointError
from inference.drafter.config import DrafterConfig
from inference.drafter.draft_cache import DraftKVCache
from inference.drafter.layout import default_target_layer_ids
from inference.drafter.model import BlockLogits, DominoDrafter

__all__ = [
    "BlockLogits",
    "DominoDrafter",
    "DraftKVCache",
    "DrafterCheckpointError",
    "DrafterConfig",
    "default_target_layer_ids",
]
