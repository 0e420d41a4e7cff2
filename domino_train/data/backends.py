"""Generation backends for the regenerate stage.

- `LocalBackend`: the target in this process (`inference.decoding.batch_generation.generate_batch`: left-padded
  batches over one KV cache, a random stream per request). Right for small targets and tests.
- `OpenAIBackend`: an OpenAI-compatible chat server (SGLang, vLLM) for large targets, called with
  `concurrency` requests in flight; the target's `chat_template_kwargs` (e.g. `enable_thinking: false`)
  are forwarded the way SGLang and vLLM accept them.

Both take the same `Request`s and return one `Response` per request, in order; a failed request is a
`Response` with `error` set (counted by the caller), never an exception that ends the run.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from domino_train.data.batching import length_sorted_batches
from inference.decoding.batch_generation import generate_batch
from inference.decoding.sampling import SamplingParams
from inference.targets.adapter import TargetModel


@dataclass
class Request:
    messages: list[dict[str, str]]
    seed: int
    prompt_ids: list[int] | None = None  # filled by backends that tokenize locally


@dataclass
class Response:
    text: str = ""
    finish_reason: str = ""  # "stop" or "length"
    num_tokens: int = 0
    error: str | None = None
    prompt_tokens: int | None = None  # the prompt's length as the backend rendered and tokenized it


class LocalBackend:
    """Generate with the in-process target: requests sorted by prompt length, up to `batch_size` per batch
    and at most `max_batch_tokens` KV entries ((longest prompt + max_new_tokens) x rows) per batch.

    On a CPU a decode step is bound by reading the weights, so tokens/s grow with the batch until memory
    binds; the token cap keeps a batch of long prompts from exhausting memory."""

    needs_weights = True  # the target must be loaded with its weights

    def __init__(
        self,
        target: TargetModel,
        sampling: SamplingParams,
        max_new_tokens: int,
        batch_size: int = 8,
        max_batch_tokens: int | None = None,
    ) -> None:
        self.target, self.sampling, self.max_new_tokens, self.batch_size = target, sampling, max_new_tokens, batch_size
        self.max_batch_tokens = max_batch_tokens
        self.max_context = getattr(target.config, "max_position_embeddings", None)

    def batches(self, prompt_lengths: list[int]) -> list[list[int]]:
        """Request indices grouped into batches, shortest prompts first."""
        return length_sorted_batches(prompt_lengths, self.max_batch_tokens, self.batch_size, self.max_new_tokens)

    def prompt_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return len(self.target.chat_ids(messages))

    def generate(self, requests: list[Request]) -> list[Response]:
        for r in requests:
            r.prompt_ids = r.prompt_ids or self.target.chat_ids(r.messages)
        out: list[Response] = [Response()] * len(requests)
        for idx in self.batches([len(r.prompt_ids) for r in requests]):
            gens = [torch.Generator(device=self.target.device).manual_seed(requests[i].seed) for i in idx]
            results = generate_batch(
                self.target, [requests[i].prompt_ids for i in idx], self.max_new_tokens, self.sampling, gens
            )
            for i, g in zip(idx, results, strict=True):
                text = self.target.tokenizer.decode(g.token_ids, skip_special_tokens=True)
                out[i] = Response(
                    text=text,
                    finish_reason=g.finish_reason,
                    num_tokens=len(g.token_ids),
                    prompt_tokens=len(requests[i].prompt_ids),
                )
        return out


class OpenAIBackend:
    """POST /v1/chat/completions to an OpenAI-compatible server; the API key is read from `api_key_env`."""

    needs_weights = False  # the server runs the model; a weightless target supplies the tokenizer

    def __init__(
        self,
        base_url: str,
        model: str,
        sampling: SamplingParams,
        max_new_tokens: int,
        concurrency: int = 64,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        api_key_env: str = "OPENAI_API_KEY",
        chat_template_kwargs: dict[str, Any] | None = None,
        target: TargetModel | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.sampling, self.max_new_tokens = model, sampling, max_new_tokens
        self.concurrency, self.timeout_s, self.max_retries = concurrency, timeout_s, max_retries
        self.api_key = os.environ.get(api_key_env, "")
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.target = target  # optional: only its tokenizer is used, for the context-length rule
        self.max_context = getattr(target.config, "max_position_embeddings", None) if target else None

    def prompt_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return len(self.target.chat_ids(messages)) if self.target is not None else None

    def _payload(self, r: Request) -> dict[str, Any]:
        s = self.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": r.messages,
            "max_tokens": self.max_new_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": r.seed,
        }
        if s.top_k:
            body["top_k"] = s.top_k
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = self.chat_template_kwargs
        return body

    def _call(self, r: Request) -> Response:
        data = json.dumps(self._payload(r)).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        error = ""
        for attempt in range(self.max_retries + 1):
            try:
                req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    body = json.loads(resp.read())
                choice, usage = body["choices"][0], body.get("usage") or {}
                return Response(
                    text=choice["message"]["content"] or "",
                    finish_reason=choice.get("finish_reason") or "stop",
                    num_tokens=int(usage.get("completion_tokens") or 0),
                    prompt_tokens=int(usage["prompt_tokens"]) if usage.get("prompt_tokens") is not None else None,
                )
            except urllib.error.HTTPError as e:
                error = f"HTTP {e.code}"
                if e.code < 500 and e.code != 429:  # a bad request does not get better by retrying
                    break
            except (urllib.error.URLError, TimeoutError, OSError, KeyError, IndexError, ValueError) as e:
                error = f"{type(e).__name__}: {e}"
            time.sleep(min(2**attempt, 30) * 0.1)
        return Response(error=error)

    def generate(self, requests: list[Request]) -> list[Response]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(self._call, requests))
