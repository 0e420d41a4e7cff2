"""The training side's console scripts, one thin file each (the inference side's are in `inference/cli/`).

`train.py` (domino-train), `data.py` (domino-data), `export.py` (domino-export), `report.py` (domino-report).
Each parses its arguments or composes its Hydra config and calls the library; none holds the logic.
"""
