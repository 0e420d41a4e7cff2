"""Domino inference: the drafter model, the target adapter, checkpoint I/O and decoding.

Never imports Lightning: serving stacks and `domino-decode` use this package alone.
"""

from inference.checkpoint import DrafterCheckpointError
from inference.config import DrafterConfig, default_target_layer_ids
from inference.decoding import Generation, SpeculativeDecoder, build_decoder, generate
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
    "Generation",
    "SpeculativeDecoder",
    "TargetModel",
    "TargetOutput",
    "build_decoder",
    "default_target_layer_ids",
    "generate",
    "load_target",
    "load_target_config",
    "tiny_target",
    "tree_attention_mask",
]
