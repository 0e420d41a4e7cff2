"""Shared fixtures: tiny random targets and drafters (CPU, fp32, milliseconds per forward)."""

from __future__ import annotations

import os

# Tests never touch the network: without this, a hub lookup (e.g. Qwen3's tokenizer) waits for timeouts.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")

import pytest
import torch

import slurm_cluster
from inference import DominoDrafter, DrafterConfig, tiny_target

# Tiny models gain nothing from intra-op threads, and OpenMP threads that spin while another process holds
# the other core slow small matmuls by 100x; one thread keeps the suite fast and its timing stable.
torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skips = {"gpu": None if torch.cuda.is_available() else "needs a CUDA device", "slurm": slurm_cluster.unavailable()}
    for item in items:
        for marker, reason in skips.items():
            if reason and item.get_closest_marker(marker) is not None:  # the marker, not any test named *gpu*
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A one-node Slurm running from a temporary folder for the whole session (tests marked `slurm`)."""
    reason = slurm_cluster.unavailable()
    if reason:
        pytest.skip(reason)
    cluster = slurm_cluster.SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def _restore_default_dtype():
    dtype = torch.get_default_dtype()
    yield
    torch.set_default_dtype(dtype)


@pytest.fixture(scope="session", params=["qwen3", "llama"])
def any_tiny_target(request):
    return tiny_target(request.param)


@pytest.fixture(scope="session")
def qwen_target():
    return tiny_target("qwen3")


def build_drafter(target, head: str | None = "domino", seed: int = 0, **overrides) -> DominoDrafter:
    """A small drafter bound to `target` with deterministic random weights."""
    kw = dict(
        num_draft_layers=2,
        block_size=4,
        head=head,
        mask_token_id=target.mask_token_id,
        gru_hidden_dim=24,
        correction_rank=8,
        intermediate_size=96,
    )
    kw.update(overrides)
    config = DrafterConfig.from_target_config(target.config, **kw)
    torch.manual_seed(seed)
    return DominoDrafter(config).bind_target(target.embed_tokens, target.lm_head)


@pytest.fixture
def make_drafter():
    """Factory: `make_drafter(target, head="domino" | None, seed=0, **config_overrides)`."""
    return build_drafter


@pytest.fixture
def drafter(qwen_target):
    return build_drafter(qwen_target)
