import pytest
import torch

from inference import generate
from inference.decoding import (
    DECODING_METHODS,
    VERIFY_RULES,
    ChainDecoder,
    DecodeOptions,
    TreeDecoder,
    TreeOptions,
    build_decoder,
)
from inference.decoding.tree.verify import TREE_VERIFY_RULES


def test_generate_from_a_chat_prompt(qwen_target, trained_drafter):
    drafter, _ = trained_drafter(qwen_target)
    out = generate(qwen_target, "Hello there", drafter, max_new_tokens=12)  # domino: the drafter has a head
    ar = generate(qwen_target, [{"role": "user", "content": "Hello there"}], max_new_tokens=12)
    assert out.tokens == ar.tokens and out.text == ar.text == qwen_target.tokenizer.decode(ar.tokens)
    assert out.stats.prompt_tokens == len(qwen_target.chat_ids([{"role": "user", "content": "Hello there"}]))


def test_seeded_sampling_is_reproducible(qwen_target, trained_drafter):
    drafter, _ = trained_drafter(qwen_target)
    kwargs = dict(drafter=drafter, max_new_tokens=16, temperature=1.0, top_k=20, verify="rejection")
    a, b = (generate(qwen_target, [5, 6, 7], seed=3, **kwargs) for _ in range(2))
    assert a.tokens == b.tokens and a.stats.accept_lengths == b.stats.accept_lengths


def test_stats_of_a_speculative_generation(qwen_target, trained_drafter):
    drafter, seqs = trained_drafter(qwen_target)
    out = build_decoder("domino", qwen_target, drafter, DecodeOptions(stop_token_ids=[])).generate(seqs[0, :9], 30)
    s = out.stats
    assert s.output_tokens == 30 and sum(s.accept_lengths) == 29 and s.rounds == len(s.accept_lengths)
    assert s.tau == 29 / s.rounds and s.tau > 2  # the trained drafter is accepted
    assert min(s.prefill_s, s.decode_s, s.draft_s, s.verify_s, s.commit_s) > 0
    assert s.draft_s + s.verify_s + s.commit_s <= s.decode_s
    one = build_decoder("domino", qwen_target, drafter).generate(seqs[0, :9], 1)
    assert len(one.tokens) == 1 and one.stats.tau is None and one.stats.rounds == 0


def test_bad_requests(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target)
    with pytest.raises(ValueError, match=", ".join(DECODING_METHODS)):
        build_decoder("medusa", qwen_target, drafter)
    with pytest.raises(ValueError, match="match, rejection"):
        build_decoder("domino", qwen_target, drafter, DecodeOptions(verify="typical"))
    with pytest.raises(ValueError, match="needs a drafter"):
        build_decoder("dflash", qwen_target)
    with pytest.raises(ValueError, match="Domino head"):
        build_decoder("domino", qwen_target, make_drafter(qwen_target, head=None))
    with pytest.raises(ValueError, match="from_pretrained"):
        build_decoder("dflash", qwen_target, make_drafter(qwen_target).to(torch.float64))
    with pytest.raises(ValueError, match="max_new_tokens"):
        build_decoder("ar", qwen_target).generate([1, 2], 0)


def test_the_method_table_names_each_methods_family_rules_and_baselines():
    families = {m: spec.family for m, spec in DECODING_METHODS.items()}
    assert families == {"ar": "ar", "dflash": "chain", "domino": "chain", "ddtree": "tree", "dominotree": "tree"}
    assert {m for m, spec in DECODING_METHODS.items() if spec.baseline} == {"dflash", "ddtree"}
    assert {m for m, spec in DECODING_METHODS.items() if spec.needs_head} == {"domino", "dominotree"}
    assert [m for m, spec in DECODING_METHODS.items() if not spec.needs_drafter] == ["ar"]
    for spec in DECODING_METHODS.values():
        assert spec.verify_rules == (TREE_VERIFY_RULES if spec.family == "tree" else VERIFY_RULES)


def test_options_are_checked_when_built_before_any_model():
    with pytest.raises(ValueError, match="cuda_graph must be one of"):
        DecodeOptions(cuda_graph="sometimes")
    with pytest.raises(ValueError, match="max_context must be >= 1"):
        DecodeOptions(max_context=0)
    with pytest.raises(ValueError, match="draft_gate must be true or false"):
        DecodeOptions(draft_gate="off")
    with pytest.raises(TypeError, match="SamplingParams"):
        DecodeOptions(sampling=0.7)
    for bad, message in [({"budget": 0}, "budget"), ({"top_m": -1}, "top_m"), ({"node_topk": 0}, "node_topk")]:
        with pytest.raises(ValueError, match=message):
            TreeOptions(**bad)
    assert DecodeOptions(stop_token_ids=[3, 3, 7]).stop_token_ids == frozenset({3, 7})


def test_decoders_refuse_a_method_of_another_family(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target)
    with pytest.raises(ValueError, match="unknown chain decoding method 'ddtree'; choose from dflash, domino"):
        ChainDecoder(qwen_target, drafter, "ddtree")
    with pytest.raises(ValueError, match="unknown tree decoding method 'domino'; choose from ddtree, dominotree"):
        TreeDecoder(qwen_target, drafter, "domino")
