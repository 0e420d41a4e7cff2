"""Draft vocabulary (FR-Spec / EAGLE-3 `d2t` / `t2d`): the drafter's logits cover N target ids only, and
every decoding method stays lossless (T = 0) and exact (T > 0) because verification is over the full
vocabulary: a draft distribution over the subset is one over the full vocabulary with zeros outside."""

import dataclasses
import json

import pytest
import torch

from inference import DominoDrafter, DrafterCheckpointError
from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.sampling import SamplingParams
from inference.drafter.draft_vocab import DraftVocab


def _subset_drafter(trained: DominoDrafter, target, ids: torch.Tensor) -> DominoDrafter:
    """`trained` restricted to the target ids `ids`: same backbone and GRU, W2 rows of those ids."""
    cfg = dataclasses.replace(trained.config, draft_vocab_size=len(ids))
    sub = DominoDrafter(cfg).bind_target(target.embed_tokens, target.lm_head)
    sub.vocab.set_ids(ids)
    state = {k: v for k, v in trained.state_dict().items() if k != "head.embed_proj.2.weight"}
    state["head.embed_proj.2.weight"] = trained.head.embed_proj[2].weight[sub.vocab.draft_to_target()]
    state["d2t"], state["t2d"] = sub.d2t.clone(), sub.t2d.clone()
    sub.load_state_dict(state)
    return sub.eval().requires_grad_(False)


@pytest.fixture
def subset(qwen_target, trained_drafter):
    """A trained block-8 drafter over the 96 ids that its training sequences use most (+ fillers)."""
    trained, seqs = trained_drafter(qwen_target)
    counts = torch.bincount(seqs.flatten(), minlength=qwen_target.config.vocab_size)
    ids = counts.argsort(descending=True)[:96]
    return _subset_drafter(trained, qwen_target, ids), seqs


def test_the_maps_are_eagle3s_and_invert_each_other(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target, draft_vocab_size=5)
    drafter.vocab.set_ids(torch.tensor([40, 3, 7, 100, 9]))
    assert drafter.vocab.draft_to_target().tolist() == [3, 7, 9, 40, 100]  # sorted: d2t offsets are >= 0
    assert drafter.d2t.tolist() == [3, 6, 7, 37, 96] and int(drafter.t2d.sum()) == 5 and drafter.t2d[40]
    draft, inside = drafter.vocab.to_draft_ids(torch.tensor([9, 8, 100]))
    assert draft.tolist()[0::2] == [2, 4] and inside.tolist() == [True, False, True]
    assert drafter.vocab.to_target_ids(torch.tensor([2, 4])).tolist() == [9, 100]
    q = torch.softmax(torch.randn(2, 5), -1)
    full = drafter.vocab.full_vocab_probs(q)
    assert full.shape == (2, qwen_target.config.vocab_size) and torch.allclose(full.sum(-1), torch.ones(2))
    assert torch.equal(full[:, [3, 7, 9, 40, 100]], q) and full[:, 8].eq(0).all()
    with pytest.raises(ValueError, match="5 distinct ids"):
        drafter.vocab.set_ids(torch.tensor([1, 1, 2, 3, 4]))


def test_logits_are_the_lm_head_rows_of_the_subset(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target, draft_vocab_size=32)
    ids = torch.randperm(qwen_target.config.vocab_size, generator=torch.Generator().manual_seed(0))[:32]
    drafter.vocab.set_ids(ids)
    h = torch.randn(3, 2, qwen_target.config.hidden_size)
    full = qwen_target.lm_head(h)
    torch.testing.assert_close(drafter.lm_head(h), full[..., drafter.vocab.draft_to_target()])
    assert drafter.head.embed_proj[2].weight.shape[0] == 32


@pytest.mark.parametrize("method", ["dflash", "domino", "ddtree", "dominotree"])
def test_greedy_decoding_with_a_draft_vocabulary_is_lossless(qwen_target, subset, method):
    drafter, seqs = subset
    for row in (0, 3):
        prompt = seqs[row, :9]
        expected = build_decoder("ar", qwen_target, options=DecodeOptions(stop_token_ids=[])).generate(prompt, 40)
        out = build_decoder(method, qwen_target, drafter, DecodeOptions(stop_token_ids=[])).generate(prompt, 40)
        assert out.tokens == expected.tokens
        assert out.stats.tau > 1.5  # the restricted drafter still drafts the sequences it learnt


def test_drafts_outside_the_subset_are_never_proposed(qwen_target, subset):
    drafter, seqs = subset
    allowed = set(drafter.vocab.draft_to_target().tolist())
    decoder = build_decoder("domino", qwen_target, drafter, DecodeOptions(stop_token_ids=[]))
    state_tokens = []
    original = decoder.draft

    def spy(state):
        draft = original(state)
        state_tokens.extend(draft.tokens.tolist())
        return draft

    decoder.draft = spy
    decoder.generate(torch.randint(0, 256, (12,), generator=torch.Generator().manual_seed(5)), 30)
    assert state_tokens and set(state_tokens) <= allowed


@pytest.mark.parametrize(
    ("method", "verify", "tree"),
    [("domino", "rejection", None), ("dflash", "match", None), ("dominotree", "residual", TreeOptions(budget=4))],
)
def test_sampling_with_a_draft_vocabulary_is_exact(
    qwen_target, subset, with_block_size, method, verify, tree, chi_square_pvalue, exact_joint, sample_counts
):
    drafter, seqs = subset
    drafter = with_block_size(drafter, qwen_target, 3)
    params = SamplingParams(temperature=1.0, top_k=3)
    prompt = seqs[0, :9]
    decoder = build_decoder(method, qwen_target, drafter, DecodeOptions(params, verify, stop_token_ids=[]), tree)
    counts, lengths = sample_counts(decoder, prompt, 300)
    assert chi_square_pvalue(counts, exact_joint(qwen_target, prompt, params)) > 1e-3
    assert max(lengths) >= 2


def test_checkpoint_carries_and_validates_the_maps(qwen_target, subset, tmp_path):
    drafter, _ = subset
    drafter.save_pretrained(tmp_path / "d")
    config = json.loads((tmp_path / "d" / "config.json").read_text())
    assert config["draft_vocab_size"] == 96
    loaded = DominoDrafter.from_pretrained(tmp_path / "d", target=qwen_target, dtype=torch.float32)
    assert torch.equal(loaded.d2t, drafter.d2t) and loaded.d2t.dtype == torch.int64 and loaded.t2d.dtype == torch.bool
    h = torch.randn(2, qwen_target.config.hidden_size)
    assert torch.equal(loaded.lm_head(h).argmax(-1), drafter.lm_head(h).argmax(-1))
    # A map that points two draft ids at one target id is refused at load time.
    from safetensors.torch import load_file, save_file

    tensors = load_file(tmp_path / "d" / "model.safetensors")
    tensors["d2t"][1] = tensors["d2t"][0] - 1
    save_file(tensors, tmp_path / "d" / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(DrafterCheckpointError, match="same target id"):
        DominoDrafter.from_pretrained(tmp_path / "d", target=qwen_target)


def test_full_vocabulary_checkpoints_keep_the_public_layout(qwen_target, make_drafter, tmp_path):
    make_drafter(qwen_target).save_pretrained(tmp_path / "d")
    assert "draft_vocab_size" not in json.loads((tmp_path / "d" / "config.json").read_text())
    from safetensors import safe_open

    with safe_open(str(tmp_path / "d" / "model.safetensors"), framework="pt") as f:
        assert not {"d2t", "t2d"} & set(f.keys())


def test_without_a_subset_every_map_is_the_identity(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target)
    ids = torch.tensor([5, 0, 7])
    assert not drafter.vocab.is_subset and drafter.vocab.draft_to_target() is None
    assert drafter.vocab.to_target_ids(ids) is ids and drafter.vocab.to_draft_ids(ids)[1].all()
    assert drafter.vocab.problems() == [] and not {"d2t", "t2d"} & set(drafter.state_dict())


def test_the_choice_takes_the_most_frequent_labels_and_reports_coverage():
    vocab = DraftVocab(torch.nn.Module(), 2, 6)
    train = torch.tensor([0, 5, 1, 5, 9, 0])
    report = vocab.choose(train, torch.tensor([1, 1, 0, 0, 2, 0]))
    assert vocab.draft_to_target().tolist() == [1, 4]  # 9, then the first of the two 5s
    assert report == {
        "size": 2,
        "train_labels": 20,
        "distinct_train_labels": 4,
        "coverage_train": 0.7,
        "coverage_val": 0.75,
    }
