"""Domino inference: the drafter model, the target adapter, checkpoint I/O and decoding.

Never imports Lightning or `domino_train` (tests/inference/test_dependency_rule.py): serving stacks and
`domino-decode` use this package alone. Folders: `drafter/` (the model and its checkpoint format),
`targets/` (the target adapter, its engines, loader and built-in targets), `kernels/` (CPU linear kernels
and the precision chosen by measurement), `decoding/` (AR, chain and tree decoding),
`eval/` (prompt sets, the evaluation loop and its result files) and `cli/` (domino-decode, domino-describe).
"""

from inference.decoding import DecodeOptions, Generation, SpeculativeDecoder, TreeOptions, build_decoder, generate
from inference.decoding.tree.draft_tree import tree_attention_mask
from inference.drafter import (
    BlockLogits,
    DominoDrafter,
    DrafterCheckpointError,
    DrafterConfig,
    DraftKVCache,
    default_target_layer_ids,
)
from inference.targets import TargetModel, TargetOutput, load_target, load_target_config, tiny_target

__all__ = [
    "BlockLogits",
    "DominoDrafter",
    "DecodeOptions",
    "DraftKVCache",
    "DrafterCheckpointError",
    "DrafterConfig",
    "Generation",
    "SpeculativeDecoder",
    "TargetModel",
    "TargetOutput",
    "TreeOptions",
    "build_decoder",
    "default_target_layer_ids",
    "generate",
    "load_target",
    "load_target_config",
    "tiny_target",
    "tree_attention_mask",
]
