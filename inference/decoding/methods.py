"""The one method table: what each decoding method is, what it accepts and what it needs.

`DECODING_METHODS` maps each name to a `MethodSpec`; the decoders, `build_decoder` and `domino-decode`
all ask it (through `method_spec`, `check_options` and `check_drafter`) instead of keeping lists of their
own. A new method adds a row here and a factory for a new family in `api.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.decoding.chain.verify import VERIFY_RULES
from inference.decoding.options import DecodeOptions
from inference.decoding.tree.verify import TREE_VERIFY_RULES
from inference.drafter import DominoDrafter


@dataclass(frozen=True)
class MethodSpec:
    """One decoding method as the API and `domino-decode` see it."""

    family: str  # "ar", "chain" or "tree": which decoder runs it (and which `verify` key the CLI reads)
    verify_rules: tuple[str, ...]  # accepted `verify` values: chains verify position by position, trees walk
    needs_head: bool  # drafts with the Domino head's correction, so a plain DFlash drafter cannot run it
    baseline: bool  # reads only the backbone's base logits, so it may draft with `baseline_drafter_path`

    @property
    def needs_drafter(self) -> bool:
        return self.family != "ar"


DECODING_METHODS: dict[str, MethodSpec] = {
    "ar": MethodSpec("ar", VERIFY_RULES, needs_head=False, baseline=False),
    "dflash": MethodSpec("chain", VERIFY_RULES, needs_head=False, baseline=True),
    "domino": MethodSpec("chain", VERIFY_RULES, needs_head=True, baseline=False),
    "ddtree": MethodSpec("tree", TREE_VERIFY_RULES, needs_head=False, baseline=True),
    "dominotree": MethodSpec("tree", TREE_VERIFY_RULES, needs_head=True, baseline=False),
}


def method_spec(method: str, family: str | None = None) -> MethodSpec:
    """The row of `method`; with `family`, also refuse a method of another family."""
    spec = DECODING_METHODS.get(method)
    if spec is None or (family is not None and spec.family != family):
        names = [m for m, s in DECODING_METHODS.items() if family is None or s.family == family]
        kind = f"{family} " if family else ""
        raise ValueError(f"unknown {kind}decoding method {method!r}; choose from {', '.join(names)}")
    return spec


def check_options(method: str, options: DecodeOptions) -> MethodSpec:
    """Refuse a verify rule that `method` does not have."""
    spec = method_spec(method)
    if options.verify not in spec.verify_rules:
        raise ValueError(
            f"unknown verify rule {options.verify!r} for {method}; choose one of {', '.join(spec.verify_rules)}"
        )
    return spec


def check_drafter(method: str, drafter: DominoDrafter | None) -> DominoDrafter | None:
    """Refuse a missing drafter, or a plain DFlash drafter (no head) for a method that needs the head."""
    spec = method_spec(method)
    if spec.needs_drafter and drafter is None:
        raise ValueError(f"method {method!r} needs a drafter")
    if spec.needs_head and drafter.head is None:
        raise ValueError(f"method {method!r} needs a drafter with a Domino head; this is a plain DFlash drafter")
    return drafter
