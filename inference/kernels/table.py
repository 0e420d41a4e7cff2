"""The kernel table: for each linear shape, precision and row bucket, every available kernel timed on this
machine, and the fastest one chosen. Measured once per machine and cached as JSON.

Entries are per precision (`linear.PRECISIONS`), not per dtype: `bf16-weights` has kernels that
`float32` must not use. The cache key is what changes the answer: CPU model and flags, thread count,
torch version and its oneDNN / MKL build. The file lives under `$DOMINO_CACHE/kernels/` (default
`~/.cache/domino`); an entry is reused only for the same key, precision, shape and row bucket, and a new
shape is measured and added.

Timing: the fastest of `repeats` calls after two untimed ones (the minimum, not the median: another
process on a 2-core machine stalls a two-thread call at its barrier for a scheduler tick, 4-16 ms, and
the minimum is what the kernel costs when it runs), each call on one of several copies of the
weight (together past the last-level cache), because in a forward every layer's weights arrive from
memory, not from a cache a microbenchmark would keep warm. A kernel already 3x slower than the best at a
bucket is not timed again at larger buckets (bf16 without bf16 instructions: seconds per call).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from inference.kernels.linear import ROW_BUCKETS, available_kernels, bind_kernel, build_layout, compute_dtype
from inference.precision import cpu_flags

# Bytes of weight copies a timing cycles through: past the L3 of the CPUs seen (32 MB).
ROTATION_BYTES = 96 * 2**20
MAX_COPIES = 32
GIVE_UP_RATIO = 3.0
LONE_LAYOUT_GAIN = 1.25  # a weight copy serving one row bucket alone must make it this much faster
OUTLIER_RATIO = 1.2  # a row count timed this much slower than the next larger one is timed again

Shape = tuple[int, int]  # (out_features, in_features)
Timer = Callable[..., float]  # (kernel, precision, shape, rows, bias=...) -> seconds


def cache_dir() -> Path:
    return Path(os.environ.get("DOMINO_CACHE", Path.home() / ".cache" / "domino")) / "kernels"


def cpu_model() -> str:
    """The CPU's model name (`/proc/cpuinfo`), else what `platform` knows."""
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine()


def machine_fingerprint() -> dict[str, object]:
    """What the kernel choice depends on besides shape and precision."""
    return {
        "cpu": cpu_model(),
        "flags_sha": hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:12],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "build_sha": hashlib.sha256(torch.__config__.show().encode()).hexdigest()[:12],  # MKL / oneDNN versions
    }


def machine_key() -> str:
    text = json.dumps(machine_fingerprint(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def entry_key(precision: str, shape: Shape, bias: bool, rows: int) -> str:
    return f"{precision}:{shape[0]}x{shape[1]}{'+b' if bias else ''}:r{rows}"


@dataclass
class KernelTable:
    """Seconds per call of each kernel, per (precision, shape, bias, row bucket); `choice` picks the fastest."""

    entries: dict[str, dict[str, float]] = field(default_factory=dict)
    fingerprint: dict[str, object] = field(default_factory=machine_fingerprint)
    path: Path | None = None

    def choice(self, precision: str, shape: Shape, bias: bool, rows: int) -> str:
        times = self.entries[entry_key(precision, shape, bias, rows)]
        return min(times, key=times.__getitem__)

    def plan(self, precision: str, shape: Shape, bias: bool) -> dict[int, str]:
        """The kernel of every row bucket for one linear: the fastest, except that a layout only one bucket
        would use (a copy of the weight held for it alone) must beat the kernels already held there by
        `LONE_LAYOUT_GAIN`; `plain` reads the weight itself and is always held."""
        plan = {rows: self.choice(precision, shape, bias, rows) for rows in ROW_BUCKETS}
        for rows, kernel in plan.items():
            if kernel == "plain" or sum(k == kernel for k in plan.values()) > 1:
                continue
            times = self.entries[entry_key(precision, shape, bias, rows)]
            held = {k for k in plan.values() if k != kernel} | {"plain"}
            fallback = min((k for k in times if k in held), key=times.__getitem__, default=None)
            if fallback is not None and times[fallback] <= LONE_LAYOUT_GAIN * times[kernel]:
                plan[rows] = fallback
        return plan

    def seconds(self, precision: str, shape: Shape, bias: bool, rows: int) -> float:
        """The chosen kernel's seconds at `rows` (a bucket)."""
        times = self.entries[entry_key(precision, shape, bias, rows)]
        return min(times.values())

    def has(self, precision: str, shape: Shape, bias: bool) -> bool:
        return all(entry_key(precision, shape, bias, r) in self.entries for r in ROW_BUCKETS)

    def measure(
        self, precision: str, shapes: Iterable[tuple[Shape, bool]], timer: Timer | None = None
    ) -> list[tuple[Shape, bool]]:
        """Time every kernel for the shapes not yet in the table; returns those measured."""
        timer = timer or time_kernel
        wanted = dict.fromkeys((tuple(s), b) for s, b in shapes)
        todo = [(s, b) for s, b in wanted if not self.has(precision, s, b)]
        for shape, bias in todo:
            kernels = list(available_kernels(precision))
            for rows in ROW_BUCKETS:
                times = {k: timer(k, precision, shape, rows, bias=bias) for k in kernels}
                self.entries[entry_key(precision, shape, bias, rows)] = times
                best = min(times.values())
                kernels = [k for k in kernels if times[k] <= GIVE_UP_RATIO * best]
            self._retime_outliers(precision, shape, bias, timer)
        return todo

    def _retime_outliers(self, precision: str, shape: Shape, bias: bool, timer: Timer) -> None:
        """Time again a kernel that measured slower at some row count than at a larger one: more rows
        never cost less, so that sample was disturbed (another process took the core); keep the faster."""
        for small, large in itertools.pairwise(ROW_BUCKETS):
            few, many = (self.entries[entry_key(precision, shape, bias, r)] for r in (small, large))
            for kernel in set(few) & set(many):
                if few[kernel] > OUTLIER_RATIO * many[kernel]:
                    few[kernel] = min(few[kernel], timer(kernel, precision, shape, small, bias=bias))

    def save(self, path: Path | None = None) -> Path:
        """Write the table atomically (to `path`, else where it was loaded from, else the machine's file)."""
        path = Path(path or self.path or cache_dir() / f"{machine_key()}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"fingerprint": self.fingerprint, "entries": self.entries}, indent=1))
        tmp.replace(path)
        self.path = path
        return path

    @classmethod
    def load(cls, path: Path | None = None) -> KernelTable:
        """This machine's table (empty when there is none yet, or when the file belongs to another machine)."""
        path = Path(path or cache_dir() / f"{machine_key()}.json")
        fingerprint = machine_fingerprint()
        if path.is_file():
            try:
                raw = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                raw = {}
            if raw.get("fingerprint") == fingerprint:
                return cls(raw.get("entries", {}), fingerprint, path)
        return cls({}, fingerprint, path)


@torch.inference_mode()
def time_kernel(kernel: str, precision: str, shape: Shape, rows: int, bias: bool = False, repeats: int = 9) -> float:
    """The fewest seconds of one `kernel` call on a random [rows, in] input and a cold [out, in] weight."""
    out_f, in_f = shape
    g = torch.Generator().manual_seed(0)
    dtype = compute_dtype(precision)
    weight = (torch.randn(out_f, in_f, generator=g) * in_f**-0.5).to(torch.bfloat16).to(dtype)
    b = torch.randn(out_f, generator=g).to(dtype) if bias else None
    copies = max(1, min(MAX_COPIES, ROTATION_BYTES // max(weight.numel() * weight.element_size(), 1)))
    calls = [bind_kernel(kernel, build_layout(kernel, weight.clone()), b) for _ in range(copies)]
    x = torch.randn(1, rows, in_f, generator=g).to(dtype)
    times = []
    for i in range(repeats + 2):
        fn = calls[i % copies]
        t0 = time.perf_counter()
        fn(x)
        if i >= 2:
            times.append(time.perf_counter() - t0)
        if i == 3 and times[-1] > 0.5:  # a kernel this slow is never chosen: stop early
            break
    return min(times)
