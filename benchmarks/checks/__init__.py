"""The stages of `benchmarks/gpu_check.py`: each module's `run(ctx)` returns (results, tables) or raises."""
