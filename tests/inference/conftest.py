"""Decoding fixtures: a briefly trained drafter, block-size variants, a chi-square test, the exact law of the
first tokens (with or without a planted bias) and the exact law of a randomised rule by enumeration.

Factories, like `make_drafter` in the root conftest, so that tests take them as arguments instead of
importing a `conftest` module (there are several).
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from collections.abc import Callable, Hashable

import pytest
import torch
import torch.nn.functional as F

from inference import DominoDrafter
from inference.decoding import sampling
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


def _planted(row: torch.Tensor, tv: float) -> torch.Tensor:
    """`row` (a distribution) moved by total variation |tv|: toward its argmax when tv > 0 (the argmax taken
    now and then, as far as the argmax's room allows), away from it onto the other tokens when tv < 0."""
    top = int(row.argmax())
    if tv > 0:
        eps = min(1.0, tv / max(1.0 - float(row[top]), 1e-12))
        out = (1 - eps) * row
        out[top] += eps
        return out
    rest = row.clone()
    rest[top] = 0.0
    out = row.clone()
    out[top] += tv
    return out + (-tv) * rest / rest.sum()


def _exact_joint(
    target, prompt: torch.Tensor, params: SamplingParams, depth: int = 3, bias: float = 0.0
) -> dict[tuple, float]:
    """P(t_1..t_depth) under plain sampling from the target, by enumeration of the (small) support.

    `bias` plants a sampler bias instead: every token drawn from `_planted(p, bias)`, total variation |bias|
    from the target's next-token law p (the law a decoder that takes the argmax now and then would follow).
    """
    joint = {(): 1.0}
    for _ in range(depth):
        prefixes = list(joint)
        batch = torch.stack([torch.cat([prompt, torch.tensor(p, dtype=torch.long)]) for p in prefixes])
        with torch.no_grad():
            probs = probabilities(target(batch).logits[:, -1], params).double()
        if bias:
            probs = torch.stack([_planted(row, bias) for row in probs])
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
    """`exact_joint(target, prompt, params, depth=3, bias=0.0)`: the exact law of the first tokens under
    sampling (with `bias`, under a sampler biased by that total variation per token)."""
    return _exact_joint


@dataclasses.dataclass(frozen=True)
class SampledCheck:
    """The end-to-end sampled check's setting: `runs` 3-token generations after `seqs[prompt_row, :9]` of the
    trained drafter's sequences, at `params`, judged by a chi-square test at level `alpha` against the exact
    law (`exact_joint`). T = 0.15 with top-2 makes the first tokens' law uneven (0.86 on one outcome), where a
    biased sampler shows most; drafts are still rejected and accepted. Its power is simulated in
    tests/inference/decoding/test_sampling_lossless.py."""

    params: SamplingParams = SamplingParams(temperature=0.15, top_k=2)
    prompt_row: int = 3
    runs: int = 1200
    alpha: float = 1e-3

    def prompt(self, seqs: torch.Tensor) -> torch.Tensor:
        return seqs[self.prompt_row, :9]

    def check(self, decoder, target, seqs: torch.Tensor) -> None:
        """`decoder` (built with `params`) samples the target's law; rejections and acceptances both occur."""
        prompt = self.prompt(seqs)
        counts, lengths = _sample_counts(decoder, prompt, self.runs)
        assert _chi_square_pvalue(counts, _exact_joint(target, prompt, self.params)) > self.alpha
        assert 1 in lengths and max(lengths) >= 2


@pytest.fixture
def sampled_check() -> SampledCheck:
    return SampledCheck()


def _continued(law: dict[tuple, float], root: int, p: torch.Tensor, length: int) -> dict[tuple, float]:
    """`law` (the committed tokens after `root`) with each prefix continued by plain sampling from the Markov
    target `p` [V, V] (row = the law after that token) up to `length` tokens."""
    out: dict[tuple, float] = {}
    for seq, weight in law.items():
        for tail in itertools.product(range(p.shape[0]), repeat=length - len(seq)):
            prob, prev = weight, (root, *seq)[-1]
            for token in tail:
                prob, prev = prob * float(p[prev, token]), token
            if prob:
                out[(*seq, *tail)] = out.get((*seq, *tail), 0.0) + prob
    return out


@pytest.fixture
def assert_round_lossless():
    """`assert_round_lossless(law, root, p, length)`: the law of one round's committed tokens after `root` on a
    Markov target `p`, continued by plain sampling to `length` tokens, equals the target's own law to 1e-9.

    That holding for every round is losslessness: the rounds after one can be replaced by plain sampling one
    by one, from the last."""

    def check(law: dict[tuple, float], root: int, p: torch.Tensor, length: int) -> None:
        found, expected = _continued(law, root, p, length), _continued({(): 1.0}, root, p, length)
        worst = max(abs(found.get(k, 0.0) - expected.get(k, 0.0)) for k in {*found, *expected})
        assert worst < 1e-9, (root, worst, law)

    return check


@pytest.fixture
def sample_counts():
    """`sample_counts(decoder, prompt, n, seed=0)`: outcome counts of n 3-token generations, accept lengths."""
    return _sample_counts


class _Enumeration:
    """Replays one path of outcomes through `sample_from` / `bernoulli` and records the choice points it meets.

    Each row of a `sample_from` and each element of a `bernoulli` is one choice point. On a path's prefix the
    recorded outcome is replayed; past it the first outcome of nonzero probability is taken and the others are
    queued as new prefixes, so a depth-first search meets every path with nonzero probability exactly once.
    """

    def __init__(self) -> None:
        self.pending: list[list[int]] = [[]]
        self.path: list[int] = []
        self.pos, self.weight = 0, 1.0

    def start(self) -> None:
        self.path, self.pos, self.weight = self.pending.pop(), 0, 1.0

    def choose(self, weights: list[float]) -> int:
        if self.pos == len(self.path):
            support = [k for k, w in enumerate(weights) if w > 0]
            self.pending += [[*self.path, k] for k in support[1:]]
            self.path.append(support[0])
        k = self.path[self.pos]
        self.pos += 1
        self.weight *= weights[k]
        return k

    def sample_from(self, probs: torch.Tensor, generator=None) -> torch.Tensor:
        rows = probs.detach().double().cpu().reshape(-1, probs.shape[-1])
        ids = [self.choose((row / row.sum()).tolist()) for row in rows]
        return torch.tensor(ids, dtype=torch.long, device=probs.device).view(probs.shape[:-1])

    def bernoulli(self, probs: torch.Tensor, generator=None) -> torch.Tensor:
        heads = probs.detach().double().cpu().clamp(0.0, 1.0).reshape(-1).tolist()
        coins = [self.choose([1.0 - h, h]) == 1 for h in heads]
        return torch.tensor(coins, dtype=torch.bool, device=probs.device).view(probs.shape)


def _exact_law(monkeypatch: pytest.MonkeyPatch, fn: Callable[[torch.Generator], Hashable]) -> dict[Hashable, float]:
    """The exact law of `fn(generator)` over every outcome of the `sample_from` / `bernoulli` draws it makes.

    Both are replaced, wherever `inference` imported them, by an `_Enumeration`; `fn` runs once per path of
    outcomes and its result is weighted by the path's probability (float64). A rule that draws any other way
    (from the generator it is given or torch's global one) is refused: the law would not be exact.
    """
    enum = _Enumeration()
    originals = {"sample_from": sampling.sample_from, "bernoulli": sampling.bernoulli}
    law: dict[Hashable, float] = {}
    with monkeypatch.context() as patch:
        for module in [m for name, m in sys.modules.items() if name.startswith("inference")]:
            for name, original in originals.items():
                if getattr(module, name, None) is original:
                    patch.setattr(module, name, getattr(enum, name))
        generator = torch.Generator().manual_seed(0)
        while enum.pending:
            enum.start()
            states = generator.get_state(), torch.random.get_rng_state()
            result = fn(generator)
            if not (torch.equal(states[0], generator.get_state()) and torch.equal(states[1], torch.get_rng_state())):
                raise AssertionError("the rule drew random numbers outside sample_from / bernoulli")
            law[result] = law.get(result, 0.0) + enum.weight
    return law


@pytest.fixture
def exact_law(monkeypatch):
    """Factory: `exact_law(fn)`: the exact law of `fn(generator)` (hashable results) over every outcome of its
    `sample_from` / `bernoulli` draws, by enumeration (no sampling)."""
    return lambda fn: _exact_law(monkeypatch, fn)
