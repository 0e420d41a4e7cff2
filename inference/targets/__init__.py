"""Targets: any Hugging Face causal LM as the frozen model a drafter serves, and the built-in ones.

`adapter.py` (`TargetModel`: logits plus the features of `target_layer_ids`, KV-cache crop / compaction,
the tree forward), `kv_cache.py` (the in-place growing cache layer), `loader.py` (`load_target` by hub
name, path or built-in name), `tiny.py` / `smollm2.py` (the built-in test and demo targets),
`mask_token.py` (which reserved id is MASK) and `batch_generation.py` (batched sampling from the target,
used by the data pipeline; not imported here because it depends on `inference.decoding.sampling`).
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
