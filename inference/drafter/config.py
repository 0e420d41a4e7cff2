"""`DrafterConfig`: every number that shapes a Domino / DFlash drafter, and its `config.json` form.

The drafter is a few Qwen3-style decoder layers of the *target's* width (its block input is the target's
token embedding and its logits come from the target's lm_head), so most fields are read off the target's
Hugging Face config. The serialised form is the one the public `*-DFlash-b16` / `*-Domino-b16`
checkpoints and the serving stacks (SGLang, vLLM, SpecForge) read: Qwen3 fields at the top level plus
`block_size`, `num_target_layers` and a `dflash_config` section. Every public variant of that layout
loads; `_public_fields` is the one place that maps them (and the values they imply when a field is absent).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

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


def rope_parameters_of(hf_config: Any) -> dict[str, Any]:
    """The target's RoPE settings as one dict (transformers 5 `rope_parameters`, or the legacy fields)."""
    params = getattr(hf_config, "rope_parameters", None)
    if isinstance(params, dict) and "rope_theta" in params:
        out = dict(params)
    else:
        scaling = dict(getattr(hf_config, "rope_scaling", None) or {})
        out = {**scaling, "rope_theta": float(getattr(hf_config, "rope_theta", 10000.0))}
        out["rope_type"] = scaling.get("rope_type", scaling.get("type", "default"))
    out.setdefault("rope_type", "default")
    return out


@dataclass
class DrafterConfig:
    """Shapes and conventions of one drafter. `head=None` is a plain DFlash drafter."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int  # draft layers
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    num_target_layers: int
    target_layer_ids: list[int]
    mask_token_id: int
    block_size: int = 16
    rms_norm_eps: float = 1e-6
    rope_parameters: dict[str, Any] = field(default_factory=lambda: {"rope_type": "default", "rope_theta": 1e6})
    max_position_embeddings: int = 40960
    head: str | None = DOMINO_PROJECTOR
    gru_hidden_dim: int = 1024
    correction_rank: int = 256
    pure_draft_prefix_len: int = 1
    shift_label: bool = False
    draft_vocab_size: int | None = None  # N: logits over the N ids in `d2t` (FR-Spec / EAGLE-3); None = all V

    def __post_init__(self) -> None:
        self.target_layer_ids = [int(i) for i in self.target_layer_ids]
        if self.head not in (None, DOMINO_PROJECTOR):
            raise ValueError(f"head must be 'domino' or None (plain DFlash), got {self.head!r}")
        if self.block_size < 2:
            raise ValueError(f"block_size must be >= 2, got {self.block_size}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if not 0 <= self.mask_token_id < self.vocab_size:
            raise ValueError(f"mask_token_id {self.mask_token_id} is outside the vocabulary [0, {self.vocab_size})")
        if self.draft_vocab_size is not None and not 0 < self.draft_vocab_size <= self.vocab_size:
            raise ValueError(f"draft_vocab_size must be in [1, {self.vocab_size}], got {self.draft_vocab_size}")
        bad = [i for i in self.target_layer_ids if not 0 <= i < self.num_target_layers]
        if bad:
            raise ValueError(f"target_layer_ids {bad} are outside the target's {self.num_target_layers} layers")

    @property
    def has_head(self) -> bool:
        return self.head is not None

    @property
    def output_vocab_size(self) -> int:
        """Width of the drafter's logits: the draft vocabulary N when one is set, else the target's V."""
        return self.draft_vocab_size or self.vocab_size

    @property
    def num_context_features(self) -> int:
        """K: how many target layers are concatenated into one context feature (fc input is K * H)."""
        return len(self.target_layer_ids)

    @property
    def first_predicting_position(self) -> int:
        """Block position of the first draft token: 1, or 0 with `shift_label` (position k predicts a+k+1)."""
        return 0 if self.shift_label else 1

    @property
    def num_draft_tokens(self) -> int:
        """Draft tokens per block: B - 1 (15 for B = 16), or B with `shift_label`."""
        return self.block_size - self.first_predicting_position

    @classmethod
    def from_target_config(
        cls,
        hf_config: Any,
        num_draft_layers: int = 5,
        block_size: int = 16,
        head: str | None = DOMINO_PROJECTOR,
        target_layer_ids: list[int] | None = None,
        mask_token_id: int | None = None,
        intermediate_size: int | None = None,
        **overrides: Any,
    ) -> DrafterConfig:
        """Derive a drafter for a Hugging Face target config (width, heads, vocab, RoPE from the target).

        None means "as the target" (`intermediate_size`) or "by the default rule" (`target_layer_ids`,
        `mask_token_id`); `overrides` may set any other field (e.g. `gru_hidden_dim`, `correction_rank`).
        """
        num_target_layers = hf_config.num_hidden_layers
        heads = hf_config.num_attention_heads
        fields = dict(
            hidden_size=hf_config.hidden_size,
            intermediate_size=intermediate_size or hf_config.intermediate_size,
            num_hidden_layers=num_draft_layers,
            num_attention_heads=heads,
            num_key_value_heads=getattr(hf_config, "num_key_value_heads", None) or heads,
            head_dim=getattr(hf_config, "head_dim", None) or hf_config.hidden_size // heads,
            vocab_size=hf_config.vocab_size,
            num_target_layers=num_target_layers,
            target_layer_ids=(
                list(target_layer_ids)
                if target_layer_ids is not None
                else default_target_layer_ids(num_target_layers, num_draft_layers)
            ),
            mask_token_id=mask_token_id if mask_token_id is not None else default_mask_token_id(hf_config),
            block_size=block_size,
            rms_norm_eps=getattr(hf_config, "rms_norm_eps", 1e-6),
            rope_parameters=rope_parameters_of(hf_config),
            max_position_embeddings=getattr(hf_config, "max_position_embeddings", 40960),
            head=head,
        )
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"unknown DrafterConfig fields: {sorted(unknown)}")
        fields.update(overrides)
        return cls(**fields)

    # ----------------------------------------------------------------------------- config.json form
    def to_hf_dict(self, dtype: torch.dtype = torch.bfloat16) -> dict[str, Any]:
        """The `config.json` of an exported drafter, in the layout the public Domino / DFlash checkpoints use.

        `architectures` is `DFlashDraftModel` for both kinds (the public Domino checkpoints' spelling: SGLang
        picks its one DFlash model class by it and finds the head through `dflash_config.projector_type`).
        A Domino drafter writes its rank `emb_dim` twice: at the top level, where the public Domino fork's
        SGLang parser reads it, and in `dflash_config`, where SpecForge reads it. RoPE is written both as
        transformers 5 `rope_parameters` and as the legacy `rope_theta` / `rope_scaling`.
        """
        dtype_name = str(dtype).removeprefix("torch.")
        rope = dict(self.rope_parameters)
        scaling = None if rope.get("rope_type", "default") == "default" else rope
        dflash: dict[str, Any] = {"mask_token_id": self.mask_token_id, "target_layer_ids": self.target_layer_ids}
        if self.has_head:
            dflash.update(
                projector_type=self.head,
                emb_dim=self.correction_rank,
                gru_hidden_dim=self.gru_hidden_dim,
                pure_draft_prefix_len=self.pure_draft_prefix_len,
            )
        dflash["shift_label"] = self.shift_label
        return {
            "architectures": [EXPORT_ARCHITECTURE],
            "model_type": "qwen3",
            **({"emb_dim": self.correction_rank} if self.has_head else {}),
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "attention_bias": False,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": rope["rope_theta"],
            "rope_scaling": scaling,
            "rope_parameters": rope,
            "max_position_embeddings": self.max_position_embeddings,
            "layer_types": ["full_attention"] * self.num_hidden_layers,
            "vocab_size": self.vocab_size,
            "tie_word_embeddings": False,
            "torch_dtype": dtype_name,
            "dtype": dtype_name,
            "block_size": self.block_size,
            "num_target_layers": self.num_target_layers,
            **({"draft_vocab_size": self.draft_vocab_size} if self.draft_vocab_size is not None else {}),
            "dflash_config": dflash,
        }

    @classmethod
    def from_hf_dict(
        cls, d: dict[str, Any], target_num_layers: int | None = None, target_mask_token_id: int | None = None
    ) -> DrafterConfig:
        """Parse a drafter `config.json` (ours or any public layout, see `_public_fields`).

        `target_num_layers` / `target_mask_token_id` (the target the drafter will serve) fill in
        `num_target_layers` / `mask_token_id` when the config leaves them out. Raises ValueError naming the
        field (and the fix) on anything that cannot be used.
        """
        if d.get("attention_bias"):
            raise ValueError("attention_bias=true drafters are not supported (Qwen3 draft layers have no bias)")
        layer_types = d.get("layer_types")
        if layer_types is not None and set(layer_types) - {"full_attention"}:
            raise ValueError(
                f"layer_types {sorted(set(layer_types))}: only full_attention draft layers are supported "
                "(sliding-window draft layers are not implemented)"
            )
        fields = _public_fields(d, target_num_layers, target_mask_token_id)
        rope = d.get("rope_parameters")
        if not isinstance(rope, dict) or "rope_theta" not in rope:
            scaling = dict(d.get("rope_scaling") or {})
            rope = {**scaling, "rope_theta": float(d.get("rope_theta", 10000.0))}
            rope["rope_type"] = scaling.get("rope_type", scaling.get("type", "default"))
        heads = d["num_attention_heads"]
        return cls(
            hidden_size=d["hidden_size"],
            intermediate_size=d["intermediate_size"],
            num_hidden_layers=d["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=d.get("num_key_value_heads") or heads,
            head_dim=d.get("head_dim") or d["hidden_size"] // heads,
            vocab_size=d["vocab_size"],
            rms_norm_eps=d.get("rms_norm_eps", 1e-6),
            rope_parameters=rope,
            max_position_embeddings=d.get("max_position_embeddings", 40960),
            draft_vocab_size=_draft_vocab_size(d),
            **fields,
        )


# ----------------------------------------------------------------------------- public config layouts
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


def _lookup(d: dict[str, Any], key: str, default: Any = None) -> Any:
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


def _public_fields(
    d: dict[str, Any], target_num_layers: int | None, target_mask_token_id: int | None
) -> dict[str, Any]:
    """The drafter-specific DrafterConfig fields of a public config (rules in the comment above)."""
    archs = d.get("architectures") or [None]
    arch = archs[0]
    if arch not in (DOMINO_ARCHITECTURE, DFLASH_ARCHITECTURE):
        raise ValueError(
            f"architectures {d.get('architectures')!r} is not a drafter "
            f"(expected {DFLASH_ARCHITECTURE} or {DOMINO_ARCHITECTURE})"
        )
    modes = _lookup(d, "attention_modes") or [_lookup(d, "attention_mode", "gqa")]
    unsupported = sorted({str(m).lower() for m in modes} - {"gqa", "mha"})
    if unsupported:
        raise ValueError(f"dflash_config attention mode(s) {unsupported} are not implemented (only gqa / mha)")
    projector = _lookup(d, "projector_type")
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
    head = PROJECTOR_ALIASES.get(projector)

    num_hidden_layers = d["num_hidden_layers"]
    num_target_layers = _lookup(d, "num_target_layers", target_num_layers)
    if num_target_layers is None:
        raise ValueError(
            "num_target_layers is missing: add the target's layer count at the top level "
            "(or load the drafter with its target)"
        )
    num_target_layers = _int(num_target_layers, "num_target_layers")
    layer_ids = _lookup(d, "target_layer_ids")
    if layer_ids is None:
        layer_ids = default_target_layer_ids(num_target_layers, num_hidden_layers)
    elif not isinstance(layer_ids, list) or not layer_ids:
        raise ValueError(f"dflash_config.target_layer_ids must be a non-empty list of ints, got {layer_ids!r}")
    mask_token_id = _lookup(d, "mask_token_id", target_mask_token_id)
    if mask_token_id is None:
        try:
            mask_token_id = default_mask_token_id(
                SimpleNamespace(model_type=d.get("model_type"), vocab_size=d["vocab_size"])
            )
        except ValueError:
            raise ValueError(
                "mask_token_id is missing and not implied for this vocabulary: add dflash_config.mask_token_id "
                "(the reserved id the drafter was trained with), or load the drafter with its target"
            ) from None
    shift_label = _lookup(d, "shift_label", False)
    if not isinstance(shift_label, bool):
        raise ValueError(f"dflash_config.shift_label must be true or false, got {shift_label!r}")
    fields: dict[str, Any] = dict(
        num_target_layers=num_target_layers,
        target_layer_ids=layer_ids,
        mask_token_id=_int(mask_token_id, "dflash_config.mask_token_id"),
        block_size=_int(_lookup(d, "block_size", 16), "block_size"),
        head=head,
        shift_label=shift_label,
        pure_draft_prefix_len=_int(_lookup(d, "pure_draft_prefix_len", 0), "dflash_config.pure_draft_prefix_len"),
    )
    if head is None:
        return fields
    for flag in _UNSUPPORTED_FLAGS:
        if _lookup(d, flag, False):
            raise ValueError(f"dflash_config.{flag}=true is a Domino head variant this code does not implement")
    for key, field_name in (("gru_hidden_dim", "gru_hidden_dim"), ("emb_dim", "correction_rank")):
        value = _lookup(d, key)
        if value is None:
            raise ValueError(
                f"a Domino drafter needs {key} ({' or '.join(_where(key))}), and the config has none: "
                f"add it ({'the GRU state width' if key == 'gru_hidden_dim' else 'the rank of the correction'})"
            )
        fields[field_name] = _int(value, key)
    return fields


def _draft_vocab_size(d: dict[str, Any]) -> int | None:
    """EAGLE-3's top-level `draft_vocab_size`; equal to `vocab_size` (or absent) means the full vocabulary."""
    n = d.get("draft_vocab_size")
    return None if n is None or n == d["vocab_size"] else int(n)
