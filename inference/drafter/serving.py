"""Where an exported drafter can be served: each public stack's loading rules, checked against its config.json.

Public serving stacks load DFlash-family drafters under rules of their own, read from their public code
and threads (late 2026): SGLang's `parse_dflash_draft_config` and `validate_domino_runtime`, vLLM's DFlash
loader, SpecForge's `to_hf` normaliser. A drafter that breaks one is refused, or worse, loaded without the
part the stack does not know (SGLang's and vLLM's DFlash loaders skip weights they do not recognise).
One definition serves the export line of `domino-export`, the "Serving" section of the model card and
`domino-describe DRAFTER_FOLDER`.
The rules read the `config.json` the stacks read (`DrafterConfig.to_hf_dict`), not this project's parsed
form, so that a folder from elsewhere is judged as the stacks would judge it. They are checked statically:
no stack is run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inference.drafter.config import DrafterConfig
from inference.drafter.layout import lookup

SERVING_HEADING = "## Serving"


def _draft_vocab(d: dict[str, Any]) -> int | None:
    n = d.get("draft_vocab_size")
    return None if n is None or n == d.get("vocab_size") else n


def _has_head(d: dict[str, Any]) -> bool:
    return lookup(d, "projector_type") is not None or (d.get("architectures") or [None])[0] == "DominoDraftModel"


@dataclass(frozen=True)
class Rule:
    """One condition a stack puts on a drafter: what it needs, why (the stack's documented behaviour), and a
    check returning what in the config breaks it (None when it holds)."""

    needs: str
    reason: str
    broken: Callable[[dict[str, Any]], str | None]


@dataclass(frozen=True)
class Stack:
    name: str
    rules: tuple[Rule, ...]

    def first_broken(self, d: dict[str, Any]) -> tuple[Rule, str] | None:
        """The first rule this config breaks and what breaks it; None when the stack can load it."""
        for rule in self.rules:
            try:
                found = rule.broken(d)
            except ValueError as e:  # e.g. two places of the config that disagree on a field
                found = str(e)
            if found is not None:
                return rule, found
        return None


def _parses(d: dict[str, Any]) -> str | None:
    try:
        DrafterConfig.from_hf_dict(d)
    except (ValueError, KeyError, TypeError) as e:
        return str(e)
    return None


def _domino_only(check: Callable[[dict[str, Any]], str | None]) -> Callable[[dict[str, Any]], str | None]:
    return lambda d: check(d) if _has_head(d) else None


def _prefix_one(d: dict[str, Any]) -> str | None:
    n = lookup(d, "pure_draft_prefix_len", 0)
    return None if n == 1 else f"pure_draft_prefix_len {n}"


def _boolean_shift_label(d: dict[str, Any]) -> str | None:
    value = lookup(d, "shift_label", False)
    return None if isinstance(value, bool) else f"shift_label {value!r}"


def _block_above_one(d: dict[str, Any]) -> str | None:
    n = lookup(d, "block_size", 16)
    return None if isinstance(n, int) and n > 1 else f"block_size {n!r}"


def _bf16(d: dict[str, Any]) -> str | None:
    dtype = d.get("torch_dtype") or d.get("dtype")
    return None if dtype == "bfloat16" else f"{dtype} weights"


def _target_vocab(d: dict[str, Any]) -> str | None:
    n = _draft_vocab(d)
    return None if n is None else f"a draft vocabulary of {n} of {d.get('vocab_size')} tokens"


def _no_head(d: dict[str, Any]) -> str | None:
    return "a Domino head" if _has_head(d) else None


def _known_projector(d: dict[str, Any]) -> str | None:
    projector = lookup(d, "projector_type")
    return None if projector in (None, "dflash", "domino", "dspark") else f"projector_type {projector!r}"


SGLANG_DOMINO = "required by SGLang's Domino path (validate_domino_runtime)"
STACKS = (
    Stack(
        "domino-decode (this project)",
        (Rule("a config.json this project parses", "inference.drafter.config reads it or says why not", _parses),),
    ),
    Stack(
        "SGLang",
        (
            Rule("pure_draft_prefix_len == 1", SGLANG_DOMINO, _domino_only(_prefix_one)),
            Rule("a boolean shift_label", SGLANG_DOMINO, _domino_only(_boolean_shift_label)),
            Rule("block_size > 1", SGLANG_DOMINO, _domino_only(_block_above_one)),
            Rule(
                "bf16 weights",
                "SGLang's Domino path runs on CUDA in bf16 only (validate_domino_runtime)",
                _domino_only(_bf16),
            ),
            Rule(
                "the target's vocabulary",
                "SGLang's DFlash-family loader reads no draft_vocab_size or d2t; its Domino path requires the "
                "target's vocabulary",
                _target_vocab,
            ),
        ),
    ),
    Stack(
        "vLLM",
        (
            Rule(
                "no Domino head", "vLLM's DFlash loader has no Domino head and skips weights it does not know", _no_head
            ),
        ),
    ),
    Stack(
        "SpecForge",
        (
            Rule(
                "projector_type dflash, domino or dspark",
                "SpecForge's export normaliser accepts only these",
                _known_projector,
            ),
            Rule("the target's vocabulary", "SpecForge's DFlash family takes no draft vocabulary", _target_vocab),
        ),
    ),
)


def serving_verdicts(hf_config: dict[str, Any]) -> list[tuple[Stack, tuple[Rule, str] | None]]:
    """Per stack (this project's first): None when it can load the drafter, else its first broken rule."""
    return [(stack, stack.first_broken(hf_config)) for stack in STACKS]


def _why(rule: Rule, found: str) -> str:
    return f"{rule.needs} (this drafter has {found}): {rule.reason}".replace("|", "/")


def serving_line(hf_config: dict[str, Any]) -> str:
    """One line: the stacks that can load the drafter, and for each other one the first rule it breaks."""
    verdicts = [
        f"{stack.name} {'yes' if b is None else 'no, needs ' + _why(*b)}" for stack, b in serving_verdicts(hf_config)
    ]
    return "serving: " + "; ".join(verdicts)


def serving_section(hf_config: dict[str, Any]) -> list[str]:
    """The model card's Serving section (heading included), one table row per stack."""
    lines = [
        SERVING_HEADING,
        "Which serving stacks can load this drafter, by their documented loading rules checked against "
        "`config.json` (`inference/drafter/serving.py`; no stack was run):",
        "",
        "| stack | loads it | first rule it breaks |",
        "|---|---|---|",
    ]
    for stack, broken in serving_verdicts(hf_config):
        lines.append(
            f"| {stack.name} | {'yes' if broken is None else 'no'} | {'' if broken is None else _why(*broken)} |"
        )
    return lines


def with_serving_section(card: str, hf_config: dict[str, Any]) -> str:
    """`card` (a model card's Markdown) with its Serving section replaced, or added before "## Use" (else at
    the end) when it has none; the rest of the card is kept byte for byte."""
    section = "\n".join(serving_section(hf_config)) + "\n\n"
    lines = card.splitlines(keepends=True)
    heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
    mine = [i for i in heads if lines[i].rstrip("\n") == SERVING_HEADING]
    if mine:
        start = mine[0]
        end = next((i for i in heads if i > start), len(lines))
    else:
        start = end = next((i for i in heads if lines[i].startswith("## Use")), len(lines))
        if start == len(lines) and lines and not lines[-1].endswith("\n\n"):
            section = "\n" + section
    return "".join(lines[:start]) + section + "".join(lines[end:])
