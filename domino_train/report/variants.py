"""Group runs into variants (same recipe, any seed) and name each by what sets it apart from the others."""

from __future__ import annotations

import json
from dataclasses import dataclass

from domino_train.report.records import RunRecord
from domino_train.run.variant import variant_config

_MAX_LABEL_KEYS = 3


@dataclass
class Variant:
    """Runs of one recipe (seeds), and the label the report shows for it."""

    label: str
    runs: list[RunRecord]
    recipe: dict


def _fmt(value: object) -> str:
    return "null" if value is None else json.dumps(value) if isinstance(value, list | dict) else str(value)


def group_variants(runs: list[RunRecord]) -> list[Variant]:
    """Variants in first-seen order. Labels: the task name, plus the recipe keys whose values differ between
    variants of that task (e.g. `tiny (drafter.head=null)`)."""
    groups: dict[str, Variant] = {}
    for run in runs:
        recipe = variant_config(run.config)
        key = json.dumps(recipe, sort_keys=True, default=str)
        groups.setdefault(key, Variant("", [], recipe)).runs.append(run)
    variants = list(groups.values())
    for v in variants:
        task = str(v.recipe.get("task_name", "run"))
        peers = [o.recipe for o in variants if o.recipe.get("task_name") == v.recipe.get("task_name")]
        differing = sorted(k for k in v.recipe if k != "task_name" and len({_fmt(p.get(k)) for p in peers}) > 1)
        shown = [f"{k}={_fmt(v.recipe[k])}" for k in differing[:_MAX_LABEL_KEYS]]
        if len(differing) > _MAX_LABEL_KEYS:
            shown.append(f"+{len(differing) - _MAX_LABEL_KEYS} more")
        v.label = f"{task} ({', '.join(shown)})" if shown else task
    return variants
