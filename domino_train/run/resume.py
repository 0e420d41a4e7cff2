"""Resuming a run from its own directory: `ckpt_path=auto`, and a guard against continuing a different recipe.

A requeued or resubmitted job lands in the same run directory (a named `run_id`, `slurm-<job id>`, or the
sweep's `<sweep_id>/<job number>_<task>`), and `auto` resumes from that directory's `last.ckpt` when there is
one. Sweep job numbers follow the order of the swept values, so a sweep resubmitted with values inserted in
the middle would hand one grid cell's directory to another: `run_identity.json` records the recipe (and
seed) a directory was started with, and `auto` refuses to continue it with a different one. A `last.ckpt`
that cannot be read (a kill during its write truncates it) is passed over for the newest readable checkpoint
beside it, with a warning naming it.
"""

from __future__ import annotations

import json
import logging
import os
import zipfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from domino_train.run.variant import canonical_recipe, variant_config

log = logging.getLogger(__name__)
IDENTITY_FILE = "run_identity.json"


class ResumeMismatchError(ValueError):
    """`ckpt_path=auto` found a checkpoint that was trained with another recipe or seed (bad input: the
    console script ends with its one line, e.g. for a sweep resubmitted with its values reordered)."""


def run_identity(cfg: DictConfig) -> dict[str, Any]:
    """The recipe and seed that make a run directory's checkpoints resumable by this config."""
    return {"seed": cfg.seed, **variant_config(cfg)}


def _checkpoint_dir(cfg: DictConfig) -> Path | None:
    ckpt = (cfg.get("callbacks") or {}).get("model_checkpoint")
    return Path(ckpt.dirpath) if ckpt is not None and ckpt.get("dirpath") else None


def resolve_ckpt_path(cfg: DictConfig) -> str | None:
    """`cfg.ckpt_path` as `Trainer.fit` takes it.

    `auto`: this run's `last.ckpt` (a file, or a DeepSpeed directory) when it exists, else None (a fresh
    start); refused with `ResumeMismatchError` when the directory was started with another recipe or seed.
    An unreadable `last.ckpt` gives way to the newest readable checkpoint beside it (`newest_readable`).
    Other values (null, `last`, a path) pass through unchanged.
    """
    if cfg.ckpt_path != "auto":
        return cfg.ckpt_path
    ckpt_dir = _checkpoint_dir(cfg)
    last = ckpt_dir / "last.ckpt" if ckpt_dir is not None else None
    if last is None or not last.exists():
        return None
    check_identity(Path(cfg.paths.output_dir), run_identity(cfg))
    resume = newest_readable(last)
    log.info("ckpt_path=auto: resuming from %s", resume)
    return str(resume)


def readable(checkpoint: Path) -> bool:
    """Whether a checkpoint (a `torch.save` file, or a DeepSpeed directory of them) can be opened.

    `torch.save` writes a zip whose central directory comes last, so a file cut short by a kill has none:
    checking for it reads a few bytes, where loading would read the whole optimizer state."""
    files = sorted(checkpoint.rglob("*.pt")) if checkpoint.is_dir() else [checkpoint]
    try:
        for f in files:
            with zipfile.ZipFile(f):
                pass
    except (zipfile.BadZipFile, OSError):
        return False
    return bool(files)


def newest_readable(last: Path) -> Path:
    """`last` when it is readable, else the newest readable checkpoint beside it (a warning names `last`).

    Raises `ValueError` when none is readable."""
    if readable(last):
        return last
    others = sorted((p for p in last.parent.glob("*.ckpt") if p != last), key=lambda p: p.stat().st_mtime)
    fallback = next((p for p in reversed(others) if readable(p)), None)
    if fallback is None:
        raise ValueError(
            f"ckpt_path=auto: {last} cannot be read (cut short?) and no other checkpoint beside it can: "
            "delete it to start this run afresh, or pass ckpt_path=null (or another checkpoint's path)"
        )
    log.warning("ckpt_path=auto: %s cannot be read (cut short?): resuming from %s instead", last, fallback)
    return fallback


def check_identity(run_dir: Path, identity: dict[str, Any]) -> None:
    """Refuse to continue `run_dir` when its recorded identity differs from `identity` (no record: accept)."""
    path = run_dir / IDENTITY_FILE
    if not path.is_file():
        return
    recorded = canonical_recipe(json.loads(path.read_text()))  # a record written before a `_target_` moved
    diff = sorted(k for k in recorded.keys() | identity.keys() if recorded.get(k) != identity.get(k))
    if diff:
        shown = ", ".join(f"{k}: {recorded.get(k)!r} -> {identity.get(k)!r}" for k in diff[:4])
        more = f" (+{len(diff) - 4} more)" if len(diff) > 4 else ""
        raise ResumeMismatchError(
            f"{run_dir} was started with another recipe ({shown}{more}): resume it with the same overrides, start "
            "a new run (new run_id / sweep_id), or pass ckpt_path=last to continue it anyway (a sweep resubmitted "
            "with values inserted before old ones renumbers its jobs: append new values to the first swept key)"
        )


def record_identity(cfg: DictConfig) -> None:
    """Write `run_identity.json` into the run directory (atomically: every rank of a job writes the same)."""
    run_dir = Path(cfg.paths.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / f".{IDENTITY_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(run_identity(cfg), indent=1, sort_keys=True, default=str))
    os.replace(tmp, run_dir / IDENTITY_FILE)
