"""The dependency rule, enforced: `inference` serves drafters without Lightning and never reaches back into training.

Serving stacks and `domino-decode` install and import `inference` alone; one stray import of Lightning or
`domino_train` would make every serving process pay for (and depend on) the training stack. Every module
under `inference/` is imported (found by walking the package's files, so a new module is checked without
being listed here) in a fresh interpreter, so that modules the test session already loaded cannot hide an import.
The forbidden packages are blocked there rather than loaded: each module that imports one is caught and
named, not only the first.
"""

import json
import subprocess
import sys

FORBIDDEN = ("lightning", "pytorch_lightning", "domino_train")

_PROBE = """
import importlib, importlib.util, json, pathlib, sys, traceback

forbidden = set(sys.argv[1:])
offenders, broken = {}, {}


class Block:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top not in forbidden:
            return None
        frame = sys._getframe(1)
        while frame is not None and not frame.f_globals.get("__name__", "").startswith("inference"):
            frame = frame.f_back
        importer = frame.f_globals["__name__"] if frame is not None else "?"
        offenders.setdefault(importer, []).append(top)
        raise ModuleNotFoundError(f"{top} is forbidden in inference", name=top)


sys.meta_path.insert(0, Block())
root = pathlib.Path(importlib.util.find_spec("inference").origin).parent
names = []
for file in sorted(root.rglob("*.py")):
    parts = file.relative_to(root.parent).with_suffix("").parts
    names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name not in forbidden:
            broken[name] = traceback.format_exc(limit=1)
    except Exception:
        broken[name] = traceback.format_exc(limit=1)
print(json.dumps({"modules": names, "offenders": offenders, "broken": broken}))
"""


def test_no_module_of_inference_imports_lightning_or_domino_train():
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *FORBIDDEN], capture_output=True, text=True, check=True, timeout=600
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"inference.cli.decode", "inference.drafter.draft_vocab"} <= set(report["modules"])  # the walk works
    offenders = {module: sorted(set(tops)) for module, tops in report["offenders"].items()}
    assert not offenders, f"modules of inference import what serving must not load: {offenders}"
    assert not report["broken"], f"modules of inference fail to import: {report['broken']}"
