"""The default device: the one place that decides where a target, its drafters and a decoding run go when
nothing names a device (a CUDA GPU when there is one, else the CPU)."""

from __future__ import annotations

import torch


def default_device() -> str:
    """`cuda` when a CUDA device is visible, else `cpu`."""
    return "cuda" if torch.cuda.is_available() else "cpu"
