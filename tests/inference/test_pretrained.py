"""The reference drafters shipped under pretrained/: they load against the real SmolLM2 target, stay
small, carry their model card, and decode a held-out prompt as the target alone does: token for token in
fp32, and in bf16 (the default on this CPU) parting from it, if at all, only at a numerical tie."""

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from inference import DominoDrafter, load_target
from inference.decoding import build_decoder, prompt_ids
from inference.drafter.serving import serving_section, with_serving_section
from inference.eval.divergence import measure_divergence, measure_noise

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


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_drafter_decodes_losslessly(smollm2, name):
    drafter = DominoDrafter.from_pretrained(PRETRAINED / name, target=smollm2, dtype=smollm2.dtype)
    assert drafter.vocab.is_subset and (drafter.head is not None) == ("domino" in name)
    prompt = prompt_ids(smollm2, PROMPT)
    expected = build_decoder("ar", smollm2).generate(prompt, 48).tokens
    floor = measure_noise(smollm2, prompt, expected, 17)  # the widest window: a budget-16 tree
    for method in SHIPPED[name]:
        out = build_decoder(method, smollm2, drafter).generate(prompt, 48)
        if smollm2.dtype == torch.float32:
            assert out.tokens == expected, method
        else:
            found = measure_divergence(smollm2, prompt, expected, out.tokens)
            assert found is None or (found.gap is not None and found.gap <= floor), (method, found, floor)
        assert out.stats.tau > 1.0, f"{method} accepted no draft token on a held-out prompt"
