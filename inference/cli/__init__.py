"""The inference CLIs, `domino-decode` and `domino-describe`, and the plumbing every console script shares.

The plumbing: `errors.py` (one-line errors, Ctrl-C), `config_keys.py` (unknown config keys refused) and
`target_folder.py` (`target=<folder>`). `domino-train` and `domino-data` use it too; it lives here because
training may import `inference`, never the reverse, and it stays here rather than in a package of its own
because recorded runs name `inference.cli.errors.WritableRunFolder` and importing it sets the wait policy
below for every command that uses it.

They decode on the CPU threads of what is often a shared machine, where OpenMP's wait policy decides
whether two threads run 1.8x faster than one (quiet, spinning) or 5x slower (beside a neighbour, spinning):
importing this package chooses it from the machine's load before any CLI imports torch
(`inference.eval.machine_load.choose_wait_policy`), unless the user set `OMP_WAIT_POLICY`.
"""

from inference.eval.machine_load import choose_wait_policy

choose_wait_policy()
