"""The inference CLIs, `domino-decode` and `domino-describe`, and the plumbing every console script shares.

The plumbing: `errors.py` (one-line errors, Ctrl-C), `config_keys.py` (unknown config keys refused) and
`target_folder.py` (`target=<folder>`). `domino-train` and `domino-data` use it too; it lives here because
training may import `inference`, never the reverse, and it stays here rather than in a package of its own
because recorded runs name `inference.cli.errors.WritableRunFolder` and importing it sets the wait policy
below for every command that uses it.

They decode on the CPU threads of what is often a shared machine. With OpenMP's default wait policy a
thread that reaches a barrier first spins, so when another process takes one of two cores every op waits
for a descheduled sibling: `ar` on SmolLM2 fell from 23-28 to 6.5-7.6 tokens/s on 2 AMD EPYC (AVX2)
cores beside one spinning process, and ran 16.5-20.0 with `OMP_WAIT_POLICY=PASSIVE` (quiet: 23.0-25.2,
within the runs' noise; `benchmarks/busy_machine.py`). libgomp reads the policy once, when torch loads, so
it is set here, before any CLI imports torch, unless the user set it.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
