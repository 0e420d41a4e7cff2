"""What a console script prints when its input is wrong: one line that names the problem and the fix.

`one_line_errors(prog)` wraps a Hydra task: a bad-input error (`ValueError`, which includes
`DrafterCheckpointError`, and `OSError`, which includes a missing file) ends the command with
`<prog>: error: <message>` and exit status 1 instead of a traceback; `HYDRA_FULL_ERROR=1` keeps the
traceback, as it does for Hydra's own errors. Such an error raised by an object Hydra instantiates (a
target that does not load) arrives wrapped in Hydra's multi-line `InstantiationException`: its own line
is printed. `refuse_slips` catches overrides that Hydra would answer
with a misleading hint (`drafter=PATH` -> "use +drafter=PATH", which fails again).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from hydra.errors import InstantiationException

F = TypeVar("F", bound=Callable[..., Any])
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError)


def one_line_errors(prog: str, extra: tuple[type[BaseException], ...] = ()) -> Callable[[F], F]:
    """Decorate a task function so bad input ends it with one line on stderr (see the module docstring)."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (*USER_ERRORS, *extra, InstantiationException) as e:
                error = e.__cause__ if isinstance(e, InstantiationException) else e
                if not isinstance(error, (*USER_ERRORS, *extra)) or os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                raise SystemExit(f"{prog}: error: {error}") from None

        return run  # type: ignore[return-value]

    return decorate


def refuse_slips(prog: str, argv: Sequence[str], slips: dict[str, str]) -> None:
    """Exit with the right spelling when an override's key (with or without `+` / `++` / `~`) is a known slip."""
    for arg in argv:
        key = arg.split("=", 1)[0].lstrip("+~")
        if "=" in arg and key in slips:
            raise SystemExit(f"{prog}: error: {arg!r}: {slips[key]}")
