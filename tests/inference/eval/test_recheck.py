"""A flag of clause (c) decoded again in a finer precision (fp32 tiny target): a correct tree is cleared as
rounding, a tree whose nodes see a sibling stays algorithmic, at batch 1 and in a batch, whether or not its
wrong logits flip an argmax there (the audit of every output's logits), and only flags of (c) alone are
rechecked."""

import pytest
from omegaconf import OmegaConf

from inference import DominoDrafter
from inference.decoding import build_decoder
from inference.decoding.options import DecodeOptions, TreeOptions
from inference.decoding.stats import GenerationStats
from inference.decoding.tree.decoder import TreeDecoder
from inference.eval.divergence import ALGORITHMIC, EXACT, NUMERICAL
from inference.eval.evaluate import precision_recheck
from inference.eval.loop import check_divergences
from inference.eval.planted_bugs import sibling_seeing_windows
from inference.eval.recheck import PrecisionRecheck, needs_recheck
from inference.eval.records import Record
from inference.eval.results import summarize
from inference.targets.engine import install_engine
from inference.targets.tiny import tiny_target

FLAG = {"kind": ALGORITHMIC, "reason": "(c) the verify logits are 0.81 from ar's, beyond rounding (0.75)"}


def _flagged(method: str, concurrency: int = 1, violations: int = 0, reason: str = FLAG["reason"]) -> Record:
    """A record as a coarser run left it: flagged by the given clause."""
    stats = GenerationStats(prompt_tokens=5, own_argmax_violations=violations)
    divergence = FLAG | {"reason": reason}
    return Record("set", method, "p", 0, [1, 2], "length", stats, divergence=divergence, concurrency=concurrency)


def test_only_a_flag_of_clause_c_alone_is_rechecked():
    assert needs_recheck(_flagged("dominotree"))
    assert not needs_recheck(_flagged("dominotree", reason="(a) the method's token is not the argmax"))
    assert not needs_recheck(_flagged("dominotree", reason="one output ended while the other went on"))
    assert not needs_recheck(_flagged("dominotree", violations=1))  # an own-argmax violation is a bug in any precision
    assert not needs_recheck(Record("set", "ddtree", "p", 0, [1], "length", GenerationStats(5), divergence=None))


def _decoders(target, drafter):
    options = DecodeOptions(stop_token_ids=[])
    ar = build_decoder("ar", target, options=options)
    return {"ar": ar, "dominotree": build_decoder("dominotree", target, drafter, options, TreeOptions(budget=16))}


def _lean(target, drafter):
    """The tiny target on the lean engine (batched decoding needs it), the drafter bound to it."""
    lean = install_engine(tiny_target(target.name.removeprefix("tiny-")), engine="lean", prepack=False)
    copy = DominoDrafter(drafter.config)
    copy.load_state_dict(drafter.state_dict())
    return lean, copy.bind_target(lean.embed_tokens, lean.lm_head)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_correct_tree_is_cleared_and_a_tree_mask_bug_is_not(qwen_target, trained_drafter, monkeypatch, concurrency):
    drafter, seqs = trained_drafter(qwen_target)
    target, drafter = (qwen_target, drafter) if concurrency == 1 else _lean(qwen_target, drafter)
    decoders = _decoders(target, drafter)
    built = []
    recheck = PrecisionRecheck(lambda: built.append(1) or decoders, "float32", 30)
    prompts = [seqs[row, : 5 + 3 * row].tolist() for row in range(len(seqs))]
    assert not built  # nothing loads before a flag

    correct = _flagged("dominotree", concurrency)
    recheck(correct, prompts, 1)
    again = correct.divergence["recheck"]
    assert again["kind"] == EXACT and correct.divergence["kind"] == NUMERICAL
    assert "decoded again in float32: exact" in correct.divergence["reason"] and built == [1]
    assert again["audit"]["outputs"] == 30 and again["audit"]["distance"] <= again["audit"]["allowed"] < 1e-3

    monkeypatch.setattr(TreeDecoder, "verify_window", sibling_seeing_windows(TreeDecoder.verify_window))
    ar, tree = decoders["ar"], decoders["dominotree"]
    differs = [ar.generate(p, 30).tokens != tree.generate(p, 30).tokens for p in prompts]
    assert any(differs) and not all(differs)  # the bug flips an argmax on some prompts only
    for i in (differs.index(True), differs.index(False)):
        buggy = _flagged("dominotree", concurrency)
        recheck(buggy, prompts, i)
        again = buggy.divergence["recheck"]
        assert again["kind"] == ALGORITHMIC and buggy.divergence["kind"] == ALGORITHMIC, again
        assert again["audit"]["distance"] > 100 * again["audit"]["allowed"], again  # wrong logits, flipped or not
    assert built == [1]  # loaded once


def test_the_check_rechecks_its_flags_of_clause_c_and_reports_them(qwen_target, trained_drafter, monkeypatch):
    """The tree-mask bug planted in the run and so in the recheck's decoders (the same code): every flag
    is rechecked, none is cleared, and the summary says so."""
    drafter, seqs = trained_drafter(qwen_target)
    monkeypatch.setattr(TreeDecoder, "verify_window", sibling_seeing_windows(TreeDecoder.verify_window))
    decoders = _decoders(qwen_target, drafter)
    recheck = PrecisionRecheck(lambda: decoders, "float32", 30)
    records = []
    for row in range(len(seqs)):
        ids = seqs[row, : 5 + 3 * row].tolist()
        mine = []
        for method, decoder in decoders.items():
            gen = decoder.generate(ids, 30)
            mine.append(Record("set", method, f"p{row}", 0, gen.tokens, gen.finish_reason, gen.stats))
        check_divergences(mine, {0: ids}, decoders, 30, 8, recheck=lambda r, ids=ids: recheck(r, [ids]))
        records += mine
    flagged = [r for r in records if r.divergence]
    assert flagged and all(r.divergence["recheck"]["kind"] == ALGORITHMIC for r in flagged)
    s = summarize(records, check_lossless=True)["set"]["dominotree"]
    assert s["lossless"] is False and s["rechecked"] == {"dtype": "float32", "generations": len(flagged), "cleared": 0}


def test_the_recheck_is_off_in_the_run_s_own_precision_or_when_unset():
    cfg = OmegaConf.create({"lossless_recheck": "float32", "max_new_tokens": 8, "target": {"dtype": "bfloat16"}})
    assert precision_recheck(cfg, ["ar"], {}, None, "float32") is None
    assert precision_recheck(cfg, ["ar"], {}, None, "bfloat16").dtype == "float32"
    cfg.lossless_recheck = None
    assert precision_recheck(cfg, ["ar"], {}, None, "bfloat16") is None
