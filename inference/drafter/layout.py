"""The public drafter `config.json` layout: its names, the layer-id rule, and how every public variant maps
to `DrafterConfig`'s fields (`public_fields`). Writing the layout is `DrafterConfig.to_hf_dict`.
"""

from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace
from typing import Any

from inference.targets.mask_token import default_mask_token_id

DFLASH_ARCHITECTURE = "DFlashDraftModel"
DOMINO_ARCHITECTURE = "DominoDraftModel"  # SpecForge's class name; read, never written
EXPORT_ARCHITECTURE = DFLASH_ARCHITECTURE  # what the public Domino and DFlash checkpoints both say
DOMINO_PROJECTOR = "domino"


def default_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """Target layers whose outputs feed the drafter, spread from layer 1 to layer L-3.

    `round(1 + j * (L - 4) / (n - 1))` for j = 0..n-1 (DFlash's rule; Qwen3 36 layers, n = 5 ->
    [1, 9, 17, 25, 33]). Id `l` means the *output* of target layer `l`, i.e. HF `hidden_states[l + 1]`.
    """
    if num_draft_layers < 1:
        raise ValueError(f"num_draft_layers must be >= 1, got {num_draft_layers}")
    if num_target_layers < 4:
        raise ValueError(f"the target needs at least 4 layers for the default layer ids, has {num_target_layers}")
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    span = num_target_layers - 4
    return [int(round(1 + j * span / (num_draft_layers - 1))) for j in range(num_draft_layers)]


def repeated_layers_note(layer_ids: list[int], num_target_layers: int) -> str | None:
    """One line when `layer_ids` read a target layer more than once, else None. The default rule does so on
    shallow targets (5 ids over 4 layers are [1, 1, 1, 1, 1]): the drafter then takes the same features
    several times, a wider `fc` that learns nothing more. Kept (the rule is what public readers imply for a
    config without ids), but said."""
    repeats = {i: n for i, n in Counter(layer_ids).items() if n > 1}
    if not repeats:
        return None
    shown = ", ".join(f"layer {i} x{n}" for i, n in sorted(repeats.items()))
    return (
        f"target_layer_ids {list(layer_ids)} read the same target layer more than once ({shown}) of a "
        f"{num_target_layers}-layer target: the drafter takes those features repeatedly; give fewer draft "
        "layers or distinct target_layer_ids"
    )


# How a public drafter config.json maps to DrafterConfig: the one place that decides it.
#
# Layouts in the wild (all Qwen3 fields at the top level):
#   ours, SpecForge configs/qwen3-8b-domino.json, configs/qwen3.6-27b-domino-full-attention.json:
#       `architectures: ["DFlashDraftModel"]`, everything in `dflash_config` (qwen3-8b-domino.json also
#       repeats `emb_dim` at the top level);
#   SpecForge configs/qwen3-8b-dflash.json: no `dflash_config` at all (ids and MASK are implied);
#   SpecForge configs/qwen3.5-4b-domino.json: `DominoDraftModel`, head fields in a separate `domino_config`;
#   the public Domino fork (jianuo-huang/Domino, SGLang speculative/dflash_utils.py): `emb_dim` at the top
#       level only, `projector_type: "causal_v5"` (its older name for the Domino head), and
#       `num_target_layers` / `block_size` / `target_layer_ids` accepted in `dflash_config` or at the top.
# A field is looked up in `dflash_config`, then `domino_config`, then the top level; two places that give
# different values are an error. What a public reader implies when a field is absent:
#   target_layer_ids       default_target_layer_ids(num_target_layers, num_hidden_layers) (SpecForge, SGLang)
#   mask_token_id          the target's MASK id (serving stacks resolve the MASK token from the target's
#                          tokenizer), else the Qwen3 rule on the drafter's own vocab (151669), else an error
#   num_target_layers      the target's layer count, when the target is known, else an error
#   block_size             16
#   projector_type         none (plain DFlash), except under `DominoDraftModel`, which implies "domino"
#   pure_draft_prefix_len  0; shift_label false (both readers' defaults)
#   emb_dim, gru_hidden_dim  never implied for a Domino head: both readers require them.
PROJECTOR_ALIASES = {DOMINO_PROJECTOR: DOMINO_PROJECTOR, "causal_v5": DOMINO_PROJECTOR}
_SECTIONS = ("dflash_config", "domino_config")
_UNSUPPORTED_FLAGS = ("use_bias_gate", "use_bias_norm")  # variants of the public fork's head we do not implement


def _where(key: str) -> list[str]:
    return [f"{s}.{key}" for s in _SECTIONS] + [key]


def lookup(d: dict[str, Any], key: str, default: Any = None) -> Any:
    """`key` from dflash_config, domino_config or the top level (None counts as absent); places must agree."""
    found = {}
    for section in _SECTIONS:
        sub = d.get(section)
        if sub is not None and not isinstance(sub, dict):
            raise ValueError(f"{section} must be an object, got {type(sub).__name__}")
        if sub and sub.get(key) is not None:
            found[f"{section}.{key}"] = sub[key]
    if d.get(key) is not None:
        found[key] = d[key]
    if len({json.dumps(v, sort_keys=True) for v in found.values()}) > 1:
        raise ValueError(f"{key} differs between {found}: keep one value (or make them equal)")
    return next(iter(found.values())) if found else default


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


def public_fields(d: dict[str, Any], target_num_layers: int | None, target_mask_token_id: int | None) -> dict[str, Any]:
    """The drafter-specific DrafterConfig fields of a public config (rules in the comment above)."""
    head = _head(d)
    num_target_layers, layer_ids = _target_layers(d, target_num_layers)
    mask_token_id = _mask_token_id(d, target_mask_token_id)
    shift_label = lookup(d, "shift_label", False)
    if not isinstance(shift_label, bool):
        raise ValueError(f"dflash_config.shift_label must be true or false, got {shift_label!r}")
    fields: dict[str, Any] = dict(
        num_target_layers=num_target_layers,
        target_layer_ids=layer_ids,
        mask_token_id=_int(mask_token_id, "dflash_config.mask_token_id"),
        block_size=_int(lookup(d, "block_size", 16), "block_size"),
        head=head,
        shift_label=shift_label,
        pure_draft_prefix_len=_int(lookup(d, "pure_draft_prefix_len", 0), "dflash_config.pure_draft_prefix_len"),
    )
    return fields if head is None else {**fields, **_head_fields(d)}


def _head(d: dict[str, Any]) -> str | None:
    """The drafter's head (`domino`, or None for plain DFlash) from its architecture and projector_type,
    after refusing what is not a drafter or uses an attention mode not implemented here."""
    archs = d.get("architectures") or [None]
    arch = archs[0]
    if arch not in (DOMINO_ARCHITECTURE, DFLASH_ARCHITECTURE):
        raise ValueError(
            f"architectures {d.get('architectures')!r} is not a drafter "
            f"(expected {DFLASH_ARCHITECTURE} or {DOMINO_ARCHITECTURE})"
        )
    modes = lookup(d, "attention_modes") or [lookup(d, "attention_mode", "gqa")]
    unsupported = sorted({str(m).lower() for m in modes} - {"gqa", "mha"})
    if unsupported:
        raise ValueError(f"dflash_config attention mode(s) {unsupported} are not implemented (only gqa / mha)")
    projector = lookup(d, "projector_type")
    if projector is None and arch == DOMINO_ARCHITECTURE:
        projector = DOMINO_PROJECTOR
    if projector is not None and projector not in PROJECTOR_ALIASES:
        hint = (
            f"architectures says {DOMINO_ARCHITECTURE} but dflash_config.projector_type is {projector!r}; "
            if arch == DOMINO_ARCHITECTURE
            else ""
        )
        raise ValueError(
            f"{hint}unsupported dflash_config.projector_type {projector!r} "
            f"(known: {sorted(PROJECTOR_ALIASES)}; leave it out for a plain DFlash drafter)"
        )
    return PROJECTOR_ALIASES.get(projector)


def _target_layers(d: dict[str, Any], target_num_layers: int | None) -> tuple[int, list[int]]:
    """The target's layer count and the ids of the layers the drafter reads (the default rule when absent)."""
    num_hidden_layers = d["num_hidden_layers"]
    num_target_layers = lookup(d, "num_target_layers", target_num_layers)
    if num_target_layers is None:
        raise ValueError(
            "num_target_layers is missing: add the target's layer count at the top level "
            "(or load the drafter with its target)"
        )
    num_target_layers = _int(num_target_layers, "num_target_layers")
    layer_ids = lookup(d, "target_layer_ids")
    if layer_ids is None:
        layer_ids = default_target_layer_ids(num_target_layers, num_hidden_layers)
    elif not isinstance(layer_ids, list) or not layer_ids:
        raise ValueError(f"dflash_config.target_layer_ids must be a non-empty list of ints, got {layer_ids!r}")
    return num_target_layers, layer_ids


def _mask_token_id(d: dict[str, Any], target_mask_token_id: int | None) -> Any:
    """The MASK id: the config's, else the target's, else the Qwen3 rule on the drafter's own vocabulary."""
    mask_token_id = lookup(d, "mask_token_id", target_mask_token_id)
    if mask_token_id is not None:
        return mask_token_id
    try:
        return default_mask_token_id(SimpleNamespace(model_type=d.get("model_type"), vocab_size=d["vocab_size"]))
    except ValueError:
        raise ValueError(
            "mask_token_id is missing and not implied for this vocabulary: add dflash_config.mask_token_id "
            "(the reserved id the drafter was trained with), or load the drafter with its target"
        ) from None


def _head_fields(d: dict[str, Any]) -> dict[str, int]:
    """A Domino head's own fields (GRU width, correction rank), which no reader implies."""
    for flag in _UNSUPPORTED_FLAGS:
        if lookup(d, flag, False):
            raise ValueError(f"dflash_config.{flag}=true is a Domino head variant this code does not implement")
    fields = {}
    for key, field_name in (("gru_hidden_dim", "gru_hidden_dim"), ("emb_dim", "correction_rank")):
        value = lookup(d, key)
        if value is None:
            raise ValueError(
                f"a Domino drafter needs {key} ({' or '.join(_where(key))}), and the config has none: "
                f"add it ({'the GRU state width' if key == 'gru_hidden_dim' else 'the rank of the correction'})"
            )
        fields[field_name] = _int(value, key)
    return fields


def draft_vocab_size_of(d: dict[str, Any]) -> int | None:
    """EAGLE-3's top-level `draft_vocab_size`; equal to `vocab_size` (or absent) means the full vocabulary."""
    n = d.get("draft_vocab_size")
    return None if n is None or n == d["vocab_size"] else int(n)
