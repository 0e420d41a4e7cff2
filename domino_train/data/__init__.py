"""Training data: the `domino-data` pipeline (prepare -> regenerate -> tokenize -> optional feature cache;
`pipeline.py`, run by `domino_train/cli/data.py`) and the data modules training reads
(`tokenized_module.py`: the sets the pipeline writes; `synthetic_module.py`: a corpus a tiny target
writes; both over `base_module.py`, with the rows and batches of `rows.py` in the order of `sampler.py`)."""
