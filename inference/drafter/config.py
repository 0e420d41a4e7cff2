"""`DrafterConfig`: every number that shapes a Domino / DFlash drafter, and its `config.json` form.

The drafter is a few Qwen3-style decoder layers of the *target's* width (its block input is the target's
token embedding and its logits come from the target's lm_head), so most fields are read off the target's
Hugging Face config. The serialised form is the one the public `*-DFlash-b16` / `*-Domino-b16`
checkpoints and the serving stacks (SGLang, vLLM, SpecForge) read: Qwen3 fields at the top level plus
`block_size`, `num_target_layers` and a `dflash_config` section. Every public variant of that layout
loads; `layout.public_fields` is the one place that maps them (and the values they imply when absent).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from inference.drafter.layout import (
    DOMINO_PROJECTOR,
    EXPORT_ARCHITECTURE,
    default_target_layer_ids,
    draft_vocab_size_of,
    public_fields,
    repeated_layers_note,
)
from inference.targets.mask_token import default_mask_token_id

log = logging.getLogger(__name__)


def rope_parameters_of(config: Any) -> dict[str, Any]:
    """RoPE settings as one dict (transformers 5 `rope_parameters`, or the legacy `rope_theta` /
    `rope_scaling` fields), read from a target's HF config object or a drafter's `config.json` dict."""

    def get(key: str, default: Any = None) -> Any:
        return config.get(key, default) if isinstance(config, Mapping) else getattr(config, key, default)

    params = get("rope_parameters")
    if isinstance(params, dict) and "rope_theta" in params:
        out = dict(params)
    else:
        scaling = dict(get("rope_scaling") or {})
        out = {**scaling, "rope_theta": float(get("rope_theta", 10000.0))}
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
        if target_layer_ids is None:
            target_layer_ids = default_target_layer_ids(num_target_layers, num_draft_layers)
            if note := repeated_layers_note(target_layer_ids, num_target_layers):
                log.warning("the default rule: %s", note)
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
            target_layer_ids=list(target_layer_ids),
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
        """Parse a drafter `config.json` (ours or any public layout, see `layout.public_fields`).

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
        fields = public_fields(d, target_num_layers, target_mask_token_id)
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
            rope_parameters=rope_parameters_of(d),
            max_position_embeddings=d.get("max_position_embeddings", 40960),
            draft_vocab_size=draft_vocab_size_of(d),
            **fields,
        )
