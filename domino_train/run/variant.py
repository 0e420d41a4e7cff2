"""What a run trains, as flat `section.key` values: the unit the ablation report groups runs by.

A *variant* is the resolved configuration minus everything that does not change the trained drafter's
recipe (paths, loggers, callbacks, device counts, the seed). Seeds of one variant are repeats; variants
differ in at least one of these keys. The same view names W&B tags, labels report rows, and guards a
resumed run directory against being continued with a different recipe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from domino_train.run.moved_targets import current_target

# Sections (or single keys) that define the recipe; `data` minus what only moves bytes around.
RECIPE_KEYS = ("task_name", "target", "drafter", "train", "data", "trainer.max_steps", "trainer.max_epochs")
NOT_RECIPE = ("data.seed", "data.target", "data.num_workers", "target.device")


def _flatten(node: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(node, Mapping):
        for k, v in node.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(node, list | tuple):
        out[prefix] = list(node)
    else:
        out[prefix] = node


def as_container(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """A resolved plain-dict copy of `cfg` (a DictConfig, or a dict such as a W&B run's config)."""
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    return dict(cfg)


def variant_config(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The recipe keys of a run, flattened to `section.key` (no seed: seeds repeat a variant)."""
    flat: dict[str, Any] = {}
    _flatten(as_container(cfg), "", flat)
    return canonical_recipe(
        {
            key: value
            for key, value in flat.items()
            if any(key == k or key.startswith(k + ".") for k in RECIPE_KEYS)
            and not any(key == k or key.startswith(k + ".") for k in NOT_RECIPE)
        }
    )


def canonical_recipe(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Flat recipe keys with every moved `_target_` at its current path (`moved_targets`): a run recorded
    before a move is the same recipe as one configured after it."""
    return {k: current_target(v) if k.split(".")[-1] == "_target_" else v for k, v in flat.items()}


def _get(cfg: DictConfig | Mapping[str, Any], dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = node.get(part) if node is not None else None
    return node


def _loss_tag(cfg: DictConfig | Mapping[str, Any]) -> list[str]:
    """`["0.1ce+0.9tv"]` for a loss other than plain cross-entropy, else []."""
    loss = _get(cfg, "train.loss") or {}
    defaults = {"ce": 1.0, "kl": 0.0, "tv": 0.0}
    terms = [f"{w:g}{name}" for name, default in defaults.items() if (w := loss.get(name, default))]
    return [] if terms == ["1ce"] else ["+".join(terms)]


def variant_tags(cfg: DictConfig | Mapping[str, Any]) -> list[str]:
    """Short tags naming the ablation: target, block size, head, for a head its causal input and
    curriculum, and the loss when it is not plain cross-entropy.

    e.g. `["Qwen3-8B", "b16", "domino", "teacher_forced", "curriculum"]`, `["Qwen3-8B", "b16", "no_head"]` or
    `["SmolLM2-135M-Instruct", "b4", "domino", "teacher_forced", "curriculum", "0.1ce+0.9tv"]`. Reads only
    those keys (the W&B tags resolver calls it on the config that holds the tags).
    """
    target = str(_get(cfg, "target.spec") or "target").rstrip("/").split("/")[-1]
    tags = [target, f"b{_get(cfg, 'drafter.block_size')}"]
    head = _get(cfg, "drafter.head")
    if head is None:
        return [*tags, "no_head", *_loss_tag(cfg)]
    curriculum = "curriculum" if _get(cfg, "train.curriculum") == "linear" else "no_curriculum"
    return [*tags, str(head), str(_get(cfg, "train.causal_input")), curriculum, *_loss_tag(cfg)]
