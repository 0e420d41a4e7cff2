"""Which training errors are the user's input, answered by `domino-train` in one line, and how one raised in
a spawned worker process (DeepSpeed or DDP on CPUs) comes back to the launching process as such.

torch's spawn hands the launching process only the worker's formatted traceback (`ProcessRaisedException`),
not the exception: without `worker_input_error` a bad value found in a worker (data too small for the
accumulation, a refused data set) ends the command with the worker's traceback inside the launcher's.
"""

from __future__ import annotations

import pydoc

from lightning.fabric.utilities.exceptions import MisconfigurationException
from torch.multiprocessing.spawn import ProcessRaisedException

from inference.cli.errors import USER_ERRORS

INPUT_ERRORS: tuple[type[BaseException], ...] = (*USER_ERRORS, MisconfigurationException)


class WorkerInputError(ValueError):
    """An input error a spawned worker died of: its message, without the worker's traceback."""


def worker_input_error(error: BaseException) -> WorkerInputError | None:
    """The input error behind a spawned worker's failure, or None when `error` reports no such thing.

    The worker's traceback ends with its exception, `module.Class: message` (the one line not indented
    after the last `Traceback` header); the class is looked up by that name."""
    if not isinstance(error, ProcessRaisedException):
        return None
    text = str(error)
    lines = text[text.rfind("Traceback (most recent call last):") :].splitlines()[1:]
    for i, line in enumerate(lines):
        if line and not line[0].isspace():
            name, _, first = line.partition(": ")
            cls = pydoc.locate(name)
            if isinstance(cls, type) and issubclass(cls, INPUT_ERRORS):
                return WorkerInputError("\n".join([first, *lines[i + 1 :]]).strip())
            return None
    return None
