"""Evaluation of decoding methods, as `domino-decode` runs it: prompt sets, the loop and its result files.

`prompt_sets.py` (the papers' prompt sets by name: gsm8k, humaneval, mt-bench, ...), `loop.py` (decode
every prompt with every method, with warm-up and skips) and `results.py` (tau, speedup, losslessness and
the files written). Timing scripts for single components are in the repository's `benchmarks/` folder.
"""
