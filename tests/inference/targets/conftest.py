"""Target fixtures: configs of tiny random models of any HF family (4 layers, hidden 64, vocab 300)."""

from __future__ import annotations

from typing import Any

import pytest


def tiny_config(config_cls: type, **fields: Any) -> Any:
    """A 4-layer, hidden-64, 300-token config of `config_cls` (e.g. `Gemma2Config`), with `fields` on top."""
    shape = dict(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
    )
    return config_cls(**{**shape, **fields})


@pytest.fixture
def make_tiny_config():
    """Factory: `make_tiny_config(config_cls, **fields)` (see `tiny_config`)."""
    return tiny_config
