"""The precision rule: which dtype training and, where nothing was measured, the target compute in.

The rule: bf16 wherever the hardware computes it natively, fp32 elsewhere; an explicit dtype always wins.
Natively means an accelerator (CUDA, MPS, XPU), or a CPU whose kernels have bf16 instructions: x86
`avx512_bf16` or AMX (`amx_bf16`), Arm `bf16`.

Decoding does better than a rule on a CPU: a Llama-family target's `dtype: auto` is chosen by measuring
the candidate precisions' kernels on the machine (`inference.kernels.choice.resolve_precision`: fp32,
bf16, and bf16-valued weights with fp32 compute), because the fastest one is not what the flags predict
(on an AVX2 EPYC without bf16 instructions, bf16 weights with fp32 compute beat both). This module keeps
the rule for training, for targets the measurement cannot describe, and for non-CPU devices.

Training follows the same rule as a Lightning precision: `auto` = `bf16-mixed` (autocast; master weights
and optimizer state stay fp32) where bf16 is native, `32-true` elsewhere. The drafter always runs in its
target's dtype.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from collections.abc import Iterable
from pathlib import Path

import torch

from inference.device import default_device

AUTO = "auto"
# CPU feature flags (as /proc/cpuinfo names them) that give bf16 matrix instructions.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (Linux: /proc/cpuinfo; macOS on Apple silicon: `FEAT_BF16` as `bf16`)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):  # x86 / Arm
                return frozenset(value.split())
        return frozenset()
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True)
        except OSError:
            return frozenset()
        return frozenset({"bf16"}) if out.stdout.strip() == "1" else frozenset()
    return frozenset()


def computes_bf16(device: torch.device | str, flags: Iterable[str] | None = None) -> bool:
    """True when `device` computes bf16 natively: any accelerator, or a CPU with bf16 instructions.

    `flags` replaces this CPU's feature flags (tests state the rule with it)."""
    if torch.device(device).type != "cpu":
        return True
    return not BF16_CPU_FLAGS.isdisjoint(cpu_flags() if flags is None else flags)


def resolve_dtype(
    dtype: torch.dtype | str | None, device: torch.device | str, flags: Iterable[str] | None = None
) -> torch.dtype:
    """`dtype` as a torch dtype; `auto` (or None) = bf16 where `device` computes it natively, else fp32."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None or dtype == AUTO:
        return torch.bfloat16 if computes_bf16(device, flags) else torch.float32
    name = dtype.removeprefix("torch.")
    if name not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: use auto, {', '.join(_DTYPES)}")
    return _DTYPES[name]


def resolve_training_precision(precision: str | int, accelerator: str, flags: Iterable[str] | None = None) -> str | int:
    """A Lightning precision; `auto` = `bf16-mixed` where `accelerator` computes bf16 natively, else `32-true`."""
    if precision != AUTO:
        return precision
    device = default_device() if accelerator == "auto" else "cpu" if accelerator == "cpu" else "cuda"
    return "bf16-mixed" if computes_bf16(device, flags) else "32-true"


def training_target_dtype(dtype: torch.dtype | str | None, precision: str | int) -> torch.dtype | str:
    """The frozen target's dtype in a training: an explicit one wins; `auto` follows the training's
    resolved precision (bf16 under `bf16-*`, else fp32), so the drafter's matmuls meet the target's dtype."""
    if dtype is None or dtype == AUTO:
        return torch.bfloat16 if str(precision).startswith("bf16") else torch.float32
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.bfloat16` -> `bfloat16` (how configs, results and model cards name it)."""
    return str(dtype).removeprefix("torch.")
