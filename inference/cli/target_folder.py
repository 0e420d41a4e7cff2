"""`target=<folder>` on a command line: the target group takes config names, a folder goes in `target.spec`.

`target=` picks a file of `conf/target/` (tiny, smollm2, qwen3_8b, ...); Hydra answers any other value with
a multi-line "Could not find 'target//...'". `target_folder_overrides` rewrites `target=<existing folder>`
to `target.spec=<folder>` (the chosen target config, with that folder as the model) before Hydra composes,
and ends a command whose `target=` value is neither a config nor a folder (a hub id, a missing folder)
with one line giving the right form. Sweeps over target configs (`target=tiny,smollm2`) pass unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser

from inference.cli.config_keys import hydra_command

GROUP = "target"


def target_configs(conf_dir: str, config_dir: str | None = None) -> list[str]:
    """The names `target=` takes: the files of the target group in `conf_dir` and in a user's `--config-dir`."""
    folders = [Path(conf_dir, GROUP), *([Path(config_dir, GROUP)] if config_dir else [])]
    return sorted({p.stem for folder in folders if folder.is_dir() for p in folder.glob("*.yaml")})


def _is_sweep(arg: str) -> bool:
    try:
        return OverridesParser.create().parse_override(arg).is_sweep_override()
    except Exception:  # not Hydra's syntax: not a sweep
        return False


def target_folder_overrides(prog: str, conf_dir: str, argv: Sequence[str]) -> list[str]:
    """`argv` with `target=<existing folder>` as `target.spec=<folder>`; exits with one line on a `target=`
    value that is neither a target config nor an existing folder."""
    command = hydra_command(argv)
    configs = target_configs(conf_dir, command.config_dir if command is not None else None)
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if key != GROUP or not sep or value in configs or _is_sweep(arg):
            out.append(arg)
        elif Path(value).expanduser().is_dir():
            out.append(f"{GROUP}.spec={Path(value).expanduser()}")
        else:
            raise SystemExit(
                f"{prog}: error: {arg!r}: {GROUP}= takes a config of conf/{GROUP}/ ({', '.join(configs)}) or an "
                f"existing local folder; for a hub id or another model pass {GROUP}.spec={value}"
            )
    return out
