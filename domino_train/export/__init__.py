"""Exporting a trained drafter: the export folder from a run or a Lightning / DeepSpeed checkpoint
(folder.py) and its model card (model_card.py)."""
