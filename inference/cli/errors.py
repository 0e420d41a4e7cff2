"""What a console script prints when its input is wrong: one line that names the problem and the fix.

`one_line_errors(prog)` wraps a Hydra task: a bad-input error (`ValueError`, which includes
`DrafterCheckpointError`, and `OSError`, which includes a missing file) ends the command with
`<prog>: error: <message>` and exit status 1 instead of a traceback; `HYDRA_FULL_ERROR=1` keeps the
traceback, as it does for Hydra's own errors. Such an error raised by an object Hydra instantiates (a
target that does not load) arrives wrapped in Hydra's multi-line `InstantiationException`: its own line
is printed. Ctrl-C ends it with exit status 130 and one line,
`<prog>: interrupted; resume with: <the same command with the override that resumes it>`, the override
coming from the task's `resume(cfg)` (the run's id or folder). `WritableRunFolder`, a Hydra callback, ends
a command whose run folder cannot be written with one line before Hydra's own traceback. `refuse_slips`
catches overrides that Hydra would answer with a misleading hint (`drafter=PATH` -> "use +drafter=PATH",
which fails again).
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from hydra.errors import InstantiationException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

F = TypeVar("F", bound=Callable[..., Any])
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError)


def one_line_errors(
    prog: str,
    extra: tuple[type[BaseException], ...] = (),
    resume: Callable[[Any], tuple[str, Any]] | None = None,
) -> Callable[[F], F]:
    """Decorate a task function so bad input ends it with one line on stderr (see the module docstring);
    `resume(cfg)` gives the `(key, value)` override that resumes an interrupted run."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (*USER_ERRORS, *extra, InstantiationException) as e:
                error = e.__cause__ if isinstance(e, InstantiationException) else e
                if not isinstance(error, (*USER_ERRORS, *extra)) or os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                if in_submitit_job():  # the launcher must receive the exception: it records the job's failure
                    print(f"{prog}: error: {error}", file=sys.stderr)
                    raise
                raise SystemExit(f"{prog}: error: {error}") from None
            except KeyboardInterrupt:
                if os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                hint = f"; resume with: {resume_command(prog, *resume(*args))}" if resume is not None else ""
                print(f"{prog}: interrupted{hint}", file=sys.stderr)
                raise SystemExit(130) from None

        return run  # type: ignore[return-value]

    return decorate


def in_submitit_job() -> bool:
    """Whether this process is a job submitit started (a Slurm sweep's): there a task's error must stay an
    exception, which submitit pickles for the launcher; a `SystemExit` would leave it no result to read."""
    return "SUBMITIT_FOLDER" in os.environ or "SUBMITIT_EXECUTOR" in os.environ


def resume_command(prog: str, key: str, value: Any, argv: Sequence[str] | None = None) -> str:
    """This command line (`sys.argv[1:]` unless `argv`) with `key=value` in place of any override of `key`."""
    kept = [a for a in (sys.argv[1:] if argv is None else argv) if a.split("=", 1)[0].lstrip("+~") != key]
    return shlex.join([prog, *kept, f"{key}={value}"])


class WritableRunFolder(Callback):
    """Hydra callback: a run (or sweep) folder that cannot be written ends the command `prog` with one line
    before the run starts (Hydra would create it later and answer a failure with a traceback)."""

    def __init__(self, prog: str) -> None:
        self.prog = prog

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config.hydra.run.dir)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config.hydra.sweep.dir)

    def _check(self, folder: str) -> None:
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as e:
            # SystemExit, not an exception: Hydra turns a callback's exceptions into warnings and goes on
            sys.exit(
                f"{self.prog}: error: cannot write the run folder {folder} ({e.strerror or e}): choose a writable "
                "place (hydra.run.dir=DIR, or paths.root_dir=DIR / $DOMINO_ROOT for the default folders)"
            )


def refuse_slips(prog: str, argv: Sequence[str], slips: dict[str, str]) -> None:
    """Exit with the right spelling when an override's key (with or without `+` / `++` / `~`) is a known slip."""
    for arg in argv:
        key = arg.split("=", 1)[0].lstrip("+~")
        if "=" in arg and key in slips:
            raise SystemExit(f"{prog}: error: {arg!r}: {slips[key]}")
