"""The drafter's weight names: one table between the public checkpoints' flat keys and the module's paths.

Public drafters (`*-DFlash-b16`, `*-Domino-b16`) name the backbone's weights `layers.{i}...`, `fc.weight`,
`hidden_norm.weight`, `norm.weight` and the head's `prefix_gru...`, `embed_proj...`; `DominoDrafter` holds
them under `backbone.` and `head.`, and the draft vocabulary's `d2t` / `t2d` at its top level. `PUBLIC_TO_MODULE`
says it once, by prefix, and `to_public` / `to_module` read it in either direction (as torchtitan's state-dict
adapters do). Other spellings met in the wild are read, never written: `READ_ALIASES`.
"""

from __future__ import annotations

# public key prefix -> module path prefix; a key belongs to the one entry whose prefix it starts with
PUBLIC_TO_MODULE = {
    "layers.": "backbone.layers.",
    "fc.": "backbone.fc.",
    "hidden_norm.": "backbone.hidden_norm.",
    "norm.": "backbone.norm.",
    "prefix_gru.": "head.prefix_gru.",
    "embed_proj.": "head.embed_proj.",
    "d2t": "d2t",
    "t2d": "t2d",
}
MODULE_TO_PUBLIC = {module: public for public, module in PUBLIC_TO_MODULE.items()}
HEAD_PREFIXES = tuple(p for p, m in PUBLIC_TO_MODULE.items() if m.startswith("head."))

# SGLang's optional `model.` prefix on every key, and early SpecForge Domino checkpoints' `logit_head.` head
OPTIONAL_PREFIX = "model."
READ_ALIASES = {"logit_head." + p: p for p in HEAD_PREFIXES}


def _rename(name: str, table: dict[str, str]) -> str | None:
    for old, new in table.items():
        if name.startswith(old):
            return new + name[len(old) :]
    return None


def to_public(module_path: str) -> str:
    """The public key of a drafter state-dict entry (AssertionError for a parameter the table lacks)."""
    key = _rename(module_path, MODULE_TO_PUBLIC)
    if key is None:
        raise AssertionError(f"unexpected drafter parameter {module_path!r}")
    return key


def to_module(public_key: str) -> str | None:
    """The state-dict path of a public key (in `canonical_key`'s spelling); None for a key no drafter has."""
    return _rename(public_key, PUBLIC_TO_MODULE)


def canonical_key(key: str) -> str:
    """A weight name as the table spells it: the optional `model.` prefix dropped, read aliases resolved."""
    key = key.removeprefix(OPTIONAL_PREFIX)
    return _rename(key, READ_ALIASES) or key
