"""Drafter checkpoints: the HF-style folder the public `*-DFlash-b16` / `*-Domino-b16` drafters use.

`config.json` (see `DrafterConfig.to_hf_dict`) + `model.safetensors` with flat key names
(`layers.{i}...`, `fc.weight`, `hidden_norm.weight`, `norm.weight`, and for Domino
`prefix_gru.weight_{ih,hh}_l0`, `embed_proj.{0,2}.weight`); no embedding, no lm_head. A drafter with a
draft vocabulary also carries EAGLE-3's `d2t` (int64) and `t2d` (bool), kept in their own dtypes.

Loading is strict on purpose: serving stacks skip unknown weights silently, and a drafter that lost its
head serves tau ~ 1. Every problem (missing / unexpected key, shape, dtype, projector type, mismatch with
the target) is collected and raised as one `DrafterCheckpointError` naming them all; a drafter trained for
a target of another shape says so first, with the fix, before the details.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from inference.drafter.config import DrafterConfig
from inference.drafter.draft_vocab import BUFFER_DTYPES
from inference.drafter.weight_names import HEAD_PREFIXES, canonical_key, to_module, to_public

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
_VOCAB_MAP_DTYPES = {k: str(v).removeprefix("torch.") for k, v in BUFFER_DTYPES.items()}  # never cast
_ALLOWED_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


class DrafterCheckpointError(ValueError):
    """A drafter folder that cannot be used as is; the message lists every problem found."""


def export_state_dict(drafter: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The drafter's weights under the public checkpoints' flat key names (`weight_names`)."""
    return {to_public(name): tensor for name, tensor in drafter.state_dict().items()}


def save_checkpoint(drafter: torch.nn.Module, path: str | Path, dtype: torch.dtype = torch.bfloat16) -> Path:
    """Write the folder atomically (a crash never leaves a half-written checkpoint behind)."""
    if dtype not in _ALLOWED_DTYPES.values():
        raise ValueError(f"dtype must be one of {sorted(_ALLOWED_DTYPES)}, got {dtype}")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {
        k: v.detach().to("cpu", v.dtype if k in _VOCAB_MAP_DTYPES else dtype).contiguous()
        for k, v in export_state_dict(drafter).items()
    }
    config = drafter.config.to_hf_dict(dtype)
    with tempfile.TemporaryDirectory(dir=path) as tmp:
        save_file(tensors, os.path.join(tmp, WEIGHTS_NAME), metadata={"format": "pt"})
        with open(os.path.join(tmp, CONFIG_NAME), "w") as f:
            json.dump(config, f, indent=2)
        for name in (WEIGHTS_NAME, CONFIG_NAME):
            os.replace(os.path.join(tmp, name), path / name)
    return path


def read_config_json(path: str | Path) -> dict[str, Any]:
    """`path/config.json` as a dict (DrafterCheckpointError when the folder, the file or its JSON is wrong)."""
    path = Path(path)
    if not path.is_dir():
        raise DrafterCheckpointError(f"{path}: no such drafter folder (expected a directory with {CONFIG_NAME})")
    cfg_file = path / CONFIG_NAME
    if not cfg_file.is_file():
        raise DrafterCheckpointError(f"{path}: {CONFIG_NAME} is missing; is this a drafter export folder?")
    try:
        return json.loads(cfg_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DrafterCheckpointError(f"{cfg_file}: not valid JSON ({e})") from e


def read_config(
    path: str | Path,
    target_num_layers: int | None = None,
    target_mask_token_id: int | None = None,
    raw: dict[str, Any] | None = None,
) -> DrafterConfig:
    """Parse `path/config.json` into a `DrafterConfig` (DrafterCheckpointError on any problem).

    `target_num_layers` / `target_mask_token_id` fill in what a public config may leave to the target.
    `raw`: the file as `read_config_json` already read it (it is then not read again).
    """
    raw = read_config_json(path) if raw is None else raw
    try:
        return DrafterConfig.from_hf_dict(raw, target_num_layers, target_mask_token_id)
    except (KeyError, TypeError, ValueError) as e:
        detail = f"missing field {e}" if isinstance(e, KeyError) else str(e)
        raise DrafterCheckpointError(f"{Path(path) / CONFIG_NAME}: {detail}") from e


def target_mismatches(config: DrafterConfig, target_config: Any) -> list[str]:
    """Every way the drafter does not fit a target (HF config); empty when it fits."""
    problems = []
    n_layers = target_config.num_hidden_layers
    if config.hidden_size != target_config.hidden_size:
        problems.append(f"hidden size {config.hidden_size} != target's {target_config.hidden_size}")
    if config.vocab_size != target_config.vocab_size:
        problems.append(f"vocab size {config.vocab_size} != target's {target_config.vocab_size}")
    if config.num_target_layers != n_layers:
        problems.append(f"num_target_layers {config.num_target_layers} != target's {n_layers} layers")
    beyond = [i for i in config.target_layer_ids if i >= n_layers]
    if beyond:
        problems.append(f"target_layer_ids {beyond} are beyond the target's {n_layers} layers")
    if not 0 <= config.mask_token_id < target_config.vocab_size:
        problems.append(
            f"mask_token_id {config.mask_token_id} is outside the target vocab [0, {target_config.vocab_size})"
        )
    return problems


def wrong_target(config: DrafterConfig, target_config: Any) -> str | None:
    """The cause, first, when the drafter was trained for a target of another shape (hidden size, layers or
    vocabulary): what it was trained for and the fix. None when the shapes agree."""
    trained = (config.hidden_size, config.num_target_layers, config.vocab_size)
    given = (target_config.hidden_size, target_config.num_hidden_layers, target_config.vocab_size)
    if trained == given:
        return None
    return (
        f"this drafter was trained for a target with hidden size {trained[0]} / {trained[1]} layers / vocab "
        f"{trained[2]}, not for this one (hidden size {given[0]} / {given[1]} layers / vocab {given[2]}): pass "
        "that target, or retrain the drafter for this one"
    )


def _read_tensors(weights: Path) -> tuple[dict[str, torch.Tensor], dict[str, tuple[str, tuple[int, ...]]]]:
    """The file's tensors and their (dtype name, shape), under `canonical_key` names."""
    try:
        with safe_open(str(weights), framework="pt") as f:
            meta = {}
            tensors = {}
            spelled: dict[str, str] = {}
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                key = canonical_key(name)
                if key in spelled:
                    raise DrafterCheckpointError(
                        f"{weights}: {spelled[key]!r} and {name!r} are the same weight: keep one of them"
                    )
                spelled[key] = name
                t = f.get_tensor(name)
                tensors[key] = t
                meta[key] = (str(t.dtype).removeprefix("torch."), tuple(t.shape))
    except DrafterCheckpointError:
        raise
    except Exception as e:  # safetensors raises its own error types (and OSError) on corrupt files
        raise DrafterCheckpointError(
            f"{weights}: cannot read safetensors ({type(e).__name__}: {e}); the file is corrupt or "
            "truncated: export it again or re-download it"
        ) from e
    return tensors, meta


@dataclass
class CheckpointAudit:
    """What `audit_checkpoint` found: every problem, the lead cause to name first, and what a load needs."""

    problems: list[str] = field(default_factory=list)
    lead: str = ""  # the drafter was trained for another target: said before the details
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)  # by public key (`canonical_key`)
    file_dtype: torch.dtype | None = None  # the float dtype the weights are stored in

    def raise_if_any(self, path: Path) -> None:
        if self.problems:
            raise DrafterCheckpointError(f"{path}: {self.lead}" + "; ".join(self.problems))


def _key_problems(
    expected: dict[str, tuple[int, ...]], meta: dict[str, tuple[str, tuple[int, ...]]], declared: Any, has_head: bool
) -> list[str]:
    """Missing and unexpected keys, wrong shapes and dtypes, in that order."""
    problems = [f"missing key {key}" for key in sorted(set(expected) - set(meta))]
    for key in sorted(set(meta) - set(expected)):
        hint = ""
        if "embed_tokens" in key or "lm_head" in key:
            hint = " (the drafter must not hold the target's embedding / lm_head)"
        elif key.startswith(HEAD_PREFIXES) and not has_head:
            hint = (
                " (a Domino head, but the config declares none: set dflash_config.projector_type to 'domino' "
                "with its emb_dim and gru_hidden_dim)"
            )
        problems.append(f"unexpected key {key}{hint}")
    for key in sorted(set(meta) & set(expected)):
        file_dtype, shape = meta[key]
        if shape != expected[key]:
            problems.append(f"{key}: shape {list(shape)} != expected {list(expected[key])}")
        if key in _VOCAB_MAP_DTYPES:
            if file_dtype != _VOCAB_MAP_DTYPES[key]:
                problems.append(f"{key}: dtype {file_dtype} != {_VOCAB_MAP_DTYPES[key]} (the draft vocabulary map)")
        elif declared in _ALLOWED_DTYPES and file_dtype != declared:
            problems.append(f"{key}: dtype {file_dtype} != config's {declared}")
        elif file_dtype not in _ALLOWED_DTYPES:
            problems.append(f"{key}: dtype {file_dtype} is not a float dtype a drafter can use")
    return problems


def audit_checkpoint(
    model: torch.nn.Module, path: str | Path, target_config: Any | None = None, raw: dict[str, Any] | None = None
) -> CheckpointAudit:
    """Every problem of `path`'s weights for `model` (built from `read_config(path)`) and, with
    `target_config`, for that target; a file that cannot be read at all raises `DrafterCheckpointError`.

    `raw`: `config.json` as `read_config_json` already read it. Without weights the audit stops there.
    """
    path, config, audit = Path(path), model.config, CheckpointAudit()
    if target_config is not None:
        cause = wrong_target(config, target_config)
        audit.lead = f"{cause}. Details: " if cause else ""
        audit.problems += [f"does not match the target: {p}" for p in target_mismatches(config, target_config)]
    weights = path / WEIGHTS_NAME
    if not weights.is_file():
        pickled = (path / "pytorch_model.bin").is_file()
        hint = " (pickled pytorch_model.bin is not loaded: convert it to safetensors)" if pickled else ""
        audit.problems.append(f"{WEIGHTS_NAME} is missing{hint}")
        return audit
    audit.tensors, meta = _read_tensors(weights)
    raw = read_config_json(path) if raw is None else raw
    declared = raw.get("torch_dtype") or raw.get("dtype")
    if declared is not None and declared not in _ALLOWED_DTYPES:
        audit.problems.append(f"config dtype {declared!r} is not one of {sorted(_ALLOWED_DTYPES)}")
    expected = {k: tuple(v.shape) for k, v in export_state_dict(model).items()}
    audit.problems += _key_problems(expected, meta, declared, config.has_head)
    float_dtypes = {d for k, (d, _) in meta.items() if k not in _VOCAB_MAP_DTYPES}
    if declared is None and len(float_dtypes) > 1:
        audit.problems.append(f"mixed dtypes {sorted(float_dtypes)} and no dtype in the config")
    if not audit.problems:
        audit.file_dtype = _ALLOWED_DTYPES[declared or next(iter(float_dtypes))]
    return audit


def load_checkpoint(
    model: torch.nn.Module,
    path: str | Path,
    target_config: Any | None = None,
    dtype: torch.dtype | None = None,
    raw: dict[str, Any] | None = None,
) -> None:
    """Validate `path`'s weights against `model` (built from `read_config(path)`, e.g. on meta) and load them.

    `dtype=None` keeps the file's dtype. With `target_config`, also check the drafter fits that target.
    `raw`: `config.json` as `read_config_json` already read it. Raises `DrafterCheckpointError` naming every
    problem `audit_checkpoint` finds.
    """
    audit = audit_checkpoint(model, path, target_config, raw)
    audit.raise_if_any(Path(path))
    load_dtype = dtype or audit.file_dtype
    state = {to_module(key): t if key in _VOCAB_MAP_DTYPES else t.to(load_dtype) for key, t in audit.tensors.items()}
    model.load_state_dict(state, strict=True, assign=True)
    vocab_problems = model.vocab.problems()
    if vocab_problems:
        raise DrafterCheckpointError(f"{path}: " + "; ".join(vocab_problems))
