"""Running the method: composing and fitting a run (train.py), its callbacks, loggers and strategies,
Slurm (slurm.py), resuming (resume.py, with the recipe a run folder was started with: variant.py), the
Hydra resolvers (resolvers.py), the run's status file (status.py) and the `_target_` paths that moved
since a run was recorded (moved_targets.py)."""
