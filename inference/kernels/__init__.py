"""CPU kernels chosen by measurement: the linear kernels (`linear.py`) and the per-machine table that picks
one per shape, dtype and row count (`table.py`)."""

from inference.kernels.linear import KERNELS, ROW_BUCKETS, MeasuredLinear, bucket_of
from inference.kernels.table import KernelTable

__all__ = ["KERNELS", "ROW_BUCKETS", "KernelTable", "MeasuredLinear", "bucket_of"]
