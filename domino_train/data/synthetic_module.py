"""`SyntheticDataModule`: a small corpus a tiny target writes itself, for smoke runs and tests."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from domino_train.data.base_module import DominoDataModule
from inference.targets.adapter import TargetModel


class SyntheticDataModule(DominoDataModule):
    """A corpus the (tiny) target writes itself: random prompts, its own sampled continuations.

    Nothing to download or prepare; like real regenerated data, the drafter learns to predict what this
    target says. `target` is the target's config (instantiated here, on the CPU) or a factory.
    """

    def __init__(
        self,
        target: Any,
        num_rows: int = 96,
        prompt_length: int = 12,
        response_length: int = 40,
        temperature: float = 0.0,
        batch_size: int = 4,
        val_size: int = 16,
        max_length: int = 128,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__(batch_size, val_size, max_length, num_workers, seed)
        self.target_factory = target
        self.num_rows, self.prompt_length, self.response_length = num_rows, prompt_length, response_length
        self.temperature = temperature

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        from inference.decoding.batch_generation import generate_batch
        from inference.decoding.sampling import SamplingParams

        if callable(self.target_factory):
            target: TargetModel = self.target_factory(device="cpu")
        else:
            from hydra.utils import instantiate

            target = instantiate(self.target_factory, device="cpu")
        g = torch.Generator().manual_seed(self.seed)
        vocab = min(len(target.tokenizer), target.config.vocab_size) if target.tokenizer else target.config.vocab_size
        prompts = torch.randint(0, vocab, (self.num_rows, self.prompt_length), generator=g).tolist()
        gens = [torch.Generator().manual_seed(self.seed * 100_003 + i) for i in range(self.num_rows)]
        outs = generate_batch(
            target, prompts, self.response_length, SamplingParams(self.temperature), gens, stop_token_ids=[-1]
        )
        rows = [
            {"input_ids": p + o.token_ids, "loss_mask": [0] * len(p) + [1] * len(o.token_ids)}
            for p, o in zip(prompts, outs, strict=True)
        ]
        self.manifest = {
            "source": "synthetic",
            "target": target.name,
            "num_rows": self.num_rows,
            "prompt_length": self.prompt_length,
            "response_length": self.response_length,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        self._split(rows, len(rows))

    labels = "text"
    feature_layer_ids = None


def standing_in(**settings: Any) -> SyntheticDataModule:
    """The synthetic corpus standing in for an experiment's data set (`debug=cpu`, conf/debug/cpu.yaml).

    The experiment's `data` keys are merged under this node by Hydra, which cannot remove keys; those only
    a tokenized set reads (`path`, `features_path`, `labels`, ...) describe data the check does without,
    so they are dropped here and the module's own keys are kept.
    """
    own = inspect.signature(SyntheticDataModule).parameters
    return SyntheticDataModule(**{key: value for key, value in settings.items() if key in own})
