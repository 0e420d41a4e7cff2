"""Console-script fixtures."""

import logging

import pytest


@pytest.fixture
def restore_logging():
    """Hydra points the root logger at pytest's captured stderr, which is closed after the test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level
