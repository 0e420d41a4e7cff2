"""Which serving stacks can load a drafter: one golden case per rule of each stack, the line and the model
card section built from them, and the rewrite of an existing card's section."""

import json
from pathlib import Path

import pytest
import torch

from inference import DrafterConfig, tiny_target
from inference.drafter.serving import STACKS, serving_line, serving_section, serving_verdicts, with_serving_section

PRETRAINED = Path(__file__).resolve().parents[3] / "pretrained"


def _config_json(head: str | None = "domino", dtype: torch.dtype = torch.bfloat16) -> dict:
    """A tiny drafter's config.json that every stack loads (but vLLM a Domino head)."""
    config = DrafterConfig.from_target_config(
        tiny_target().config, 2, 4, head, mask_token_id=3, pure_draft_prefix_len=1
    )
    return config.to_hf_dict(dtype)


def _verdicts(d: dict) -> dict[str, str | None]:
    """Stack -> None when it loads `d`, else what its first broken rule needs."""
    return {stack.name: None if broken is None else broken[0].needs for stack, broken in serving_verdicts(d)}


def _with(d: dict, **changes) -> dict:
    """`d` with `changes` made where the export writes them: at the top level or in dflash_config."""
    top = {k: v for k, v in changes.items() if k in d}
    dflash = {k: v for k, v in changes.items() if k not in d}
    return {**d, **top, "dflash_config": {**d["dflash_config"], **dflash}}


OURS, SGLANG, VLLM, SPECFORGE = (stack.name for stack in STACKS)


def test_a_plain_dflash_drafter_on_the_full_vocabulary_loads_everywhere():
    assert _verdicts(_config_json(head=None)) == {OURS: None, SGLANG: None, VLLM: None, SPECFORGE: None}
    assert _verdicts(_config_json(head=None, dtype=torch.float16)) == dict.fromkeys((OURS, SGLANG, VLLM, SPECFORGE))


def test_a_domino_drafter_that_sglang_accepts():
    assert _verdicts(_config_json()) == {OURS: None, SGLANG: None, VLLM: "no Domino head", SPECFORGE: None}


@pytest.mark.parametrize(
    ("change", "stack", "needs", "found"),
    [
        (dict(pure_draft_prefix_len=0), SGLANG, "pure_draft_prefix_len == 1", "pure_draft_prefix_len 0"),
        (dict(pure_draft_prefix_len=2), SGLANG, "pure_draft_prefix_len == 1", "pure_draft_prefix_len 2"),
        (dict(shift_label="true"), SGLANG, "a boolean shift_label", "shift_label 'true'"),
        (dict(block_size=1), SGLANG, "block_size > 1", "block_size 1"),
        (dict(projector_type="causal_v5"), SPECFORGE, "projector_type dflash, domino or dspark", "'causal_v5'"),
    ],
)
def test_each_dflash_config_rule(change, stack, needs, found):
    d = _with(_config_json(), **change)
    verdicts = dict(serving_verdicts(d))
    rule, what = next(broken for s, broken in verdicts.items() if s.name == stack)
    assert rule.needs == needs and found in what
    assert stack in serving_line(d) and f"{stack} no, needs {needs} (this drafter has " in serving_line(d)


def test_sglang_domino_needs_bf16_weights_and_dflash_does_not():
    assert _verdicts(_config_json(dtype=torch.float16))[SGLANG] == "bf16 weights"
    assert _verdicts(_config_json(dtype=torch.float32))[SGLANG] == "bf16 weights"
    assert _verdicts(_config_json(head=None, dtype=torch.float32))[SGLANG] is None


def test_a_draft_vocabulary_is_read_by_this_project_and_vllm_only():
    for head in ("domino", None):
        d = {**_config_json(head=head), "draft_vocab_size": 64}
        verdicts = _verdicts(d)
        assert verdicts[OURS] is None and verdicts[SPECFORGE] == "the target's vocabulary"
        assert verdicts[SGLANG] == "the target's vocabulary"
    assert _verdicts({**_config_json(head=None), "draft_vocab_size": 64})[VLLM] is None
    full = _config_json(head=None)
    assert _verdicts({**full, "draft_vocab_size": full["vocab_size"]})[SGLANG] is None  # equal = the full vocabulary


def test_this_project_names_why_it_cannot_parse_a_config():
    d = _with(_config_json(), projector_type="dspark")
    assert _verdicts(d)[OURS] == "a config.json this project parses"
    assert "unsupported dflash_config.projector_type 'dspark'" in serving_line(d)


def test_the_reference_drafters_are_served_by_this_project_and_where_the_rules_allow():
    domino = json.loads((PRETRAINED / "smollm2-135m-domino" / "config.json").read_text())
    dflash = json.loads((PRETRAINED / "smollm2-135m-dflash" / "config.json").read_text())
    assert _verdicts(domino) == {
        OURS: None,
        SGLANG: "pure_draft_prefix_len == 1",
        VLLM: "no Domino head",
        SPECFORGE: "the target's vocabulary",
    }
    assert _verdicts(dflash) == {
        OURS: None,
        SGLANG: "the target's vocabulary",
        VLLM: None,
        SPECFORGE: "the target's vocabulary",
    }


def test_the_section_replaces_its_old_self_or_goes_before_use():
    d = _config_json()
    section = "\n".join(serving_section(d))
    card = "# Card\n\n## Held-out decoding\nrows\n\n## Use\n    domino-decode ...\n"
    once = with_serving_section(card, d)
    assert once == f"# Card\n\n## Held-out decoding\nrows\n\n{section}\n\n## Use\n    domino-decode ...\n"
    assert with_serving_section(once, d) == once
    other = with_serving_section(once, _config_json(head=None))
    assert other == with_serving_section(card, _config_json(head=None)) and "| vLLM | yes |  |" in other
    assert with_serving_section("# Card\nno sections\n", d) == f"# Card\nno sections\n\n{section}\n\n"
