"""The data pipeline: prepare -> regenerate -> tokenize -> (optional) feature cache. See `cli.py`."""
