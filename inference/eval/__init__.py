"""Evaluation of decoding methods, as `domino-decode` runs it: prompt sets, the loop and its result files.

`evaluate.py` (the whole run as named steps: `options.py`, `drafters.py`, `target.py`, `decoders.py`,
`costs.py`, `datasets.py`, `meta.py`), `prompt_sets.py` (the papers' prompt sets by name: gsm8k, humaneval,
mt-bench, ...), `loop.py` (decode every prompt with every method, with warm-up and skips), `results.py`
(tau, speedup, losslessness and the files written) and `figures.py` (its plots). Timing scripts for single
components are in the repository's `benchmarks/` folder.
"""
