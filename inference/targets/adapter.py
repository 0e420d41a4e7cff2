"""`TargetModel`: any Hugging Face causal LM as the target of speculative decoding.

What decoding and training need from the target, and nothing else:
- logits plus the concatenated outputs of `target_layer_ids` (captured with forward hooks on just those
  layers; id `l` = output of decoder layer `l` = HF `hidden_states[l + 1]`);
- an incremental KV cache that can be cropped, and compacted: after a tree verification the accepted
  path's entries are gathered to the front of the verified window. On the lean engine
  (`lean_forward.py`, installed by `engine.py`) that is a `StaticKVCache`; on HF's forward transformers'
  `DynamicCache` with in-place growing layers (`kv_cache.py`). `new_cache` gives the engine's kind and
  every other call dispatches on the cache it is handed;
- a forward over a token tree: explicit position ids plus an additive 4-D mask (built by
  `inference.decoding.tree.draft_tree.tree_attention_mask` from the tree's visibility), windowed for
  sliding-window layers (`sliding_window.py`), whose cache entries are all kept;
- on the lean engine only, one forward over several sequences at their own lengths (`forward_ragged` /
  `prefill_ragged` on a `RaggedKVCache` from `new_ragged_cache`: `ragged_forward.py`), the building block
  of decoding several sequences with one target forward per round.
The calls work with transformers 5.x both before and after `past_key_values` was renamed `cache`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import DynamicCache

from inference.targets import kv_cache
from inference.targets.mask_token import choose_mask_token_id, default_mask_token_id
from inference.targets.ragged_cache import RaggedKVCache, RowCache
from inference.targets.ragged_forward import lean_of, new_ragged_cache, ragged_forward, ragged_prefill
from inference.targets.ragged_window import RaggedWindow
from inference.targets.sliding_window import hf_attention_mask
from inference.targets.static_cache import StaticKVCache


@dataclass
class TargetOutput:
    logits: torch.Tensor  # [b, q, V] (or [b, 1, V] with last_logits_only)
    features: torch.Tensor | None  # [b, q, K*H] for the requested layer ids, else None


def find_decoder_layers(model: nn.Module, num_layers: int) -> nn.ModuleList:
    """The decoder layer list of an HF causal LM (`model.model.layers` for Llama/Qwen/Mistral-likes)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if isinstance(layers, nn.ModuleList) and len(layers) == num_layers:
        return layers
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == num_layers:
            return module
    raise ValueError(f"cannot find the {num_layers} decoder layers of {type(model).__name__}")


class TargetModel:
    """A frozen HF causal LM, its tokenizer (optional) and the feature / cache operations decoding uses."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any = None,
        name: str | None = None,
        mask_token_id: int | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.model = model.eval().requires_grad_(False)
        self.tokenizer = tokenizer
        # Extra chat-template switches, e.g. {"enable_thinking": False} for Qwen3 (how the public drafters
        # were trained); every prompt this project renders goes through `render_chat`, so they apply everywhere.
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.config = model.config
        self.name = name or getattr(self.config, "_name_or_path", None) or type(model).__name__
        self.layers = find_decoder_layers(model, self.config.num_hidden_layers)
        params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        self._mask_token_id = mask_token_id
        # Set by `engine.install_engine`: the lean layer loop (None = HF's forward), the engine's name, the
        # kernel policy the linears follow and how many linears hold a oneDNN-prepacked layout.
        self.lean = None
        self.precision = None  # a kernels.choice.PrecisionChoice where load_target chose it
        self.engine = "hf"
        self.kernel_policy = None
        self.prepacked_linears = 0

    # --------------------------------------------------------------------------- properties
    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def precision_name(self) -> str:
        """float32, bfloat16 (the dtype's name) or bf16-weights (fp32 compute on bf16-valued weights)."""
        return self.precision.name if self.precision is not None else str(self.dtype).removeprefix("torch.")

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

    @property
    def embed_tokens(self) -> nn.Module:
        return self.model.get_input_embeddings()

    @property
    def lm_head(self) -> nn.Module:
        """The output projection decoding runs (the lean engine's, on its measured kernels, where it runs)."""
        return self.lean.lm_head if self.lean is not None else self.model.get_output_embeddings()

    @property
    def mask_token_id(self) -> int:
        if self._mask_token_id is None:
            if self.tokenizer is None:
                self._mask_token_id = default_mask_token_id(self.config)
            else:
                self._mask_token_id = choose_mask_token_id(self.tokenizer, self.config)
        return self._mask_token_id

    @property
    def stop_token_ids(self) -> list[int]:
        """Ids that end a response: the generation config's eos id(s), else the tokenizer's eos."""
        ids = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if ids is None:
            ids = self.config.eos_token_id if self.tokenizer is None else self.tokenizer.eos_token_id
        ids = [ids] if isinstance(ids, int) else list(ids or [])
        if not ids:
            raise ValueError(f"target {self.name} defines no eos token id")
        return ids

    def render_chat(self, messages: list[dict[str, str]], add_generation_prompt: bool = False) -> str:
        """The chat template's text for `messages` (with `chat_template_kwargs`)."""
        if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"target {self.name} has no tokenizer with a chat template")
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **self.chat_template_kwargs
        )

    def chat_ids(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> list[int]:
        """Token ids of the rendered chat (no extra special tokens: the template places them)."""
        text = self.render_chat(messages, add_generation_prompt)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    # --------------------------------------------------------------------------- forward
    def forward(
        self,
        input_ids: torch.Tensor,
        cache: DynamicCache | None = None,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        layer_ids: list[int] | None = None,
        last_logits_only: bool = False,
    ) -> TargetOutput:
        """Run the target over `input_ids` [b, q], appending to `cache` when given.

        `attention_mask` may be a 2-D padding mask or a prepared additive 4-D mask (tree verification);
        `layer_ids` selects which layer outputs are returned as features, concatenated in that order.
        A `StaticKVCache` (from `new_cache` on the lean engine) runs the lean loop; anything else HF's forward.
        """
        self._check_layer_ids(layer_ids)
        if isinstance(cache, StaticKVCache):
            logits, features = self.lean(input_ids, cache, position_ids, attention_mask, layer_ids, last_logits_only)
            return TargetOutput(logits=logits, features=features)
        captured: dict[int, torch.Tensor] = {}
        handles = []
        for lid in dict.fromkeys(layer_ids or []):

            def hook(_m: nn.Module, _inp: Any, out: Any, lid: int = lid) -> None:
                captured[lid] = out[0] if isinstance(out, tuple) else out

            handles.append(self.layers[lid].register_forward_hook(hook))
        if attention_mask is not None and attention_mask.dim() == 4:
            start = 0 if cache is None else kv_cache.cache_length(cache)
            if position_ids is None:
                position_ids = torch.arange(start, start + input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            attention_mask = hf_attention_mask(self.config, attention_mask, position_ids, start)
        kwargs: dict[str, Any] = {"use_cache": cache is not None}
        if cache is not None:
            kwargs[self._cache_kwarg] = cache
        if last_logits_only:
            kwargs["logits_to_keep"] = 1
        try:
            out = self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask, **kwargs)
        finally:
            for h in handles:
                h.remove()
        features = torch.cat([captured[i] for i in layer_ids], dim=-1) if layer_ids else None
        return TargetOutput(logits=out.logits, features=features)

    __call__ = forward

    def _check_layer_ids(self, layer_ids: list[int] | None) -> None:
        for lid in dict.fromkeys(layer_ids or []):
            if not 0 <= lid < self.num_layers:
                raise ValueError(f"layer id {lid} outside the target's {self.num_layers} layers")

    # --------------------------------------------------------------------------- ragged batches
    def _ragged_lean(self) -> Any:
        if self.lean is None:
            raise ValueError(f"ragged batched forwards need the lean engine; target {self.name} runs on engine=hf")
        return lean_of(self.lean)

    def new_ragged_cache(self, batch: int, capacity: int | None = None) -> RaggedKVCache:
        """An empty cache of `batch` sequences for `forward_ragged` (lean engine only); `capacity` = the
        longest sequence plus the widest window, when known."""
        return new_ragged_cache(self._ragged_lean(), batch, capacity)

    def forward_ragged(
        self, window: RaggedWindow, cache: RaggedKVCache, layer_ids: list[int] | None = None, rows: int | None = None
    ) -> TargetOutput:
        """One forward over several sequences' windows (`ragged_forward.py`): logits [B, W, V], features
        [B, W, K*H], over every row of `cache` or its first `rows` rows (B of them); every computed row
        grows by W, so crop or compact each row afterwards."""
        lean = self._ragged_lean()
        self._check_layer_ids(layer_ids)
        logits, features = ragged_forward(lean, cache, window, layer_ids, rows)
        return TargetOutput(logits=logits, features=features)

    def prefill_ragged(
        self, prompts: list[torch.Tensor | list[int] | None], cache: RaggedKVCache, layer_ids: list[int] | None = None
    ) -> TargetOutput:
        """Append prompts of different lengths to their rows (None: row untouched) in one forward: logits
        [B, 1, V] at each row's last prompt token, features [B, W, K*H] (row r's first len(prompt r) real)."""
        lean = self._ragged_lean()
        self._check_layer_ids(layer_ids)
        logits, features, _ = ragged_prefill(lean, cache, prompts, layer_ids)
        return TargetOutput(logits=logits.unsqueeze(1), features=features)

    # --------------------------------------------------------------------------- KV cache
    def new_cache(self, capacity: int | None = None) -> StaticKVCache | DynamicCache:
        """An empty KV cache for this target's engine; `capacity` = the longest sequence it will hold, when
        known (the static cache then never grows)."""
        if self.lean is not None:
            return self.lean.new_cache(capacity)
        return kv_cache.new_cache(self.config)

    @staticmethod
    def cache_length(cache: StaticKVCache | RowCache | DynamicCache) -> int:
        """How many positions the cache holds."""
        return cache.length if isinstance(cache, StaticKVCache | RowCache) else kv_cache.cache_length(cache)

    @staticmethod
    def crop_cache(cache: StaticKVCache | RowCache | DynamicCache, length: int) -> None:
        """Drop every entry at index >= `length` (a `RowCache`: of its row of a ragged cache)."""
        if isinstance(cache, StaticKVCache | RowCache):
            cache.crop(length)
        else:
            kv_cache.crop_cache(cache, length)

    @staticmethod
    def compact_cache(cache: StaticKVCache | RowCache | DynamicCache, start: int, keep: torch.Tensor) -> None:
        """Keep only entries `start + keep` of the window at `start`, moved to `start..` (tree verification;
        a `RowCache`: in its row of a ragged cache)."""
        if isinstance(cache, StaticKVCache | RowCache):
            cache.compact(start, keep)
        else:
            kv_cache.compact_cache(cache, start, keep)
