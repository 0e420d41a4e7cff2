"""`SpeculativeDecoder`: the draft -> verify -> commit loop every speculative method shares.

A method supplies `draft(state)` and the two halves of a verification: `verify_window(state, draft)`, the tokens
the target runs (with their positions and tree visibility), and `judge(state, draft, logits, features)`,
the acceptance rule on the logits that forward returned. This class runs the forward between them (so that
one forward may serve several sequences' windows) and owns everything else:
the prefill (target features of the prompt projected into the draft cache once), the stop / token-limit
rule, committing (target KV cache cropped to the kept positions, or compacted for a tree; the kept
positions' features appended to the draft context), and the statistics with their draft / verify /
commit split. Chains keep a prefix of the verified window; a tree verifier returns `Verdict.keep`, the
window indices of its accepted path, and the same commit compacts instead of cropping.

Invariant between rounds: the target cache and the draft cache both hold exactly the prompt plus every
committed token except the last one (`state.root`), which is the first input of the next round. The draft
cache may hold the newest of them as waiting features (`DraftKVCache.pending`): a commit defers their
projection to the next draft, so that rounds that decode plainly pay nothing for a drafter they do not use.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from inference.decoding.acceptance import AcceptanceModel
from inference.decoding.cost_model import DEFAULT_WINDOWS, ObservedCosts, VerifyCurve, measure_verify_curve
from inference.decoding.draft_cap import DraftCap
from inference.decoding.draft_gate import DraftGate
from inference.decoding.generation import Decoder, Generation, take_until_stop
from inference.decoding.options import DecodeOptions
from inference.decoding.sampling import greedy_ids, sample
from inference.decoding.stats import GenerationStats
from inference.decoding.tree.build import RowsJudge
from inference.decoding.tree.draft_tree import tree_attention_mask
from inference.drafter import DominoDrafter
from inference.drafter.draft_cache import DraftKVCache
from inference.targets.adapter import TargetModel


@dataclass
class DecodeState:
    target_cache: DynamicCache
    draft_cache: DraftKVCache
    root: torch.Tensor  # [1] long: the last committed token, in neither cache yet
    length: int  # positions in both caches (= the root's position)
    tokens_left: int  # tokens that may still be emitted (not the tree's node budget)
    generator: torch.Generator | None
    stats: GenerationStats  # methods may record a finer split of their draft stage here
    forced_size: int | None = None  # a replayed round: verify exactly this many drafts (see `schedule`)
    block: torch.Tensor | None = None  # this round's block hidden states [1, B, H], drafted with a batch's rows
    drafted: Any = None  # this round's draft, drafted with a batch's rows (a chain decoder's whole block)


@dataclass
class VerifyWindow:
    """The tokens one verification runs after the cached context: the root, then the draft."""

    ids: torch.Tensor  # [1, n] long
    depths: torch.Tensor | None = None  # [n] position of each token after the root (tree depth); None = 0..n-1
    visible: torch.Tensor | None = None  # [n, n] bool: token i attends to token j; None = causal


@dataclass
class Candidates:
    """A round's draft at its largest, best first, before its size is chosen: its first n drafts are always
    a valid draft (a tree's parents come before their children)."""

    draft: Any  # a DraftTree or ChainDraft (`.prefix(n)`)
    gains: list[float]  # each draft's acceptance probability, in order (`AcceptanceModel.predict`)
    cost: Callable[[int], float] | None  # seconds of a batch-1 round that keeps the first n (cost-aware decoders)


@dataclass
class Verdict:
    """The outcome of one verification."""

    tokens: list[int]  # committed this round: the accepted draft tokens, then the target's bonus token
    features: torch.Tensor  # [1, n, K*H] target features of the verified window (root first)
    keep: torch.Tensor | None = None  # window indices of root + accepted (tree paths); None = a prefix
    logits: torch.Tensor | None = None  # [n, V] the verify forward's logits (row i: next token after window i)

    def rows(self) -> torch.Tensor | None:
        """The logits rows that chose `tokens`, in order: row k of the window chose token k of a prefix
        verdict, row keep[k] of a tree path's (None without logits)."""
        if self.logits is None:
            return None
        if self.keep is None:
            return self.logits[: len(self.tokens)]
        return self.logits.index_select(0, self.keep.to(self.logits.device))


class SpeculativeDecoder(Decoder):
    """Prefill, rounds and commits for a drafter bound to the target; subclasses draft and verify."""

    cost_aware = False  # set by decoders that choose their draft size from the cost model

    def __init__(self, target: TargetModel, drafter: DominoDrafter, options: DecodeOptions | None = None) -> None:
        super().__init__(target, options)
        param = next(drafter.parameters())
        if (param.device, param.dtype) != (target.device, target.dtype):
            raise ValueError(
                f"the drafter is on {param.device} / {param.dtype} but the target on {target.device} / "
                f"{target.dtype}: load it with DominoDrafter.from_pretrained(..., device=, dtype=) to match"
            )
        self.drafter = drafter.eval()
        self.layer_ids = list(drafter.config.target_layer_ids)
        self.acceptance = AcceptanceModel()  # path score -> acceptance, from the rounds verified so far
        self.verify_curve: VerifyCurve | None = None  # `measure_costs`, before a cost-aware decoder's first round
        self.verify_timed: ObservedCosts | None = None  # that curve corrected by the verify forwards timed since
        # cost-aware decoders: plain rounds while drafting does not pay (draft_gate.py)
        self.gate = DraftGate(self.options.draft_gate)
        self.batch_curves: dict[int, VerifyCurve] = {}  # concurrency -> batch verify curve (`batch_budget.py`)
        self.batch_costs: dict[int, ObservedCosts] = {}  # concurrency -> that curve corrected by timed rounds
        self.batch_gates: dict[tuple[int, int], DraftGate] = {}  # (concurrency, live rows) -> gate over rounds
        self.batch_caps: dict[int, DraftCap] = {}  # concurrency -> the cap on a row's drafts (`draft_cap.py`)
        # A replay (the lossless check) of a cost-aware generation: its rounds' draft sizes
        # (`stats.draft_sizes`), so that timing-driven choices verify the same windows again.
        self.schedule: list[int] | None = None

    def verify_cost(self, n: int, context: int | None = None) -> float:
        """Seconds of a verify forward over n tokens after `context` cached ones (`cost_model`; None: the
        curve's prompt): a cost-aware decoder measures the curve before its first generation, after that
        generation's prompt, and corrects it by the verify forwards it times."""
        if self.verify_curve is None:
            raise RuntimeError("no verify curve: call measure_costs(prompt_tokens) before cost-aware drafting")
        return (self.verify_timed or self.verify_curve)(n, context)

    def measure_costs(self, prompt_tokens: int, windows: list[int] | None = None) -> VerifyCurve:
        """Time the target's verify forward over a grid of windows after a `prompt_tokens`-token prompt and
        `FAR_CONTEXT` tokens further; the verify forwards of later rounds correct it (`ObservedCosts`)."""
        grid = windows or [w for w in DEFAULT_WINDOWS if w <= self.max_window()] or [1]
        self.verify_curve = measure_verify_curve(self.target, prompt_tokens, grid, self.layer_ids)
        self.verify_timed = ObservedCosts(self.verify_curve)
        return self.verify_curve

    def forget_rounds(self) -> None:
        """Start the learned state afresh: the acceptance model, the timed corrections of the verify curves,
        the draft gates and the batch caps. A warm-up's rounds pay first-call costs (allocations, kernel
        choices): read right after `domino-decode`'s warm-up at 4 and 8 rows, three of the trees' four batch
        gates had already judged drafting a loss (0.94-0.95 of the plain rate) and doubled their next
        pause. The measured verify curves stay: each is timed in turns, medians of repeats."""
        self.acceptance = AcceptanceModel()
        self.verify_timed = None if self.verify_curve is None else ObservedCosts(self.verify_curve)
        self.gate = DraftGate(self.options.draft_gate)
        self.batch_costs.clear()
        self.batch_gates.clear()
        self.batch_caps.clear()

    def max_window(self) -> int:
        """The widest window this decoder can verify (the cost curve is measured up to it)."""
        return self.drafter.config.block_size

    def block_hidden(self, state: DecodeState) -> torch.Tensor:
        """This round's block hidden states [1, B, H]: the ones `draft_blocks` left in the state, else
        one backbone forward now."""
        hidden, state.block = state.block, None
        return hidden if hidden is not None else self.drafter.draft_block(state.draft_cache, state.root)

    def draft_blocks(
        self, states: list[DecodeState], enough: RowsJudge | None = None, limit: int | None = None
    ) -> None:
        """A batched round's backbone: the blocks of every state that can still draft, in one forward over
        their draft caches (`DominoDrafter.draft_blocks`), left in `state.block` for the state's `draft` /
        `candidates` this round. One such state drafts alone, as at batch 1. `enough`: a cost-aware batch's
        rule for when a builder that grows the rows' drafts step by step may stop (DominoTree's
        `best_first_rows`); other drafts are built whole. `limit`: the most drafts a row may keep this
        round (a cost-aware batch's cap, `DraftCap`): a tree builds no more nodes than that."""
        drafting = [s for s in states if s.tokens_left > 1]
        if len(drafting) < 2:
            return
        roots = torch.cat([s.root for s in drafting])
        hidden = self.drafter.draft_blocks([s.draft_cache for s in drafting], roots)
        for state, block in zip(drafting, hidden.split(1), strict=True):
            state.block = block

    @abstractmethod
    def draft(self, state: DecodeState) -> Any:
        """Propose tokens after `state.root` (at most `state.tokens_left - 1` of them can be used)."""

    def keep(self, state: DecodeState, built: Candidates, n: int) -> Any:
        """The first n drafts of `built` as this round's draft, with its size and expected tokens recorded."""
        state.stats.draft_sizes.append(n)
        state.stats.predicted.append(1.0 + sum(built.gains[:n]))
        return built.draft.prefix(n)

    @abstractmethod
    def no_draft(self, state: DecodeState) -> Any:
        """The empty draft of a plain round (the verify then runs the root alone)."""

    @abstractmethod
    def verify_window(self, state: DecodeState, draft: Any) -> VerifyWindow:
        """The tokens the target verifies after `state.root`'s context: the root, then the draft."""

    @abstractmethod
    def judge(self, state: DecodeState, draft: Any, logits: torch.Tensor, features: torch.Tensor) -> Verdict:
        """The acceptance rule on the window's logits [n, V] (row i: the next token after window token i);
        `features` [1, n, K*H] are the window's target features."""

    def verify(self, state: DecodeState, draft: Any) -> Verdict:
        """Run the target over the draft's window (appending to `state.target_cache`) and judge it."""
        win = self.verify_window(state, draft)
        device = win.ids.device
        positions = mask = None
        if win.ids.shape[1] > 1:  # the root alone (a plain round) runs as ar runs its step: same kernels, same bits
            if win.depths is not None:
                positions = (state.length + win.depths.to(device)).unsqueeze(0)
            if win.visible is not None:
                mask = tree_attention_mask(state.length, win.visible, self.target.dtype, device)
        t0 = self.clock.now()
        out = self.target(
            win.ids, cache=state.target_cache, position_ids=positions, attention_mask=mask, layer_ids=self.layer_ids
        )
        if self.verify_timed is not None and self.clock.exact:  # an unsynchronised GPU times launches only
            self.verify_timed.observe(win.ids.shape[1], self.clock.now() - t0, state.length)
        return self.judge(state, draft, out.logits[0], out.features)

    @torch.inference_mode()
    def generate(
        self, prompt_ids: list[int] | torch.Tensor, max_new_tokens: int, generator: torch.Generator | None = None
    ) -> Generation:
        ids = self.prompt_tensor(prompt_ids)
        prompt_len = ids.shape[1]
        if self.cost_aware and self.verify_curve is None:  # before the clock starts: measuring is not decoding
            self.measure_costs(prompt_len)
        max_tokens = self.token_budget(prompt_len, max_new_tokens)
        clock, stats = self.clock, GenerationStats(prompt_tokens=prompt_len)
        start = clock.now()
        target_cache = self.target.new_cache(capacity=prompt_len + max_tokens + self.max_window() + 1)
        out = self.target(ids, cache=target_cache, layer_ids=self.layer_ids, last_logits_only=True)
        if self.probe is not None:
            self.probe.observe(0, out.logits[:, -1], prompt_len, [prompt_len - 1])
        root = sample(out.logits[:, -1], self.sampling, generator)
        tokens = [root.item()]
        reason = "stop" if tokens[0] in self.stop_token_ids else "length"
        if reason == "stop" or max_tokens == 1:
            stats.prefill_s = clock.now() - start
            stats.output_tokens = 1
            return Generation(tokens=tokens, finish_reason=reason, stats=stats)
        draft_cache = self.drafter.new_cache(1, capacity=prompt_len + max_tokens + self.drafter.config.block_size)
        self.drafter.append_context(draft_cache, out.features)
        state = DecodeState(target_cache, draft_cache, root, prompt_len, max_tokens - 1, generator, stats)
        first = clock.now()
        stats.prefill_s = first - start
        finished = False
        schedule = iter(self.schedule) if self.schedule is not None else None
        while not finished:
            t0 = clock.now()
            if schedule is not None:
                state.forced_size = next(schedule, 0)
                drafting = state.forced_size > 0
            else:
                drafting = not self.cost_aware or self.gate.drafting()
            catch_up = 0.0  # a retry's projection of the context its pause left waiting (draft_gate.py)
            if drafting and self.cost_aware and self.gate.reopening():
                t = clock.now()
                self.drafter.flush_context(state.draft_cache)
                catch_up = clock.now() - t
            draft = self.draft(state) if drafting else self.no_draft(state)
            stats.plain_rounds += not drafting
            t1 = clock.now()
            verdict = self.verify(state, draft)
            t2 = clock.now()
            finished, stopped = self.commit(state, verdict, tokens, stats)
            t3 = clock.now()
            if self.cost_aware:
                plain = 1.0 / self.verify_cost(1, state.length)
                spent, expected = t3 - t0 - catch_up, stats.predicted[-1] if drafting else None
                self.gate.record(drafting, stats.accept_lengths[-1], spent, plain, expected)
            stats.draft_s += t1 - t0
            stats.verify_s += t2 - t1
            stats.commit_s += t3 - t2
            stats.round_s.append(t3 - t0)
            reason = "stop" if stopped else reason
        stats.decode_s = clock.now() - first
        stats.output_tokens = len(tokens)
        return Generation(tokens=tokens, finish_reason=reason, stats=stats)

    def commit(
        self, state: DecodeState, verdict: Verdict, tokens: list[int], stats: GenerationStats, audit: bool = True
    ) -> tuple[bool, bool]:
        """Emit the verdict's tokens (cut at a stop token / the budget) and advance both caches.

        Greedy decoding audits every emitted token against the argmax of the verify logits that chose it
        (`stats.own_argmax_violations`): an acceptance rule that commits anything else is a bug, whether or
        not the output happens to part from `ar`'s. `audit=False` skips that where the token was chosen by
        that very argmax (a batch's plain round samples its root alone: the audit would redo the choice).
        Returns (finished, stopped by a stop token). A finished generation leaves the caches as they are.
        """
        emit, stopped = take_until_stop(verdict.tokens, self.stop_token_ids, state.tokens_left)
        rows = verdict.rows() if (self.sampling.greedy and audit) or self.probe is not None else None
        if rows is not None and self.sampling.greedy and audit:
            own = greedy_ids(rows[: len(emit)]).tolist()
            stats.own_argmax_violations += sum(o != t for o, t in zip(own, emit, strict=True))
        if rows is not None and self.probe is not None:
            window = list(range(len(emit))) if verdict.keep is None else verdict.keep.tolist()
            self.probe.observe(len(tokens), rows[: len(emit)], verdict.logits.shape[0], window)
        tokens.extend(emit)
        stats.accept_lengths.append(len(emit))
        state.tokens_left -= len(emit)
        if stopped or state.tokens_left == 0:
            return True, stopped
        kept = len(verdict.tokens)  # root + accepted drafts; the bonus becomes the next root
        if verdict.keep is None:
            self.target.crop_cache(state.target_cache, state.length + kept)
            features = verdict.features[:, :kept]
        else:
            self.target.compact_cache(state.target_cache, state.length, verdict.keep)
            features = verdict.features.index_select(1, verdict.keep.to(verdict.features.device))
        self.drafter.append_context(state.draft_cache, features, defer=True)  # projected when next drafted from
        state.length += kept
        state.root = torch.tensor(emit[-1:], dtype=torch.long, device=state.root.device)
        return False, False
