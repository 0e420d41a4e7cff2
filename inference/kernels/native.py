"""Native CPU kernels: C sources shipped with the package, compiled once per machine with the system's C
compiler into `$DOMINO_CACHE/kernels/native/` and called through ctypes.

`bf16w_linear.c`: a linear whose weights are stored in bf16 and whose inputs, products and sums are fp32
(the `bf16w` kernel of `linear.py`, for the `bf16-weights` precision). On a CPU without bf16 instructions,
PyTorch offers either fp32 weights (twice the bytes a memory-bound decode step must read) or bf16
compute (emulated: a 16-row bf16 matmul on the AVX2 EPYC costs 20x its one-row call). This kernel reads
half the bytes and computes at fp32 speed: on that EPYC, SmolLM2's 576 x 3072 projection takes 0.23 ms at
one row and 0.50 ms at sixteen (fp32 on oneDNN: 0.34 and 0.68 ms).

Where there is no C compiler, no AVX2 + FMA, or the build fails, the kernel is unavailable and says why;
nothing else depends on it.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import torch

from inference.precision import cpu_flags

SOURCE = "bf16w_linear.c"
CFLAGS = ("-O3", "-mavx2", "-mfma", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC")


def native_dir() -> Path:
    return Path(os.environ.get("DOMINO_CACHE", Path.home() / ".cache" / "domino")) / "kernels" / "native"


@functools.lru_cache(maxsize=1)
def _library() -> tuple[ctypes.CDLL | None, str | None]:
    """The compiled kernel library, or None and why not."""
    if not {"avx2", "fma"} <= cpu_flags():
        return None, "the CPU lacks AVX2 + FMA"
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc / gcc) to build it"
    source = resources.files("inference.kernels").joinpath(SOURCE).read_bytes()
    digest = hashlib.sha256(source + " ".join(CFLAGS).encode() + compiler.encode()).hexdigest()[:16]
    path = native_dir() / f"bf16w_linear-{digest}.so"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        src = path.with_suffix(f".{os.getpid()}.c")
        src.write_bytes(source)
        tmp = path.with_suffix(f".{os.getpid()}.so")
        try:
            done = subprocess.run([compiler, *CFLAGS, str(src), "-o", str(tmp)], capture_output=True, text=True)
        finally:
            src.unlink(missing_ok=True)
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            return None, f"building {SOURCE} failed: {done.stderr.strip().splitlines()[-1:]}"
        tmp.replace(path)
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        return None, f"loading {path.name} failed: {e}"
    fn = lib.bf16w_linear
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 3 + [ctypes.c_int]
    fn.restype = None
    return lib, None


def bf16w_unavailable_reason() -> str | None:
    """Why the bf16-weight kernel cannot run here, or None when it can."""
    return _library()[1]


def bf16w_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`x` [..., K] fp32 times `weight` [N, K] bf16 (transposed), plus `bias` [N] fp32; fp32 out."""
    lib, reason = _library()
    if lib is None:
        raise RuntimeError(f"the bf16w kernel is unavailable: {reason}")
    if x.dtype != torch.float32 or weight.dtype != torch.bfloat16 or x.device.type != "cpu":
        raise TypeError(f"bf16w_linear takes CPU fp32 inputs and bf16 weights, got {x.dtype} x {weight.dtype}")
    n, k = weight.shape
    flat = x.reshape(-1, k).contiguous()
    out = torch.empty(flat.shape[0], n, dtype=torch.float32)
    bias_ptr = 0 if bias is None else bias.contiguous().data_ptr()
    weight = weight.contiguous()
    lib.bf16w_linear(
        flat.data_ptr(), weight.data_ptr(), bias_ptr, out.data_ptr(), flat.shape[0], n, k, torch.get_num_threads()
    )
    return out.view(*x.shape[:-1], n)
