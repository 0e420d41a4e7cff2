"""The reference drafters shipped under pretrained/: they load against the real SmolLM2 target, stay
small, carry their model card, and decode a held-out prompt as the target alone does: token for token in
fp32, and in bf16 parting from it, if at all, only at a proven numerical tie, every committed token the
argmax of its own verify logits. Bugs planted in the acceptance rule, the tree walk and the tree mask are
caught on the same real target in both precisions."""

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from inference import DominoDrafter, load_target
from inference.decoding import build_decoder, prompt_ids, speculative
from inference.decoding.chain import verify as chain_verify
from inference.decoding.tree import verify as tree_verify
from inference.drafter.serving import serving_section, with_serving_section
from inference.eval.divergence import prove_divergence
from inference.eval.planted_bugs import accepts_within, sees_a_sibling, takes_a_close_sibling

pytestmark = pytest.mark.slow
PRETRAINED = Path(__file__).resolve().parents[2] / "pretrained"
SHIPPED = {"smollm2-135m-domino": ("domino", "dominotree"), "smollm2-135m-dflash": ("dflash", "ddtree")}
PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a short explanation."


@pytest.fixture(scope="module", params=["float32", "bfloat16"])
def smollm2(request):
    return load_target("smollm2", dtype=request.param, device="cpu")


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_drafter_is_small_bf16_and_documented(name):
    folder = PRETRAINED / name
    weights = folder / "model.safetensors"
    assert weights.stat().st_size <= 25 * 2**20, "the reference drafters must stay under 25 MB"
    with safe_open(weights, "pt") as f:
        floats = {f.get_slice(k).get_dtype() for k in f.keys() if k not in ("d2t", "t2d")}
    assert floats == {"BF16"}
    card = (folder / "README.md").read_text()
    hf_config = json.loads((folder / "config.json").read_text())
    assert "\n".join(serving_section(hf_config)) + "\n\n## Use" in card  # as `domino-export --serving-section`
    assert with_serving_section(card, hf_config) == card
    assert "## Training and validation" in card and "- val/tau_final: " in card and "- step: 12900" in card
    decoding = card.split("## Held-out decoding", 1)[1].split("\n## ", 1)[0]
    for bench in ("mt-bench", "humaneval"):  # every method, measured on 40 + 40 held-out prompts
        rows = [line for line in decoding.splitlines() if line.startswith(f"| {bench} | ")]
        cells = [row.strip("| ").split(" | ") for row in rows]  # set, method, prompts, ..., lossless
        assert [(c[1], c[2], c[-1].split(" ")[0]) for c in cells] == [
            ("ar", "40", "None"),  # the baseline itself: nothing to compare
            *((method, "40", "True") for method in ("dflash", "domino", "ddtree", "dominotree")),
        ], rows
        assert all(c[-1].endswith(" / 0)") for c in cells[1:]), rows  # exact / numerical / algorithmic: no bug


def _proof(decoder, ar, prompt, expected, out, tokens=48):
    return prove_divergence(decoder, ar, prompt, expected, out.tokens, tokens, out.stats.draft_sizes)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_drafter_decodes_losslessly(smollm2, name):
    drafter = DominoDrafter.from_pretrained(PRETRAINED / name, target=smollm2, dtype=smollm2.dtype)
    assert drafter.vocab.is_subset and (drafter.head is not None) == ("domino" in name)
    prompt = prompt_ids(smollm2, PROMPT)
    ar = build_decoder("ar", smollm2)
    expected = ar.generate(prompt, 48).tokens
    for method in SHIPPED[name]:
        decoder = build_decoder(method, smollm2, drafter)
        out = decoder.generate(prompt, 48)
        assert out.stats.own_argmax_violations == 0, method
        if smollm2.dtype == torch.float32:
            assert out.tokens == expected, method
        else:
            found = _proof(decoder, ar, prompt, expected, out)
            assert found is None or found.kind == "numerical", (method, found)
        assert out.stats.tau > 1.0, f"{method} accepted no draft token on a held-out prompt"


BUG_PROMPTS = [
    PROMPT,
    "Explain how a refrigerator keeps food cold.",
    "List three ways to save water at home, with one sentence on each.",
    "Write a short story about a lighthouse keeper.",
]
PLANTED = {  # bug -> (method, how to plant it)
    "chain accepts a runner-up within 0.5 logits": (
        "domino",
        (chain_verify.MatchVerifier, "__call__", accepts_within(0.5)),
    ),
    "tree walk takes a sibling at a close call": (
        "dominotree",
        (tree_verify.TREE_WALKS, "match", takes_a_close_sibling(0.5)),
    ),
    "tree mask shows a node its sibling": ("dominotree", (speculative, "tree_attention_mask", None)),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bugs_are_algorithmic_on_the_real_target(smollm2, bug, monkeypatch):
    method, (owner, name, planted) = PLANTED[bug]
    if planted is None:
        mask = speculative.tree_attention_mask
        planted = lambda n, v, *a: mask(n, sees_a_sibling(v), *a)  # noqa: E731
    if isinstance(owner, dict):
        monkeypatch.setitem(owner, name, planted)
    else:
        monkeypatch.setattr(owner, name, planted)
    drafter = DominoDrafter.from_pretrained(PRETRAINED / "smollm2-135m-domino", target=smollm2, dtype=smollm2.dtype)
    ar, decoder = build_decoder("ar", smollm2), build_decoder(method, smollm2, drafter)
    seen = []
    for text in BUG_PROMPTS:  # a bug shows only where it fires (a close call, a sibling on the path)
        prompt = prompt_ids(smollm2, text)
        expected, out = ar.generate(prompt, 48).tokens, decoder.generate(prompt, 48)
        found = _proof(decoder, ar, prompt, expected, out)
        seen.append((out.stats.own_argmax_violations, found))
        assert found is None or found.kind == "algorithmic", (bug, found)  # never proven a rounding tie
        if out.stats.own_argmax_violations or found is not None:
            return
    raise AssertionError(f"{bug}: never caught on {len(BUG_PROMPTS)} prompts: {seen}")
