"""The export folder of a trained drafter, written at the end of fit and by `domino-export`.

`write_export` writes the public layout (config.json + model.safetensors) plus the data manifest, the run
config and a model card; `export_checkpoint` does it from a Lightning `.ckpt` file or a DeepSpeed ZeRO-2/3
directory, refusing a checkpoint that lost part of the drafter (never exported with random weights), and a
destination that holds anything but an earlier export (`check_destination`) unless forced.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import torch
import yaml

from domino_train.export.model_card import write_model_card
from inference.drafter import DominoDrafter
from inference.drafter.checkpoint import CONFIG_NAME, WEIGHTS_NAME, DrafterCheckpointError, read_config, save_checkpoint
from inference.drafter.config import DrafterConfig
from inference.drafter.training_data import DATA_MANIFEST_NAME

PREFIX = "drafter."
RUN_CONFIG_NAME, CARD_NAME = "training_config.yaml", "README.md"
EXPORT_FILES = frozenset({CONFIG_NAME, WEIGHTS_NAME, DATA_MANIFEST_NAME, RUN_CONFIG_NAME, CARD_NAME})  # what it writes


def write_export(
    drafter: torch.nn.Module,
    dirpath: Path,
    dtype: torch.dtype,
    manifest: dict[str, Any],
    run_config: Any,
    metrics: dict[str, float] | None = None,
    decode_results: dict[str, Any] | None = None,
) -> Path:
    """The export folder: weights + config in the public layout, plus data manifest, run config and a
    model card (README.md) from the run's last metrics and, when given, a domino-decode results.json."""
    save_checkpoint(drafter, dirpath, dtype)
    (dirpath / DATA_MANIFEST_NAME).write_text(json.dumps(manifest or {}, indent=2))
    if run_config is not None:
        (dirpath / RUN_CONFIG_NAME).write_text(yaml.safe_dump(run_config, sort_keys=False))
    else:  # an earlier export's run config would describe another run
        (dirpath / RUN_CONFIG_NAME).unlink(missing_ok=True)
    write_model_card(dirpath, drafter.config, run_config, manifest or {}, metrics or {}, decode_results)
    return dirpath


def check_destination(out_dir: Path) -> None:
    """Refuse (`ValueError`) an existing `out_dir` that is not empty and not an earlier export.

    An earlier export holds only files an export writes, and its config.json is a drafter's: it may be
    replaced. Anything else (a target model's folder, whose config.json and weights an export would replace
    while leaving its tokenizer beside them) is refused."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ValueError(f"{out_dir} is a file: name a folder to export the drafter into")
    names = sorted(p.name for p in out_dir.iterdir())
    if not names:
        return
    foreign = [n for n in names if n not in EXPORT_FILES]
    if not foreign:
        try:
            read_config(out_dir)
            return
        except DrafterCheckpointError:
            pass
    held = f"it holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}" if foreign else "no drafter config"
    raise ValueError(
        f"{out_dir} is not empty and not an earlier drafter export ({held}): export into a new or empty "
        "folder, or pass --force to write the drafter's files into it anyway"
    )


# Everything a ZeRO checkpoint directory of ours names besides tensors (DeepSpeed pickles its own config
# enums and Python containers next to the shards); anything else is refused before DeepSpeed loads it.
ZERO_GLOBALS = frozenset(
    {
        "deepspeed.runtime.fp16.loss_scaler.LossScaler",
        "deepspeed.runtime.zero.config.ZeroStageEnum",
        "deepspeed.utils.tensor_fragment.fragment_address",
    }
)


def _names_in_pickle(path: Path) -> set[str]:
    """The callables a pickle would import and run on load, read from its opcodes (nothing executed)."""
    try:
        return set(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except Exception as e:  # a damaged or foreign file
        raise DrafterCheckpointError(f"{path}: cannot read the checkpoint ({type(e).__name__}: {e})") from e


def _refuse_code(path: Path, names: set[str], allowed: frozenset[str] = frozenset()) -> None:
    unknown = sorted(names - allowed)
    if unknown:
        raise DrafterCheckpointError(
            f"{path}: refused, loading it would run code: its pickle names {unknown}, which a domino_train "
            "checkpoint never holds. Export only checkpoints from runs you trust; re-save this one as a plain "
            "state dict of tensors if you trust its source."
        )


def read_training_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint dict of a `.ckpt` file, or of a ZeRO directory consolidated to fp32.

    No code from the file runs: a `.ckpt` loads with `weights_only=True` (tensors and plain containers),
    and every pickle of a ZeRO directory is checked against `ZERO_GLOBALS` before DeepSpeed reads it.
    """
    path = Path(path)
    if path.is_dir():
        from lightning.pytorch.utilities.deepspeed import convert_zero_checkpoint_to_fp32_state_dict

        for part in sorted(path.rglob("*.pt")):
            _refuse_code(part, _names_in_pickle(part), ZERO_GLOBALS)
        with tempfile.TemporaryDirectory() as tmp:
            convert_zero_checkpoint_to_fp32_state_dict(str(path), str(Path(tmp) / "consolidated.ckpt"))
            return torch.load(Path(tmp) / "consolidated.ckpt", map_location="cpu", weights_only=True)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint (a .ckpt file or a DeepSpeed checkpoint directory)")
    _refuse_code(path, _names_in_pickle(path))
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError / UnpicklingError / EOFError on damaged files
        raise DrafterCheckpointError(f"{path}: cannot read the checkpoint ({type(e).__name__}: {e})") from e


def drafter_from_checkpoint(ckpt: dict[str, Any], source: str = "checkpoint") -> DominoDrafter:
    if "drafter_config" not in ckpt:
        raise DrafterCheckpointError(f"{source}: no drafter_config; was it written by domino_train?")
    drafter = DominoDrafter(DrafterConfig.from_hf_dict(ckpt["drafter_config"]))
    state = {k[len(PREFIX) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(PREFIX)}
    expected = set(drafter.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise DrafterCheckpointError(f"{source}: missing drafter weights {missing}; unexpected {unexpected}")
    drafter.load_state_dict({k: v.float() for k, v in state.items()})
    return drafter


def export_checkpoint(
    ckpt_path: str | Path,
    out_dir: str | Path,
    dtype: torch.dtype = torch.bfloat16,
    decode_results: dict[str, Any] | None = None,
    force: bool = False,
) -> Path:
    """Write the drafter folder (weights, config, manifest, run config, model card) from a checkpoint.

    `out_dir` must be new, empty or an earlier export (`check_destination`) unless `force`."""
    if not force:
        check_destination(Path(out_dir))
    ckpt = read_training_checkpoint(ckpt_path)
    drafter = drafter_from_checkpoint(ckpt, str(ckpt_path))
    run_config = (ckpt.get("hyper_parameters") or {}).get("run_config")
    manifest, metrics = ckpt.get("data_manifest") or {}, ckpt.get("metrics") or {}
    return write_export(drafter, Path(out_dir), dtype, manifest, run_config, metrics, decode_results)
