"""`FastDominoExpander`: DominoTree node expansion on static buffers, replayed as CUDA graphs on GPUs.

Same arithmetic as `build.ReferenceDominoExpander`, op for op, so it builds the same trees bit for
bit; what changes is where the work happens:
- setup (once per round, one graph): the backbone's top-M ids per draft position, their base logits and
  W2 rows, the base-logit children of the first `pure_draft_prefix_len` positions, the root's GRU state;
- corr (per expanded node, one graph): correction over the M rows from the node's state, log-softmax
  over M, top `node_topk`, and the children's GRU states (one batched step);
- base (per expanded node above the prefix length, one graph): the precomputed base children and their
  GRU states.
The heap stays on the host (`build.best_first`); each expansion costs one small device-to-host read
(the children's ids and log-probabilities), and children's states stay on the device in a pool.
"""

from __future__ import annotations

import torch

from inference.decoding.cuda_graph import StaticStep
from inference.decoding.tree.build import Children, topk_logprobs
from inference.drafter import DominoDrafter


class FastDominoExpander:
    def __init__(
        self, drafter: DominoDrafter, top_m: int = 64, node_topk: int = 8, budget: int = 16, cuda_graph: bool = False
    ) -> None:
        if drafter.head is None:
            raise ValueError("DominoTree needs a drafter with a Domino head")
        cfg, head = drafter.config, drafter.head
        p = next(drafter.parameters())
        dev, dt = p.device, p.dtype
        d, h, g, v = cfg.num_draft_tokens, cfg.hidden_size, cfg.gru_hidden_dim, cfg.output_vocab_size
        self.drafter, self.head = drafter, head
        # Logit columns -> target ids (a draft vocabulary); top-M and W2 rows stay in draft ids.
        self.token_map = drafter.draft_to_target() if drafter.has_draft_vocab else None
        self.top_m, self.prefix = top_m, cfg.pure_draft_prefix_len
        self.k = min(node_topk, top_m or v)
        self.k_base = min(node_topk, v)
        # round inputs
        self.hidden = torch.zeros(d, h, device=dev, dtype=dt)
        self.base = torch.zeros(d, v, device=dev, dtype=dt)
        self.root_id = torch.zeros(1, dtype=torch.long, device=dev)
        # setup outputs
        m = top_m or 1
        self.cand = torch.zeros(d, m, dtype=torch.long, device=dev)
        self.base_m = torch.zeros(d, m, device=dev, dtype=dt)
        self.w2_rows = torch.zeros(d, m, cfg.correction_rank, device=dev, dtype=dt)
        self.base_choice = torch.zeros(max(self.prefix, 1), 2, self.k_base, dtype=torch.float64, device=dev)
        self.root_state = torch.zeros(1, g, device=dev, dtype=dt)
        # expansion inputs / outputs
        self.state_in = torch.zeros(1, g, device=dev, dtype=dt)
        self.pos_in = torch.zeros(1, dtype=torch.long, device=dev)
        self.out_choice = torch.zeros(2, self.k, dtype=torch.float64, device=dev)
        self.out_base_choice = torch.zeros(2, self.k_base, dtype=torch.float64, device=dev)
        self.out_states = torch.zeros(self.k, g, device=dev, dtype=dt)
        self.out_base_states = torch.zeros(self.k_base, g, device=dev, dtype=dt)
        self.pool = torch.zeros((budget + 1) * max(self.k, self.k_base), g, device=dev, dtype=dt)
        self._slot: dict[int, int] = {}
        self._next_slot = 0
        self.setup_step = StaticStep(self._setup, cuda_graph)
        self.corr_step = StaticStep(self._corr, cuda_graph)
        self.base_step = StaticStep(self._base, cuda_graph)

    # ---------------------------------------------------------------- the captured computations
    @torch.inference_mode()
    def _setup(self) -> None:
        if self.top_m:
            cand = self.base.topk(self.top_m, dim=-1).indices
            self.cand.copy_(cand if self.token_map is None else self.token_map[cand])
            self.base_m.copy_(self.base.gather(1, cand))
            self.w2_rows.copy_(self.head.embed_proj[2].weight[cand])
        for pos in range(self.prefix):  # one row at a time: the reference's exact ops
            values, ids = topk_logprobs(self.base[pos], self.k_base, self.token_map)
            self.base_choice[pos, 0].copy_(values)
            self.base_choice[pos, 1].copy_(ids)
        init = self.head.init_state(1, self.hidden.device, self.hidden.dtype)
        embed = self.drafter.embed(self.root_id).to(self.hidden.dtype)
        self.root_state.copy_(self.head.step(embed, init))

    def _children_states(self, ids: torch.Tensor, out: torch.Tensor) -> None:
        embeds = self.drafter.embed(ids).to(self.state_in.dtype)
        out.copy_(self.head.step(embeds, self.state_in.expand(len(ids), -1)))

    @torch.inference_mode()
    def _corr(self) -> None:
        hidden = self.hidden.index_select(0, self.pos_in)
        if self.top_m:
            rows = self.w2_rows.index_select(0, self.pos_in)[0]
            logits = self.base_m.index_select(0, self.pos_in)[0]
            logits = logits + self.head.correction_rows(hidden, self.state_in, rows)[0]
            values, ids = topk_logprobs(logits, self.k, self.cand.index_select(0, self.pos_in)[0])
        else:
            logits = self.base.index_select(0, self.pos_in)[0] + self.head.correction(hidden, self.state_in)[0]
            values, ids = topk_logprobs(logits, self.k, self.token_map)
        self.out_choice[0].copy_(values)
        self.out_choice[1].copy_(ids)
        self._children_states(ids, self.out_states)

    @torch.inference_mode()
    def _base(self) -> None:
        self.out_base_choice.copy_(self.base_choice.index_select(0, self.pos_in)[0])
        self._children_states(self.out_base_choice[1].long(), self.out_base_states)

    # ---------------------------------------------------------------- the Expander protocol
    def prepare(self, hidden: torch.Tensor, base_logits: torch.Tensor, root: torch.Tensor) -> FastDominoExpander:
        """Load one round's backbone outputs (hidden [D, H], base logits [D, V], root [1]) and run setup."""
        self.hidden.copy_(hidden)
        self.base.copy_(base_logits)
        self.root_id.copy_(root)
        self.setup_step()
        self._slot.clear()
        self._next_slot = 0
        return self

    def _expand(self, key: int, state: torch.Tensor, position: int) -> Children:
        self.state_in.copy_(state)
        self.pos_in.fill_(position - 1)
        if position <= self.prefix:
            self.base_step()
            choice, states = self.out_base_choice, self.out_base_states
        else:
            self.corr_step()
            choice, states = self.out_choice, self.out_states
        slot = self._next_slot
        if slot + len(states) > len(self.pool):
            self.pool = torch.cat([self.pool, torch.zeros_like(self.pool)])
        self.pool[slot : slot + len(states)].copy_(states)
        self._slot[key] = slot
        self._next_slot += len(states)
        values, ids = choice.tolist()  # the expansion's one device-to-host read
        return [int(i) for i in ids], values

    def root(self) -> Children:
        return self._expand(-1, self.root_state, 1)

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        slot = self._slot[parent] + rank
        return self._expand(node, self.pool[slot : slot + 1], depth + 1)
