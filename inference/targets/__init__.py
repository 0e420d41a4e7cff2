"""Targets: any Hugging Face causal LM as the frozen model a drafter serves, and the built-in ones.

`adapter.py` (`TargetModel`: logits plus the features of `target_layer_ids`, the tree forward),
`engine.py` (which forward runs a target: `lean_forward.py`, a layer loop on `static_cache.py`'s
preallocated KV cache, or HF's eager forward on `kv_cache.py`'s growing cache), `ragged_forward.py`
(one lean forward over several sequences at their own lengths, on `ragged_cache.py`), `loader.py`
(`load_target` by hub name, path or built-in name, in its measured precision), `tiny.py` / `smollm2.py`
(the built-in test and demo targets) and `mask_token.py` (which reserved id is MASK). The kernels the
linears run on are chosen in `inference.kernels`. Batched
sampling from a target (the data pipeline's regeneration) is decoding: `inference.decoding.batch_generation`.
"""

from inference.targets.adapter import TargetModel, TargetOutput
from inference.targets.loader import load_target, load_target_config
from inference.targets.mask_token import choose_mask_token_id, default_mask_token_id
from inference.targets.tiny import tiny_target

__all__ = [
    "TargetModel",
    "TargetOutput",
    "choose_mask_token_id",
    "default_mask_token_id",
    "load_target",
    "load_target_config",
    "tiny_target",
]
