"""The inference CLIs: `domino-decode` and `domino-describe`.

They decode on the CPU threads of what is often a shared machine. With OpenMP's default wait policy a
thread that reaches a barrier first spins, so when another process takes one of two cores every op waits
for a descheduled sibling: `ar` on SmolLM2 fell from 23-28 to 6.5-7.6 tokens/s on 2 AMD EPYC (AVX2)
cores beside one spinning process, and ran 16.5-20.0 with `OMP_WAIT_POLICY=PASSIVE` (quiet: 23.0-25.2,
within the runs' noise; `benchmarks/busy_machine.py`). libgomp reads the policy once, when torch loads, so
it is set here, before any CLI imports torch, unless the user set it.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
