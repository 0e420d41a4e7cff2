"""Refuse configuration keys that no part of the program reads, before Hydra runs a command.

Hydra answers an override of a key its config does not have with a multi-line message suggesting
`+key=value`, and then takes that form silently: a misspelt knob (`+train.lrr=1`) changes nothing.
`refuse_unknown_keys` composes the command's config twice, once with the command line's config-group
choices alone (what the config files define) and once with every override applied as well, and ends the
command with one line naming each key the overrides added and the closest key the files define.

An added key is read, and kept, where it is a keyword of the object its `_target_` node instantiates
(any `lightning.Trainer` argument under `trainer`, `skip` under a `LocalFiles` source), and so is an
added node that names its own `_target_` (a further callback). Hydra's own `hydra.*` settings are Hydra's.
When the command line cannot be composed for another reason, nothing is said here: Hydra reports it.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import inspect
import os
from collections.abc import Iterator, Sequence
from typing import Any

from hydra import compose, initialize_config_dir
from hydra._internal.utils import get_args_parser
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.utils import get_object
from omegaconf import OmegaConf

INSTANTIATE_KEYS = frozenset({"_target_", "_partial_", "_recursive_", "_convert_", "_args_"})
_NOT_COMMANDS = ("help", "hydra_help", "info", "shell_completion", "experimental_rerun")
_MAX_LISTED = 20  # siblings named after a suggestion (a node with more keys lists none)


@functools.cache
def _keywords(target: str) -> frozenset[str] | None:
    """The keywords `target` takes; None when any keyword goes (`**kwargs`) or it cannot be inspected."""
    try:
        parameters = inspect.signature(get_object(target)).parameters.values()
    except Exception:  # not importable here, or no signature: instantiation will say what is wrong
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters if p.kind is not p.VAR_POSITIONAL)


def _reads(target: Any, key: str) -> bool:
    if key in INSTANTIATE_KEYS:
        return True
    if not isinstance(target, str):
        return False
    keywords = _keywords(target)
    return keywords is None or key in keywords


def added_keys(applied: dict[str, Any], reference: dict[str, Any], path: str = "") -> Iterator[str]:
    """Dotted paths of the keys in `applied` that `reference` lacks and no `_target_` node takes."""
    for key, value in applied.items():
        dotted = f"{path}.{key}" if path else str(key)
        if key in reference:
            if isinstance(value, dict) and isinstance(reference[key], dict):
                yield from added_keys(value, reference[key], dotted)
        elif isinstance(value, dict) and "_target_" in value:  # an added node that instantiates itself
            yield from added_keys(value, {k: value[k] for k in value if _reads(value["_target_"], k)}, dotted)
        elif not _reads(applied.get("_target_"), key):
            yield dotted


def _paths(node: dict[str, Any], path: str = "") -> Iterator[str]:
    for key, value in node.items():
        dotted = f"{path}.{key}" if path else str(key)
        yield dotted
        if isinstance(value, dict):
            yield from _paths(value, dotted)


def describe_unknown(key: str, reference: dict[str, Any]) -> str:
    """`'train.lrr' (did you mean 'train.lr'? train has: ...)`: the key, the closest known key (a sibling
    first), and the known keys beside it when there are few."""
    parent = key.rpartition(".")[0]
    node: Any = reference
    for part in parent.split(".") if parent else []:
        node = node.get(part) if isinstance(node, dict) else None
    siblings = [k for k in node if k not in INSTANTIATE_KEYS] if isinstance(node, dict) else []
    if isinstance(node, dict) and isinstance(node.get("_target_"), str):  # and the keywords its object takes
        siblings += sorted((_keywords(node["_target_"]) or frozenset()) - {*siblings, "self"})
    ancestors = {key.rsplit(".", n)[0] for n in range(1, key.count(".") + 1)}
    others = [p for p in _paths(reference) if p not in ancestors and p.rpartition(".")[2] not in INSTANTIATE_KEYS]
    near = [f"{parent}.{k}" if parent else k for k in siblings]
    closest = (
        difflib.get_close_matches(key, near, n=1, cutoff=0.6)
        or difflib.get_close_matches(key, others, n=1, cutoff=0.6)
        or difflib.get_close_matches(key, near or others, n=1, cutoff=0.0)
    )
    hints = [f"did you mean {closest[0]!r}?"] if closest else []
    if parent and 0 < len(siblings) <= _MAX_LISTED:
        hints.append(f"{parent} has: {', '.join(map(str, siblings))}")
    return f"{key!r}" + (f" ({' '.join(hints)})" if hints else "")


def _one_job(override: Override, prefix: str | None = None) -> str:
    """The override as one job of a sweep sees it (its first value, which has every key the others have);
    `prefix="++"` makes a value override add or change its key, never refused for a missing one."""
    key, value = override.input_line.split("=", 1) if "=" in override.input_line else (override.input_line, "")
    if override.is_sweep_override():
        value = next(iter(override.sweep_string_iterator()))
    if prefix is not None and not override.is_delete():
        key = prefix + override.key_or_group
    return f"{key}={value}" if "=" in override.input_line else key


def unknown_keys(
    conf_dir: str, config_name: str, overrides: Sequence[str], config_dir: str | None = None
) -> str | None:
    """What `describe_unknown` says of each key `overrides` add to `config_name` that nothing reads, joined
    by `; `; None when there is none, or when the config does not compose for another reason."""
    try:
        parsed = [o for o in OverridesParser.create().parse_overrides(list(overrides)) if not o.is_hydra_override()]
    except Exception:  # a syntax error: Hydra's own message is the right one
        return None
    extra = [f"hydra.searchpath=[file://{os.path.abspath(config_dir)}]"] if config_dir else []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
            repository = GlobalHydra.instance().config_loader().repository  # type: ignore[attr-defined]
            groups = [o for o in parsed if repository.group_exists(o.key_or_group) or "/" in o.key_or_group]
            choices = [_one_job(o) for o in groups]
            values = [_one_job(o, prefix="++") for o in parsed if o not in groups]
            reference = compose(config_name, overrides=[*extra, *choices])
            applied = compose(config_name, overrides=[*extra, *choices, *values])
    except Exception:  # a missing group option, a bad value, ...: Hydra reports it when it composes
        return None
    finally:
        GlobalHydra.instance().clear()
    known = OmegaConf.to_container(reference, resolve=False)
    found = list(added_keys(OmegaConf.to_container(applied, resolve=False), known))
    return "; ".join(describe_unknown(k, known) for k in found) or None


def hydra_command(argv: Sequence[str]) -> argparse.Namespace | None:
    """Hydra's reading of a command line `argv` (overrides, --config-dir, ...); None when it runs no task
    (--help, --version, ...) or its flags do not parse (Hydra explains its own flags)."""
    parser = get_args_parser()
    parser.exit_on_error = False
    if "--version" in argv:
        return None
    try:
        args, _ = parser.parse_known_args(list(argv))
    except (argparse.ArgumentError, SystemExit):
        return None
    return None if any(getattr(args, flag, None) for flag in _NOT_COMMANDS) else args


def refuse_unknown_keys(prog: str, conf_dir: str, config_name: str, argv: Sequence[str]) -> None:
    """Exit with one line when the command line `argv` adds a key that no part of `prog` reads."""
    args = hydra_command(argv)
    if args is None:
        return
    found = unknown_keys(conf_dir, args.config_name or config_name, args.overrides, args.config_dir)
    if found:
        many = ";" in found
        raise SystemExit(
            f"{prog}: error: unknown config key{'s' if many else ''} {found}: no part of {prog} reads "
            f"{'them' if many else 'it'}"
        )
