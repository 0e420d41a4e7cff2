"""The dependency rule, enforced: `inference` serves drafters without Lightning and never reaches back into training.

Serving stacks and `domino-decode` install and import `inference` alone; one stray import of Lightning or
`domino_train` would make every serving process pay for (and depend on) the training stack. A fresh
interpreter is used so that modules the test session itself already loaded cannot hide such an import.
"""

import subprocess
import sys

FORBIDDEN = ("lightning", "pytorch_lightning", "domino_train")

_PROBE = """
import sys
import inference
import inference.cli.decode
import inference.cli.describe
loaded = sorted({name.split(".")[0] for name in sys.modules} & set(sys.argv[1:]))
print(",".join(loaded))
"""


def test_importing_inference_loads_neither_lightning_nor_domino_train():
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *FORBIDDEN], capture_output=True, text=True, check=True, timeout=300
    )
    assert result.stdout.strip() == "", f"importing inference loaded: {result.stdout.strip()}"
