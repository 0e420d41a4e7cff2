"""Shared fixtures: tiny random targets and drafters (CPU, fp32, milliseconds per forward)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from inference import DominoDrafter, DrafterConfig, tiny_target

# Tiny models gain nothing from intra-op threads, and on a busy 2-core machine the threads' barriers
# made the suite up to 7x slower: run it single-threaded.
torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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


def make_drafter(target, head: str | None = "domino", seed: int = 0, **overrides) -> DominoDrafter:
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
def drafter(qwen_target):
    return make_drafter(qwen_target)


def with_block_size(drafter: DominoDrafter, target, block_size: int) -> DominoDrafter:
    """The same weights under another block size (nothing in a drafter's weights depends on it)."""
    other = DominoDrafter(dataclasses.replace(drafter.config, block_size=block_size))
    other.load_state_dict(drafter.state_dict())
    return other.bind_target(target.embed_tokens, target.lm_head).eval()


def greedy_continuations(target, num_seqs: int, prompt_len: int, new_tokens: int, seed: int = 0) -> torch.Tensor:
    """[num_seqs, prompt_len + new_tokens]: random byte prompts and the target's greedy continuations."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 256, (num_seqs, prompt_len), generator=gen)
    cache, out = target.new_cache(), [ids]
    with torch.no_grad():
        logits = target(ids, cache=cache, last_logits_only=True).logits[:, -1]
        for _ in range(new_tokens):
            out.append(logits.argmax(-1, keepdim=True))
            logits = target(out[-1], cache=cache, last_logits_only=True).logits[:, -1]
    return torch.cat(out, 1)


_TRAINED: dict[str, tuple[DominoDrafter, torch.Tensor]] = {}


def trained_drafter(target, prompt_len: int = 8, steps: int = 60) -> tuple[DominoDrafter, torch.Tensor]:
    """A Domino drafter (block 8) trained for a few seconds on `target`'s greedy continuations of 8 random
    prompts, and those sequences ([8, prompt_len + 64]). Continuing their prefixes it accepts most but
    not all drafts (full blocks, partial blocks and rejections all occur), unlike a random drafter
    (tau ~ 1). Trained once per tiny target (their weights depend only on the seed) and bound to `target`."""
    if target.name not in _TRAINED:
        seqs = greedy_continuations(target, 8, prompt_len, 64)
        drafter = make_drafter(target, block_size=8)
        cfg = drafter.config
        with torch.no_grad():
            features = target(seqs, layer_ids=cfg.target_layer_ids).features
        gen = torch.Generator().manual_seed(0)
        opt = torch.optim.AdamW(drafter.parameters(), lr=1e-2)
        for _ in range(steps):
            anchors = torch.randint(prompt_len - 1, seqs.shape[1] - cfg.block_size, (seqs.shape[0], 8), generator=gen)
            positions = anchors.unsqueeze(-1) + torch.arange(cfg.num_draft_tokens)
            causal = torch.gather(seqs, 1, positions.flatten(1)).view_as(positions)
            labels = torch.gather(seqs, 1, positions.flatten(1) + 1).view_as(positions)
            logits = drafter.block_logits(drafter.forward_blocks(features, seqs, anchors), causal)
            loss = sum(F.cross_entropy(x.flatten(0, -2), labels.flatten()) for x in (logits.base, logits.final))
            opt.zero_grad()
            loss.backward()
            opt.step()
        _TRAINED[target.name] = (drafter.requires_grad_(False), seqs)
    drafter, seqs = _TRAINED[target.name]
    return with_block_size(drafter, target, drafter.config.block_size), seqs


def chi_square_pvalue(counts: dict, probs: dict, min_expected: float = 5.0) -> float:
    """Pearson's goodness-of-fit p-value of observed `counts` against `probs` (outcome -> probability).

    Outcomes expected fewer than `min_expected` times are pooled into one cell; an observed outcome with
    probability 0 gives p = 0.
    """
    n = sum(counts.values())
    if any(probs.get(k, 0.0) == 0.0 for k in counts):
        return 0.0
    cells, pooled_obs, pooled_exp = [], 0.0, 0.0
    for k, p in probs.items():
        if n * p >= min_expected:
            cells.append((counts.get(k, 0), n * p))
        else:
            pooled_obs, pooled_exp = pooled_obs + counts.get(k, 0), pooled_exp + n * p
    if pooled_exp > 0:
        cells.append((pooled_obs, pooled_exp))
    stat = sum((o - e) ** 2 / e for o, e in cells)
    dof = len(cells) - 1
    half = torch.tensor([dof / 2, stat / 2], dtype=torch.float64)
    return float(torch.special.gammaincc(half[0], half[1]))
