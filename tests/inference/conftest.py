"""Decoding fixtures: a briefly trained drafter, block-size variants and a chi-square test.

Factories, like `make_drafter` in the root conftest, so that tests take them as arguments instead of
importing a `conftest` module (there are several).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from inference import DominoDrafter
from inference.decoding.sampling import SamplingParams, probabilities


def _with_block_size(drafter: DominoDrafter, target, block_size: int) -> DominoDrafter:
    """The same weights under another block size (nothing in a drafter's weights depends on it)."""
    other = DominoDrafter(dataclasses.replace(drafter.config, block_size=block_size))
    other.load_state_dict(drafter.state_dict())
    return other.bind_target(target.embed_tokens, target.lm_head).eval().requires_grad_(False)


def _greedy_continuations(target, num_seqs: int, prompt_len: int, new_tokens: int, seed: int = 0) -> torch.Tensor:
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


def _train_briefly(target, drafter: DominoDrafter, prompt_len: int = 8, steps: int = 60) -> torch.Tensor:
    """Fit `drafter` (in place) to `target`'s greedy continuations of 8 random prompts; returns them."""
    seqs = _greedy_continuations(target, 8, prompt_len, 64)
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
    return seqs


_TRAINED: dict[str, tuple[DominoDrafter, torch.Tensor]] = {}


@pytest.fixture
def with_block_size():
    """Factory: `with_block_size(drafter, target, block_size)`."""
    return _with_block_size


@pytest.fixture
def trained_drafter(make_drafter):
    """Factory: `trained_drafter(target) -> (drafter, seqs)`.

    A Domino drafter (block 8) trained for a few seconds on the target's greedy continuations of 8
    random prompts, and those sequences ([8, 72]). Continuing their prefixes it accepts most but not all
    drafts (full blocks, partial blocks and rejections all occur), unlike a random drafter (tau ~ 1).
    Trained once per tiny target (their weights depend only on the seed), bound to the given target.
    """

    def get(target) -> tuple[DominoDrafter, torch.Tensor]:
        if target.name not in _TRAINED:
            drafter = make_drafter(target, block_size=8)
            _TRAINED[target.name] = (drafter, _train_briefly(target, drafter))
        drafter, seqs = _TRAINED[target.name]
        return _with_block_size(drafter, target, drafter.config.block_size), seqs

    return get


def _chi_square_pvalue(counts: dict, probs: dict, min_expected: float = 5.0) -> float:
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
    half = torch.tensor([(len(cells) - 1) / 2, stat / 2], dtype=torch.float64)
    return float(torch.special.gammaincc(half[0], half[1]))


@pytest.fixture
def chi_square_pvalue():
    """Factory: `chi_square_pvalue(counts, probs)`."""
    return _chi_square_pvalue


def _exact_joint(target, prompt: torch.Tensor, params: SamplingParams, depth: int = 3) -> dict[tuple, float]:
    """P(t_1..t_depth) under plain sampling from the target, by enumeration of the (small) support."""
    joint = {(): 1.0}
    for _ in range(depth):
        prefixes = list(joint)
        batch = torch.stack([torch.cat([prompt, torch.tensor(p, dtype=torch.long)]) for p in prefixes])
        with torch.no_grad():
            probs = probabilities(target(batch).logits[:, -1], params)
        joint = {
            (*p, t): joint[p] * float(probs[i, t])
            for i, p in enumerate(prefixes)
            for t in probs[i].nonzero()[:, 0].tolist()
        }
    return joint


def _sample_counts(decoder, prompt, n: int, seed: int = 0) -> tuple[dict[tuple, int], list[int]]:
    gen = torch.Generator().manual_seed(seed)
    counts, lengths = {}, []
    for _ in range(n):
        out = decoder.generate(prompt, 3, gen)
        counts[tuple(out.tokens)] = counts.get(tuple(out.tokens), 0) + 1
        lengths += out.stats.accept_lengths
    return counts, lengths


@pytest.fixture
def exact_joint():
    """`exact_joint(target, prompt, params, depth=3)`: the exact law of the first tokens under sampling."""
    return _exact_joint


@pytest.fixture
def sample_counts():
    """`sample_counts(decoder, prompt, n, seed=0)`: outcome counts of n 3-token generations, accept lengths."""
    return _sample_counts
