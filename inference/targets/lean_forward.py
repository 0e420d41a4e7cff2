"""`LeanForward`: the target's forward as one hand-written layer loop over the HF model's own weights,
on a `StaticKVCache`. The engine `TargetModel` runs decoding on (`engine: lean`), where the model allows.

Why: Hugging Face's eager forward spends most of a CPU decode step outside the matmuls (mask and cache
objects, per-module dispatch, hooks, a cache that concatenates); SmolLM2-135M's one-token fp32 step took
53-64 ms on 2 EPYC cores where its linears take ~17 ms. This loop does only the model's arithmetic:
fused q/k/v and gate/up projections (the HF modules' weights become views of the fused tensors: no extra
memory), one fused `F.rms_norm` per norm, the rotary embedding applied to queries and keys in one pass
(HF's own rotary module gives cos / sin, so every rope type works), SDPA with grouped KV heads (folded
into the query axis at the query counts where that measured faster: `kernels/attention.py`), K/V
written in place, the features of `layer_ids` taken as the layers produce them, and the lm_head on the
last row only when that is all the caller reads. On a 2-core CPU each PyTorch op costs 10-40 us
whatever its size, so the loop is written to issue few of them. Every linear runs on the kernel the
machine's table picked (`inference.kernels`), or plain `F.linear` when kernels are off.

Supported: decoder-only Llama-family models whose layers all attend alike (Llama, Mistral, Qwen2, Qwen3 with
its q/k norms), SiLU-gated MLPs, rotary positions of any HF rope type. A sliding window shared by every
layer (Mistral's `sliding_window`) is a mask by position (`sliding_window.py`): a query at position p
sees the keys at positions > p - window. The cache keeps every entry, so crop and tree compaction work as
with full attention, and a tree node sees exactly what `ar` sees at its position.
`lean_unavailable_reason` names what stops any other model, which then runs on HF's forward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from inference.kernels.attention import attend, fold_mask
from inference.targets.sliding_window import FULL, SLIDING, layer_kinds, sliding_window, window_mask
from inference.targets.static_cache import StaticKVCache

LEAN_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
LinearFactory = Callable[[torch.Tensor, torch.Tensor | None], nn.Module]


def lean_unavailable_reason(model: nn.Module) -> str | None:
    """Why `model` cannot run on `LeanForward`, or None when it can."""
    cfg = model.config
    if cfg.model_type not in LEAN_MODEL_TYPES:
        return f"model type {cfg.model_type!r} is not one of {', '.join(LEAN_MODEL_TYPES)}"
    kinds = layer_kinds(cfg)
    if len(kinds) > 1 or not kinds <= {FULL, SLIDING}:
        return f"layers of types {sorted(kinds)} (every layer must attend alike: all full or all sliding)"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"MLP activation {cfg.hidden_act!r} (only silu)"
    if getattr(cfg, "pretraining_tp", 1) != 1:
        return "pretraining_tp > 1"
    inner = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or any(not hasattr(inner, name) for name in needed):
        return "the model does not have the Llama layout (model.embed_tokens / layers / norm / rotary_emb)"
    for layer in inner.layers:
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        names = ("q_proj", "k_proj", "v_proj", "o_proj")
        if attn is None or mlp is None or any(type(getattr(attn, n, None)) is not nn.Linear for n in names):
            return "a decoder layer without nn.Linear q/k/v/o projections"
        if any(type(getattr(mlp, n, None)) is not nn.Linear for n in ("gate_proj", "up_proj", "down_proj")):
            return "a decoder layer without a gated nn.Linear MLP"
    if type(model.get_output_embeddings()) is not nn.Linear:
        return "the lm_head is not an nn.Linear"
    return None


def forward_linears(config: object) -> list[tuple[tuple[int, int], bool, int]] | None:
    """(shape (out, in), bias, count) of the linears one forward runs on this engine (q/k/v and gate/up
    fused), the lm_head last, from the config alone; None for a model type the engine does not run."""
    if getattr(config, "model_type", None) not in LEAN_MODEL_TYPES:
        return None
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    d = getattr(config, "head_dim", None) or config.hidden_size // heads
    h, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    o_bias = bool(getattr(config, "attention_bias", False))
    mlp_bias = bool(getattr(config, "mlp_bias", False))
    return [
        (((heads + 2 * kv) * d, h), o_bias or config.model_type == "qwen2", layers),  # Qwen2: q/k/v biased
        ((h, heads * d), o_bias, layers),
        ((2 * inter, h), mlp_bias, layers),
        ((h, inter), mlp_bias, layers),
        ((config.vocab_size, h), False, 1),
    ]


def fuse_linears(linears: list[nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One weight (and bias) for several linears over the same input, stacked by output; each linear's
    parameters become views of it, so the fused copy costs no memory."""
    weight = torch.cat([m.weight.detach() for m in linears])
    has_bias = [m.bias is not None for m in linears]
    if any(has_bias) and not all(has_bias):
        raise ValueError("cannot fuse linears of which only some have a bias")
    bias = torch.cat([m.bias.detach() for m in linears]) if all(has_bias) else None
    start = 0
    for m in linears:
        end = start + m.out_features
        m.weight = nn.Parameter(weight[start:end], requires_grad=False)
        if bias is not None:
            m.bias = nn.Parameter(bias[start:end], requires_grad=False)
        start = end
    return weight, bias


@dataclass
class Norm:
    """An RMSNorm's weight and epsilon, applied as one fused op."""

    weight: torch.Tensor
    eps: float

    @classmethod
    def of(cls, module: nn.Module | None) -> Norm | None:
        if module is None:
            return None
        eps = getattr(module, "variance_epsilon", None) or getattr(module, "eps", None) or 1e-6
        return cls(module.weight.detach(), float(eps))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


@dataclass
class Packing:
    """Where the N real tokens of a padded [batch, width] window sit: `index` [N] long, their flat
    positions (row * width + column) in row-major order. A ragged verify whose rows keep drafts of
    different sizes pads every row to the widest; packed, its linears, norms and MLP run on the real
    tokens alone (at 8 rows, one row drafting 3 tokens: 11 tokens instead of 32), and only attention, which
    needs each row's queries side by side, runs on the padded layout."""

    index: torch.Tensor
    batch: int
    width: int


@dataclass
class LeanLayer:
    input_norm: Norm
    post_norm: Norm
    qkv: nn.Module
    o: nn.Module
    gate_up: nn.Module
    down: nn.Module
    q_norm: Norm | None
    k_norm: Norm | None


class LeanForward:
    """The layer loop over an HF Llama-family model (see the module doc); `linear` builds each linear from
    its weight and bias (`KernelPolicy.linear`)."""

    def __init__(self, model: nn.Module, linear: LinearFactory) -> None:
        reason = lean_unavailable_reason(model)
        if reason is not None:
            raise ValueError(f"the lean engine cannot run this model: {reason}")
        cfg, inner = model.config, model.model
        self.config = cfg
        self.embed_tokens, self.norm, self.rotary_emb = inner.embed_tokens, Norm.of(inner.norm), inner.rotary_emb
        first = inner.layers[0].self_attn
        self.num_heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.num_heads
        self.head_dim = getattr(first, "head_dim", None) or cfg.hidden_size // self.num_heads
        self.scale = getattr(first, "scaling", self.head_dim**-0.5)
        self.window = sliding_window(cfg)
        self.folded_queries: frozenset[int] = frozenset()  # query counts attended folded (`measure_folding`)
        self.layers = []
        for layer in inner.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv = fuse_linears([attn.q_proj, attn.k_proj, attn.v_proj])
            gate_up = fuse_linears([mlp.gate_proj, mlp.up_proj])
            self.layers.append(
                LeanLayer(
                    input_norm=Norm.of(layer.input_layernorm),
                    post_norm=Norm.of(layer.post_attention_layernorm),
                    qkv=linear(*qkv),
                    o=linear(attn.o_proj.weight.detach(), _bias(attn.o_proj)),
                    gate_up=linear(*gate_up),
                    down=linear(mlp.down_proj.weight.detach(), _bias(mlp.down_proj)),
                    q_norm=Norm.of(getattr(attn, "q_norm", None)),
                    k_norm=Norm.of(getattr(attn, "k_norm", None)),
                )
            )
        head = model.get_output_embeddings()
        self.lm_head = linear(head.weight.detach(), _bias(head))

    def linear_modules(self) -> list[nn.Module]:
        """Every linear the loop runs (for reports: kernels, extra bytes)."""
        mods = [m for layer in self.layers for m in (layer.qkv, layer.o, layer.gate_up, layer.down)]
        return [*mods, self.lm_head]

    def new_cache(self, capacity: int | None = None) -> StaticKVCache:
        weight = self.lm_head.weight
        kwargs = {} if capacity is None else {"capacity": capacity}
        return StaticKVCache(len(self.layers), self.kv_heads, self.head_dim, weight.dtype, weight.device, **kwargs)

    @torch.inference_mode()
    def __call__(
        self,
        input_ids: torch.Tensor,
        cache: StaticKVCache,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        layer_ids: list[int] | None = None,
        last_logits_only: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits [b, q or 1, V] and the features of `layer_ids` [b, q, K*H] (or None), appending to `cache`.

        `attention_mask`: None (causal over the cache), a 2-D padding mask [b, cache + q] (1 = real token),
        or an additive 4-D mask [b or 1, 1, q, cache + q] (tree verification)."""
        b, q = input_ids.shape
        start = cache.length
        total = start + q
        cache.reserve(b, total)
        if position_ids is None:
            position_ids = torch.arange(start, total, device=input_ids.device).expand(b, q)
        x = self.embed_tokens(input_ids)
        mask = self.step_mask(attention_mask, position_ids, b, start, x.dtype)

        def attend_to(i: int, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            cache.write(i, start, keys, values)
            return cache.layer(i, total)

        x, features = self.layers_forward(x, position_ids, mask, attend_to, layer_ids)
        cache.length = total
        if last_logits_only:
            x = x[:, -1:]
        return self.lm_head(self.norm(x)), features

    def layers_forward(
        self,
        x: torch.Tensor,
        position_ids: torch.Tensor,
        mask: torch.Tensor | None,
        attend_to: Callable[[int, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
        layer_ids: list[int] | None,
        pack: Packing | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The decoder layers over embeddings `x` [b, q, H]: the last hidden state and the features of
        `layer_ids`. `attend_to(layer, new keys, new values)` stores a layer's new K/V [b, kv_heads, q, d]
        and returns the keys and values its queries attend over (under `mask`).

        `pack`: `x` [N, H] and `position_ids` [N] are the real tokens of a padded [b, q] window (a ragged
        batch whose rows verify windows of different widths); every per-token op (norms, linears, rotary,
        MLP) runs on those N tokens only, and attention on the padded layout (`Packing`). Outputs are
        packed [N, ...] too."""
        hd, nq = self.head_dim, self.num_heads
        nqk = nq + self.kv_heads
        if pack is None:
            b, q = x.shape[:2]
            cos, sin = self.rotary_emb(x, position_ids)
            cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)  # [b, q, 1, d]: broadcast over heads
            tokens = (b, q)
        else:
            b, q = pack.batch, pack.width
            cos, sin = self.rotary_emb(x[None], position_ids[None])
            cos, sin = cos[0].unsqueeze(1), sin[0].unsqueeze(1)  # [N, 1, d]
            tokens = (x.shape[0],)
            padded = x.new_zeros(b * q, nqk + self.kv_heads, hd)  # pad rows stay 0 through every layer
        wanted = {lid: None for lid in layer_ids or []}
        fold = q in self.folded_queries
        if fold:
            mask = fold_mask(mask, nq // self.kv_heads)
        for i, layer in enumerate(self.layers):
            heads = layer.qkv(layer.input_norm(x)).view(*tokens, -1, hd)  # [.., q heads + k heads + v heads, d]
            qk, vs = heads[..., :nqk, :], heads[..., nqk:, :]
            if layer.q_norm is not None:
                qk = torch.cat([layer.q_norm(qk[..., :nq, :]), layer.k_norm(qk[..., nq:, :])], dim=-2)
            qk = _rotate(qk, cos, sin)
            if pack is not None:
                padded[:, :nqk].index_copy_(0, pack.index, qk)
                padded[:, nqk:].index_copy_(0, pack.index, vs)
                qk, vs = padded[:, :nqk].view(b, q, nqk, hd), padded[:, nqk:].view(b, q, -1, hd)
            qs, ks = qk[:, :, :nq].transpose(1, 2), qk[:, :, nq:].transpose(1, 2)
            keys, values = attend_to(i, ks, vs.transpose(1, 2))
            out = attend(qs, keys, values, mask, self.scale, fold).transpose(1, 2)
            if pack is None:
                out = out.reshape(b, q, -1)
            else:
                out = out.reshape(b * q, -1).index_select(0, pack.index)
            x = x + layer.o(out)
            gate, up = layer.gate_up(layer.post_norm(x)).chunk(2, dim=-1)
            x = x + layer.down(F.silu(gate) * up)
            if i in wanted:
                wanted[i] = x
        features = torch.cat([wanted[i] for i in layer_ids], dim=-1) if layer_ids else None
        return x, features

    def step_mask(
        self, attention_mask: torch.Tensor | None, position_ids: torch.Tensor, b: int, start: int, dtype: torch.dtype
    ) -> torch.Tensor | None:
        """The additive mask [b or 1, 1, q, start + q] of a step of batch `b` at `position_ids` [b or 1, q]
        after `start` cached positions (the caller's mask and the sliding window), or None where every query
        sees every cached key."""
        q = position_ids.shape[1]
        mask = self._mask(attention_mask, b, q, start, dtype, position_ids.device)
        if self.window is not None and start + q > self.window:
            mask = window_mask(mask, position_ids, start, self.window, dtype)
        return mask

    @staticmethod
    def _mask(
        attention_mask: torch.Tensor | None, b: int, q: int, start: int, dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor | None:
        """The additive mask SDPA takes, or None where every query sees every cached key."""
        if attention_mask is not None and attention_mask.dim() == 4:
            return attention_mask.to(dtype)
        total = start + q
        if attention_mask is None and q == 1:
            return None
        rows = torch.arange(start, total, device=device).unsqueeze(1)
        allowed = (torch.arange(total, device=device) <= rows).view(1, 1, q, total)
        if attention_mask is not None:
            if attention_mask.shape != (b, total):
                raise ValueError(f"a 2-D attention mask must be [batch, cache + new] = [{b}, {total}]")
            allowed = allowed & attention_mask.bool().view(b, 1, 1, total)
        mask = torch.zeros(allowed.shape, dtype=dtype, device=device)
        return mask.masked_fill_(~allowed, torch.finfo(dtype).min)


def _bias(linear: nn.Linear) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias.detach()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding as HF's Llama applies it: x * cos + rotate_half(x) * sin."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
