"""Domino inference: the drafter model, the target adapter, checkpoint I/O and decoding.

Never imports Lightning or `domino_train` (tests/inference/test_dependency_rule.py): serving stacks and
`domino-decode` use this package alone. Folders: `drafter/` (the model and its checkpoint format),
`targets/` (the target adapter, its engines, loader and built-in targets), `kernels/` (CPU linear kernels
and the precision chosen by measurement), `decoding/` (AR, chain and tree decoding),
`eval/` (prompt sets, the evaluation loop and its result files) and `cli/` (domino-decode, domino-describe).

Exports resolve on first use (`__getattr__`), so importing a submodule imports only what it needs: the
CLIs set the process's OpenMP wait policy before torch loads (`inference.cli`).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BlockLogits": "inference.drafter",
    "DecodeOptions": "inference.decoding",
    "DominoDrafter": "inference.drafter",
    "DraftKVCache": "inference.drafter",
    "DrafterCheckpointError": "inference.drafter",
    "DrafterConfig": "inference.drafter",
    "Generation": "inference.decoding",
    "SpeculativeDecoder": "inference.decoding",
    "TargetModel": "inference.targets",
    "TargetOutput": "inference.targets",
    "TreeOptions": "inference.decoding",
    "build_decoder": "inference.decoding",
    "default_target_layer_ids": "inference.drafter",
    "generate": "inference.decoding",
    "load_target": "inference.targets",
    "load_target_config": "inference.targets",
    "tiny_target": "inference.targets",
    "tree_attention_mask": "inference.decoding.tree.draft_tree",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'inference' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
