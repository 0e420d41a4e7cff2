"""`TargetModel`: any Hugging Face causal LM as the target of speculative decoding.

What decoding and training need from the target, and nothing else:
- logits plus the concatenated outputs of `target_layer_ids` (captured with forward hooks on just those
  layers; id `l` = output of decoder layer `l` = HF `hidden_states[l + 1]`);
- an incremental KV cache (transformers' `DynamicCache`) that can be cropped, and compacted: after a
  tree verification the accepted path's entries are gathered to the front of the verified window (the
  operations live in `kv_cache.py`; the adapter's methods are those functions);
- a forward over a token tree: explicit position ids plus an additive 4-D mask (built by
  `inference.decoding.tree.draft_tree.tree_attention_mask` from the tree's visibility).
The calls work with transformers 5.x both before and after `past_key_values` was renamed `cache`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import DynamicCache

from inference.targets.kv_cache import cache_length, compact_cache, crop_cache, new_cache
from inference.targets.mask_token import choose_mask_token_id, default_mask_token_id


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
        # How many nn.Linear layers run on prepacked oneDNN weights (`load_target(prepack=...)`, prepacked_linear.py).
        self.prepacked_linears = 0

    # --------------------------------------------------------------------------- properties
    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

    @property
    def embed_tokens(self) -> nn.Module:
        return self.model.get_input_embeddings()

    @property
    def lm_head(self) -> nn.Module:
        return self.model.get_output_embeddings()

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
        """
        captured: dict[int, torch.Tensor] = {}
        handles = []
        for lid in dict.fromkeys(layer_ids or []):
            if not 0 <= lid < self.num_layers:
                raise ValueError(f"layer id {lid} outside the target's {self.num_layers} layers")

            def hook(_m: nn.Module, _inp: Any, out: Any, lid: int = lid) -> None:
                captured[lid] = out[0] if isinstance(out, tuple) else out

            handles.append(self.layers[lid].register_forward_hook(hook))
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

    # --------------------------------------------------------------------------- KV cache (kv_cache.py)
    def new_cache(self) -> DynamicCache:
        """A KV cache for this target whose full-attention layers append in place (`kv_cache.new_cache`)."""
        return new_cache(self.config)

    cache_length = staticmethod(cache_length)
    crop_cache = staticmethod(crop_cache)
    compact_cache = staticmethod(compact_cache)
