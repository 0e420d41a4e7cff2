"""The method: `DominoLitModule` (module.py: the training step, the draft vocabulary's choice, the
checkpoint hooks), the objective (objectives.py: anchors, per-position weights, the loss, the lambda
schedule, the acceptance metrics) and the start from the target's layers (target_init.py)."""
