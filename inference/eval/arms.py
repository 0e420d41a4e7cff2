"""The arms a decoding run compares: a method (`dominotree`), or a method at its own draft size
(`dominotree/2`, `ddtree/auto`, `domino/3`, `dflash/full`).

A tree arm's size is its budget (`tree.budget`), a chain arm's its window (`chain.window`; `full` = the
whole block); an arm without one takes the run's. Several sizes of one method in one run decode the same
prompts in the same process and waves, so that their comparison is not also a comparison of two moments
of a machine whose speed drifts between processes (on a shared 2-core VM, batched `ar` ran 104 and 121
tok/s in two runs minutes apart): `methods=[ar,dominotree,dominotree/2]` with `tree.budget=auto` puts the
cost-aware rule beside a fixed budget, paired.
"""

from __future__ import annotations

from dataclasses import replace

from inference.decoding.budget import AUTO
from inference.decoding.methods import DECODING_METHODS, method_spec
from inference.decoding.options import DecodeOptions, TreeOptions

SEPARATOR = "/"
FULL = "full"  # a chain arm's whole block (`chain.window=null`)


def arm_method(arm: str) -> str:
    """The decoding method an arm runs (`dominotree/2` -> `dominotree`)."""
    return arm.partition(SEPARATOR)[0]


def _size_value(size: str) -> int | str | None:
    """An arm's size as its option takes it: a count, `auto`, or None (`full`: the whole block)."""
    if size == FULL:
        return None
    return int(size) if size.isdigit() else size


def check_arms(arms: list[str]) -> None:
    """Refuse an unknown method, a size `ar` cannot have, a size that is not a count, `auto` (or `full` for
    chains), and an arm named twice, in one line each."""
    seen: set[str] = set()
    for arm in arms:
        method, sep, size = arm.partition(SEPARATOR)
        spec = method_spec(method)
        if arm in seen:
            raise ValueError(f"arm {arm!r} is listed twice in methods; name each arm once")
        seen.add(arm)
        if not sep:
            continue
        if spec.family == "ar":
            raise ValueError(f"arm {arm!r}: ar drafts nothing, so it takes no size; write ar")
        sizes = "N, auto or full" if spec.family == "chain" else "N or auto"
        valid = size == AUTO or (size.isdigit() and int(size) >= 1) or (size == FULL and spec.family == "chain")
        if not valid:
            raise ValueError(f"arm {arm!r}: the size after {SEPARATOR!r} must be {sizes}, e.g. {method}/2")
    if not arms:
        raise ValueError(f"no methods given; choose from {', '.join(DECODING_METHODS)}")


def arm_options(arm: str, options: DecodeOptions, tree: TreeOptions) -> tuple[DecodeOptions, TreeOptions]:
    """The run's options (`options` of the arm's family, `tree`) with the arm's own size in place."""
    method, sep, size = arm.partition(SEPARATOR)
    if not sep:
        return options, tree
    if method_spec(method).family == "tree":
        return options, replace(tree, budget=_size_value(size))
    return replace(options, chain_window=_size_value(size)), tree
