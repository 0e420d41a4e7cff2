"""`domino-decode`: measure tau, speedup and losslessness of decoding methods on benchmark prompts.

Hydra config `conf/decode.yaml` (the target comes from the `conf/target/` group shared with training).
Everything that can be refused is refused before the target is loaded: unknown methods, verify rules,
tree options or benchmarks, a missing prompt set, a drafter that does not fit the target (the checkpoint
validator's message) and a plain DFlash drafter for a method that needs the Domino head.

Each finished prompt's records go to `records.jsonl` in the run directory as it finishes; rerunning the
same command with `hydra.run.dir=<that directory>` resumes a stopped run without redoing finished prompts,
and the result files are always rebuilt from all the records.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from domino_conf import CONF_DIR
from inference.cli.config_keys import refuse_unknown_keys
from inference.cli.errors import one_line_errors, refuse_slips
from inference.cli.target_folder import target_folder_overrides
from inference.eval.evaluate import evaluate

log = logging.getLogger("domino-decode")


def run(cfg: DictConfig, out_dir: Path) -> dict[str, Any]:
    """The whole evaluation (`inference.eval.evaluate`); prints results.md and returns the report written
    to `out_dir/results.json`."""
    report = evaluate(cfg, out_dir)
    print((out_dir / "results.md").read_text())
    log.info("results in %s", out_dir)
    return report


# Overrides whose key is not in conf/decode.yaml, where Hydra's own hint ("use +drafter=...") would mislead.
SLIPS = {
    "drafter": "the drafter folder is `drafter_path=PATH` (`baseline_drafter_path=PATH` for dflash / ddtree)",
    "baseline_drafter": "the baselines' drafter folder is `baseline_drafter_path=PATH`",
    "method": "methods are a list: `methods=[ar,domino]`",
}


def _run_dir() -> Path:
    return Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="decode")
@one_line_errors("domino-decode", resume=lambda cfg: ("hydra.run.dir", _run_dir()))
def _decode(cfg: DictConfig) -> None:
    log.info("run folder: %s", _run_dir())
    run(cfg, _run_dir())


def main() -> None:
    """The `domino-decode` console script."""
    sys.argv[1:] = target_folder_overrides("domino-decode", CONF_DIR, sys.argv[1:])  # before Hydra reads them
    refuse_slips("domino-decode", sys.argv[1:], SLIPS)
    refuse_unknown_keys("domino-decode", CONF_DIR, "decode", sys.argv[1:])
    _decode()


if __name__ == "__main__":
    main()
