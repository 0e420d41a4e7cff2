"""Chain decoding: `dflash` (base logits only) and `domino` (base logits + the GRU correction).

One round (DESIGN.md section 1): a single backbone forward over `[root, MASK x (B-1)]` against the
draft cache (context K/V were projected once, when their tokens were committed; the block's own K/V
live only inside the forward); the lm_head once over the D draft positions; then the chain:
draft token j (1-based) comes from the base logits when j <= `pure_draft_prefix_len`, else from
base_j + correction(H_j, S_{j-1}), where S_{j-1} is the GRU state after consuming the root and draft
tokens 1..j-1. Only the GRU step and the rank-r correction are sequential, and they stay on the
device: the round's single host read is in verification. The target then verifies `[root, d_1..d_D]`
in one forward (`inference.decoding.chain.verify`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from inference.decoding.budget import AUTO, best_prefix
from inference.decoding.chain.rollout import GreedyChainRollout
from inference.decoding.chain.verify import ChainDraft, make_verifier
from inference.decoding.cost_model import RunningMean
from inference.decoding.methods import check_drafter, check_options, method_spec
from inference.decoding.options import DecodeOptions
from inference.decoding.sampling import SamplingParams, greedy_ids, probabilities, sample_from
from inference.decoding.speculative import Candidates, DecodeState, SpeculativeDecoder, Verdict, VerifyWindow
from inference.decoding.tree.build import RowsJudge
from inference.drafter import DominoDrafter
from inference.drafter.draft_cache import DraftKVCache
from inference.drafter.rollout import DecodingSteps, roll_out
from inference.kernels.cuda_graph import use_cuda_graphs
from inference.targets.adapter import TargetModel

# logits [n, V] -> (tokens [n], the distributions they were drawn from [n, V] or None when chosen by argmax)
TokenPicker = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]


def greedy_picker(logits: torch.Tensor) -> tuple[torch.Tensor, None]:
    return greedy_ids(logits), None


def sampling_picker(params: SamplingParams, generator: torch.Generator | None) -> TokenPicker:
    def pick(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = probabilities(logits, params)
        return sample_from(q, generator), q

    return pick


def _logprob(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The drafter's log-probability of each picked token (draft ids) under its own logits [n, V]."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def draft_chain(
    drafter: DominoDrafter,
    cache: DraftKVCache,
    root: torch.Tensor,
    num_tokens: int,
    use_head: bool,
    pick: TokenPicker = greedy_picker,
    scored: bool = False,
    hidden: torch.Tensor | None = None,
) -> ChainDraft:
    """Draft `num_tokens` (<= `config.num_draft_tokens`) tokens after `root` [1]; `use_head=False` = DFlash.

    `scored`: the draft also carries each prefix's log-probability under the drafter (`ChainDraft.scores`,
    read to the host once), what a chain window is chosen on. `hidden`: the block's hidden states [1, B, H]
    when the backbone already ran (a batched round's `draft_blocks`)."""
    hidden = drafter.draft_block(cache, root) if hidden is None else hidden
    h = drafter.draft_hidden_slice(hidden)
    return draft_chains(drafter, h, root, num_tokens, use_head, pick, scored)[0]


def draft_chains(
    drafter: DominoDrafter,
    hidden: torch.Tensor,
    roots: torch.Tensor,
    num_tokens: int,
    use_head: bool,
    pick: TokenPicker = greedy_picker,
    scored: bool = False,
) -> list[ChainDraft]:
    """One chain of `num_tokens` tokens after each of R roots [R], from the draft positions' hidden states
    [R, D, H] (D >= `num_tokens`), every row at once: one lm_head product and one GRU step per position
    for all rows (`pick` must then treat rows alone: the greedy picker does). A chain is its block's
    tokens in order, so a shorter one is a prefix of a longer one; `draft_chain` is the one-row case."""
    h = hidden[:, :num_tokens]
    base = drafter.lm_head(h)  # [R, n, V], or [R, n, N] over the draft vocabulary
    head = drafter.head
    if not use_head or head is None:
        picked, probs = pick(base)
        tokens, logprobs = drafter.vocab.to_target_ids(picked), _logprob(base, picked) if scored else None
    else:
        chosen, dists, logps = [], [], []

        def choose(logits: torch.Tensor) -> torch.Tensor:  # [R, (k,) V] -> target ids [R, (k)]
            t, q = pick(logits)
            if scored:
                logps.append(_logprob(logits, t).view(t.shape[0], -1))
            chosen.append(drafter.vocab.to_target_ids(t))
            dists.append(None if q is None else q.view(t.shape[0], -1, q.shape[-1]))
            return chosen[-1]

        prefix = min(drafter.config.pure_draft_prefix_len, num_tokens)
        start = torch.cat([roots[:, None], choose(base[:, :prefix])], 1) if prefix else roots[:, None]
        roll_out(DecodingSteps(head), drafter.embed, h, base, start, choose)
        tokens = torch.cat([t.view(t.shape[0], -1) for t in chosen], 1)
        probs = None if dists[-1] is None else torch.cat(dists, 1)
        logprobs = torch.cat(logps, 1) if scored else None
    scores = logprobs.cumsum(1).tolist() if scored else [None] * len(tokens)
    full = [None] * len(tokens) if probs is None else drafter.vocab.full_vocab_probs(probs)
    return [ChainDraft(t, f, s) for t, f, s in zip(tokens, full, scores, strict=True)]


class ChainDecoder(SpeculativeDecoder):
    """`dflash` (base logits only; a Domino drafter's head is then ignored) or `domino` (with the head)."""

    def __init__(
        self, target: TargetModel, drafter: DominoDrafter, method: str, options: DecodeOptions | None = None
    ) -> None:
        options = options or DecodeOptions()
        spec = method_spec(method, family="chain")
        check_options(method, options)
        check_drafter(method, drafter)
        super().__init__(target, drafter, options)
        self.name, self.use_head = method, spec.needs_head
        self.verifier = make_verifier(options.verify, self.sampling)
        # Greedy Domino drafts on CUDA: the per-block rollout replays as one CUDA graph.
        graphed = (
            self.use_head and not self.verifier.sampled_drafts and use_cuda_graphs(options.cuda_graph, target.device)
        )
        self.window = options.chain_window  # None: the whole block; an int; or auto (cost-aware)
        self.cost_aware = self.window == AUTO
        self.rollout = GreedyChainRollout(drafter, cuda_graph=True) if graphed and self.window is None else None
        self.fixed_s = RunningMean()  # a round's draft cost (the whole block is drafted whatever the window)

    def draft(self, state: DecodeState) -> ChainDraft:
        n = min(self.drafter.config.num_draft_tokens, state.tokens_left - 1)  # more could never be emitted
        if n <= 0:
            return self.no_draft(state) if self.window is not None else ChainDraft(state.root.new_empty(0))
        if self.rollout is not None:
            hidden = self.drafter.draft_hidden_slice(self.block_hidden(state))[0]
            return ChainDraft(self.rollout(hidden, self.drafter.lm_head(hidden), state.root)[:n])
        if self.window is None:
            return self._chain(state, n, scored=False)
        built = self.candidates(state)
        if state.forced_size is not None:
            keep = min(state.forced_size, n)
        elif self.window == AUTO:
            keep = best_prefix(built.gains, built.cost, minimum=0)
        else:
            keep = min(self.window, n)
        return self.keep(state, built, keep)

    def _picker(self, state: DecodeState) -> TokenPicker:
        return sampling_picker(self.sampling, state.generator) if self.verifier.sampled_drafts else greedy_picker

    def draft_blocks(
        self, states: list[DecodeState], enough: RowsJudge | None = None, limit: int | None = None
    ) -> None:
        """A batched round's drafts: the rows' backbone in one forward, and for greedy drafts the rows'
        whole chains too, in one lm_head product and one head step per position (`draft_chains`), left in
        `state.drafted` for the row's `draft` / `candidates` (a row's own draft cuts its chain to what it
        may emit). Sampled drafts draw from each row's own generator, so they stay per row. A chain is rolled
        out whole (`enough` and `limit` are for trees)."""
        super().draft_blocks(states)
        rows = [s for s in states if s.block is not None]
        if not rows or self.verifier.sampled_drafts or self.rollout is not None:
            return
        hidden = torch.cat([self.drafter.draft_hidden_slice(s.block) for s in rows])
        roots = torch.cat([s.root for s in rows])
        chains = draft_chains(self.drafter, hidden, roots, hidden.shape[1], self.use_head, scored=True)
        for state, chain in zip(rows, chains, strict=True):
            state.block, state.drafted = None, chain

    def _chain(self, state: DecodeState, n: int, scored: bool) -> ChainDraft:
        """The state's chain of n tokens: a cut of the one its batch drafted this round, else drafted now."""
        chain, state.drafted = state.drafted, None
        if chain is not None:
            return ChainDraft(chain.tokens[:n], None, chain.scores[:n] if scored else None)
        pick, block = self._picker(state), self.block_hidden(state)
        return draft_chain(self.drafter, state.draft_cache, state.root, n, self.use_head, pick, scored, block)

    def candidates(self, state: DecodeState, settle: bool = False) -> Candidates | None:
        """The whole block's chain with each prefix's acceptance, before the window is chosen (None: no
        draft can be emitted); `settle` is the trees' (a chain drafts its block whatever it keeps)."""
        n = min(self.drafter.config.num_draft_tokens, state.tokens_left - 1)
        if n <= 0:
            return None
        t0 = self.clock.now()
        alone = state.block is None and state.drafted is None  # (a batch's shared drafting is not a batch-1 cost)
        draft = self._chain(state, n, scored=True)
        if alone:
            self.fixed_s.add(self.clock.now() - t0)
        fixed = self.fixed_s.value()
        cost = (lambda k: fixed + self.verify_cost(k + 1, state.length)) if self.cost_aware else None
        return Candidates(draft, self.acceptance.predict(draft.scores), cost)

    def no_draft(self, state: DecodeState) -> ChainDraft:
        """No drafts: the round verifies the root alone (recorded as a round of size 0)."""
        state.stats.draft_sizes.append(0)
        state.stats.predicted.append(1.0)
        return ChainDraft(state.root.new_empty(0))

    def verify_window(self, state: DecodeState, draft: ChainDraft) -> VerifyWindow:
        return VerifyWindow(torch.cat([state.root, draft.tokens]).unsqueeze(0))

    def judge(self, state: DecodeState, draft: ChainDraft, logits: torch.Tensor, features: torch.Tensor) -> Verdict:
        tokens = self.verifier(draft, logits, state.generator)
        if draft.scores is not None:
            accepted = len(tokens) - 1
            self.acceptance.update(draft.scores, [j < accepted for j in range(len(draft.scores))])
        return Verdict(tokens=tokens, features=features, logits=logits)
