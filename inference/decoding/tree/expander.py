"""`FastDominoExpander`: DominoTree node expansion on static buffers, replayed as CUDA graphs on GPUs.

The same computation as `build.ReferenceDominoExpander` (the same trees; scores equal up to rounding,
since a step reads every position's candidates in one product); what changes is where the work happens:
- setup (once per round, one graph): the backbone's top-M ids per draft position, their base logits and
  W2 rows (in fp32, as `DominoHead.correction_rows` computes), the base-logit children of the first
  `pure_draft_prefix_len` positions, the root's GRU state (`decoding_first_step`: no W_hh product with the zero
  state) and the root's corrected children;
- expand (up to `width` nodes at once, one graph): each node's GRU state (one step from its parent's
  over its own token), the correction over the M rows from that state, log-softmax over M, top
  `node_topk`. A node's token always lies in the draft vocabulary, so its GRU input projection W_ih . e
  is read from a table of every draft token's, built once (`GATE_TABLE_BYTES`), not computed from the
  weights each step. `build.best_first_batched` hands it several frontier nodes per step, so that a
  round pays a few head steps instead of one per node: on a CPU each step is fixed overhead (bf16 GEMMs
  cost the same for 1 and 32 rows), on a GPU one graph launch.
The heap stays on the host (`build.best_first` / `best_first_batched`); each step costs one small
device-to-host read (the children's ids and log-probabilities), and the nodes' states stay on the
device in a pool. Children at draft positions <= `pure_draft_prefix_len` come from the base logits,
read once per round.
"""

from __future__ import annotations

import torch

from inference.decoding.tree.build import Children, topk_logprobs
from inference.drafter import DominoDrafter
from inference.kernels.cuda_graph import StaticStep

GATE_TABLE_BYTES = 64 << 20  # the largest table of draft tokens' GRU input projections kept (N x 3G)


def top_m_candidates(
    base: torch.Tensor, top_m: int, token_map: torch.Tensor | None, w2: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The top-M ids of every draft position of base logits [..., D, V] (target ids through `token_map`),
    their base logits [..., D, M] and their W2 rows of the correction, in fp32 as `correction_rows`
    computes it: [..., D * M, r]."""
    cand = base.topk(top_m, dim=-1).indices
    flat = cand.flatten()  # index_select: a gather of rows, cheaper than advanced indexing
    ids = cand if token_map is None else token_map.index_select(0, flat).view_as(cand)
    rows = w2.index_select(0, flat).float().view(*cand.shape[:-2], -1, w2.shape[-1])
    return ids, base.gather(-1, cand), rows


def candidate_logits(
    features: torch.Tensor, w2_t: torch.Tensor, base_m: torch.Tensor, pos: torch.Tensor
) -> torch.Tensor:
    """Corrected logits [n, M] of n nodes' candidates at draft positions `pos` [n]: correction features
    [n, r] against every position's W2 rows (`w2_t` [r, D * M]) in one product, plus the base logits
    `base_m` [D, M], each node's own position kept. On a CPU one product over every position is cheaper
    than gathering each node's rows."""
    m = base_m.shape[-1]
    every = torch.mm(features, w2_t).view(features.shape[0], -1, m) + base_m  # [n, D, M]
    return every.gather(1, pos.view(-1, 1, 1).expand(-1, 1, m)).squeeze(1)


class FastDominoExpander:
    def __init__(
        self,
        drafter: DominoDrafter,
        top_m: int = 64,
        node_topk: int = 8,
        budget: int = 16,
        cuda_graph: bool = False,
        width: int = 1,
    ) -> None:
        if drafter.head is None:
            raise ValueError("DominoTree needs a drafter with a Domino head")
        cfg, head = drafter.config, drafter.head
        p = next(drafter.parameters())
        dev, dt = p.device, p.dtype
        d, h, g, v = cfg.num_draft_tokens, cfg.hidden_size, cfg.gru_hidden_dim, cfg.output_vocab_size
        self.drafter, self.head = drafter, head
        # Logit columns -> target ids (a draft vocabulary); top-M and W2 rows stay in draft ids.
        self.token_map = drafter.vocab.draft_to_target()
        self.top_m, self.prefix, self.width = top_m, cfg.pure_draft_prefix_len, max(width, 1)
        self.k = min(node_topk, top_m or v)
        self.k_base = min(node_topk, v)
        w = self.width
        # round inputs
        self.hidden = torch.zeros(d, h, device=dev, dtype=dt)
        self.base = torch.zeros(d, v, device=dev, dtype=dt)
        self.root_id = torch.zeros(1, dtype=torch.long, device=dev)
        # setup outputs
        m = top_m or 1
        self.cand = torch.zeros(d, m, dtype=torch.long, device=dev)
        self.base_m = torch.zeros(d, m, device=dev, dtype=dt)
        self.w2_t = torch.zeros(cfg.correction_rank, d * m, device=dev)  # every position's candidate W2 rows^T, fp32
        self.base_choice = torch.zeros(max(self.prefix, 1), 2, self.k_base, dtype=torch.float64, device=dev)
        self.root_state = torch.zeros(1, g, device=dev, dtype=dt)
        self.root_choice = torch.zeros(1, 2, self.k, dtype=torch.float64, device=dev)
        # expansion inputs / outputs (`width` rows; a short batch repeats its first row)
        self.parent_states = torch.zeros(w, g, device=dev, dtype=dt)
        self.tokens = torch.zeros(w, dtype=torch.long, device=dev)
        self.pos = torch.zeros(w, dtype=torch.long, device=dev)  # the children's draft position - 1
        self.out_states = torch.zeros(w, g, device=dev, dtype=dt)
        self.out_choice = torch.zeros(w, 2, self.k, dtype=torch.float64, device=dev)
        self.pool = torch.zeros(budget + 1, g, device=dev, dtype=dt)  # expanded nodes' states, by slot
        self._slot: dict[int, int] = {}
        self._ids: dict[int, list[int]] = {}  # node -> its children's ids (target ids), best first
        self._base_lists: list[Children] = []
        self.steps = 0  # expansion steps run so far (the cost model times them)
        self.gate_table, self.draft_index = self._gate_table()
        self.setup_step = StaticStep(self._setup, cuda_graph)
        self.expand_step = StaticStep(self._expand, cuda_graph)

    @torch.inference_mode()
    def _gate_table(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(W_ih . e of every draft token [N, 3G], the draft id of every target id [V]), or (None, None)
        without a draft vocabulary or past `GATE_TABLE_BYTES`. Built 256 rows at a time. On plain kernels
        the table holds exactly what a step computes; on measured ones (`inference.kernels`) a 256-row call
        may run another kernel than a one-row step and round differently, which moves drafts, never outputs."""
        vocab, head = self.drafter.vocab, self.head
        p = next(head.parameters())
        if not vocab.is_subset or vocab.size * 3 * head.gru_hidden_dim * p.element_size() > GATE_TABLE_BYTES:
            return None, None
        chunks = [
            head.decoding_gates(self.drafter.embed(ids).to(p.dtype)) for ids in vocab.draft_to_target().split(256)
        ]
        return torch.cat(chunks), vocab.target_to_draft()

    # ---------------------------------------------------------------- the captured computations
    def _corrected(self, hidden: torch.Tensor, states: torch.Tensor, pos: torch.Tensor, out: torch.Tensor) -> None:
        """Corrected children (log-probs and ids, as float64 [n, 2, k]) of n nodes with GRU `states` [n, G]
        whose children sit at draft positions `pos` + 1."""
        if self.top_m:
            features = self.head.correction_features(hidden, states).float()
            logits = candidate_logits(features, self.w2_t, self.base_m, pos)
            values, idx = torch.log_softmax(logits, dim=-1).topk(self.k, dim=-1)
            ids = self.cand.index_select(0, pos).gather(1, idx)
        else:
            logits = self.base.index_select(0, pos) + self.head.correction(hidden, states)
            values, ids = topk_logprobs(logits, self.k, self.token_map)
        out[:, 0].copy_(values)
        out[:, 1].copy_(ids)

    @torch.inference_mode()
    def _setup(self) -> None:
        if self.top_m:
            cand, base_m, w2 = top_m_candidates(self.base, self.top_m, self.token_map, self.head.embed_proj[2].weight)
            self.cand.copy_(cand)
            self.base_m.copy_(base_m)
            self.w2_t.copy_(w2.t())
        for pos in range(self.prefix):  # one row at a time: the reference's exact ops
            values, ids = topk_logprobs(self.base[pos], self.k_base, self.token_map)
            self.base_choice[pos, 0].copy_(values)
            self.base_choice[pos, 1].copy_(ids)
        embed = self.drafter.embed(self.root_id).to(self.hidden.dtype)
        self.root_state.copy_(self.head.decoding_first_step(self.head.decoding_gates(embed)))
        first = torch.zeros(1, dtype=torch.long, device=self.hidden.device)
        self._corrected(self.hidden[:1], self.root_state, first, self.root_choice)

    @torch.inference_mode()
    def _expand(self) -> None:
        if self.gate_table is not None:
            gi = self.gate_table.index_select(0, self.draft_index.index_select(0, self.tokens))
        else:
            gi = self.head.decoding_gates(self.drafter.embed(self.tokens).to(self.parent_states.dtype))
        self.out_states.copy_(self.head.decoding_step(gi, self.parent_states))
        self._corrected(self.hidden.index_select(0, self.pos), self.out_states, self.pos, self.out_choice)

    # ---------------------------------------------------------------- the Expander protocol
    def prepare(self, hidden: torch.Tensor, base_logits: torch.Tensor, root: torch.Tensor) -> FastDominoExpander:
        """Load one round's backbone outputs (hidden [D, H], base logits [D, V], root [1]) and run setup."""
        self.hidden.copy_(hidden)
        self.base.copy_(base_logits)
        self.root_id.copy_(root)
        self.setup_step()
        self._slot, self._ids = {-1: 0}, {}
        self.pool[0].copy_(self.root_state[0])
        self._base_lists = [(ids, values) for values, ids in self.base_choice[: self.prefix].tolist()]  # one read
        return self

    def _children(self, node: int, position: int, corrected: list[list[float]]) -> Children:
        """Node's children at draft position `position` (1-based): base ones within the prefix."""
        ids, values = self._base_lists[position - 1] if position <= self.prefix else corrected[::-1]
        ids = [int(i) for i in ids]
        self._ids[node] = ids
        return ids, values

    def root(self) -> Children:
        return self._children(-1, 1, self.root_choice[0].tolist())

    def expand(self, node: int, parent: int, rank: int, depth: int) -> Children:
        return self.expand_many([(node, parent, rank, depth)])[0]

    def expand_many(self, requests: list[tuple[int, int, int, int]]) -> list[Children]:
        """`expand` for each (node, parent, rank, depth), `width` nodes per step."""
        out = []
        for start in range(0, len(requests), self.width):
            chunk = requests[start : start + self.width]
            pad = chunk[:1] * (self.width - len(chunk))
            slots = [self._slot[parent] for _, parent, _, _ in chunk + pad]
            self.parent_states.copy_(self.pool.index_select(0, torch.tensor(slots, device=self.pool.device)))
            self.tokens.copy_(torch.tensor([self._ids[parent][rank] for _, parent, rank, _ in chunk + pad]))
            self.pos.copy_(torch.tensor([depth for *_, depth in chunk + pad]))
            self.expand_step()
            self.steps += 1
            choices = self.out_choice[: len(chunk)].tolist()  # the step's one device-to-host read
            first = len(self._slot)
            while first + len(chunk) > len(self.pool):
                self.pool = torch.cat([self.pool, torch.zeros_like(self.pool)])
            self.pool[first : first + len(chunk)].copy_(self.out_states[: len(chunk)])
            for j, (node, _, _, depth) in enumerate(chunk):
                self._slot[node] = first + j
                out.append(self._children(node, depth + 1, choices[j]))
        return out
