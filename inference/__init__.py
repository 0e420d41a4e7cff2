"""Domino inference: the drafter model, the target adapter, checkpoint I/O and decoding.

Never imports Lightning: serving stacks and `domino-decode` use this package alone.
"""

from inference.checkpoint import DrafterCheckpointError
from inference.config import DrafterConfig, default_target_layer_ids
from inference.draft_cache import DraftKVCache
from inference.drafter import BlockLogits, DominoDrafter
from inference.target import TargetModel, TargetOutput, tree_attention_mask
from inference.target_loader import load_target, load_target_config
from inference.tiny import tiny_target

__all__ = [
    "BlockLogits",
    "DominoDrafter",
    "DraftKVCache",
    "DrafterCheckpointError",
    "DrafterConfig",
    "TargetModel",
    "TargetOutput",
    "default_target_layer_ids",
    "load_target",
    "load_target_config",
    "tiny_target",
    "tree_attention_mask",
]
