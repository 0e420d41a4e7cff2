"""A spawned worker's input error comes back to the launching process as that one error."""

import traceback

import pytest
from torch.multiprocessing.spawn import ProcessRaisedException

from domino_train.method.module import NoOptimizerStepError
from domino_train.run.input_errors import WorkerInputError, worker_input_error


def _worker_died_of(error: BaseException) -> ProcessRaisedException:
    """What torch's spawn raises in the parent: the worker's formatted traceback (here with an earlier
    exception's before it), not the exception."""
    try:
        try:
            raise KeyError("ValueError: an earlier exception's")
        except KeyError:
            raise error  # noqa: B904 (the traceback shows both)
    except BaseException:
        text = traceback.format_exc()
    return ProcessRaisedException(f"\n\n-- Process 0 terminated with the following error:\n{text}", 0, 1234)


@pytest.mark.parametrize(
    "error",
    [ValueError("bad value: fix it"), NoOptimizerStepError("no step: fix it"), FileNotFoundError("no file: x")],
    ids=["builtin", "domino_train", "os_error"],
)
def test_an_input_error_of_a_worker_is_returned_with_its_message(error):
    found = worker_input_error(_worker_died_of(error))
    assert isinstance(found, WorkerInputError) and str(found) == str(error)


def test_other_failures_keep_their_traceback():
    assert worker_input_error(_worker_died_of(RuntimeError("CUDA error: out of memory"))) is None
    assert worker_input_error(ValueError("not from a worker")) is None
