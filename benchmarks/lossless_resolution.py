"""How finely the lossless check tells a bug from rounding on the real target, in the precision it runs in.

    python benchmarks/lossless_resolution.py                         # SmolLM2, dtype auto, 8 prompts x 64 tokens
    python benchmarks/lossless_resolution.py --dtype float32 --concurrency 1 4
    python benchmarks/lossless_resolution.py --recheck none              # without the float32 recheck

A tree mask that shows a node its sibling (`inference.eval.planted_bugs.sees_a_sibling`) computes wrong
logits from which every committed token is still their own argmax, so only the proof at a divergence can
catch it: clause (c), the distance of the method's logits from `ar`'s against what rounding gives
(`inference.eval.divergence`). DominoTree at a fixed budget decodes the script's own instructions (not
MT-Bench or HumanEval) correctly and with the bug, at batch 1 and at each concurrency, and every
divergence is proven as a run proves it (a batched row from the logits its batch captured, bounded by
batched `ar` where the plain bound fails). Per side and concurrency: the generations exact / numerical /
algorithmic, and each divergence's distance over its bound. A buggy generation classed numerical is one the
check let through; a correct one classed algorithmic is a false alarm. In fp32 there should be neither; in
bf16 the two shares are the check's resolution on this machine. Then, as a run does
(`inference.eval.recheck`), each generation flagged by (c) alone is decoded again in `--recheck`'s
precision (the bug still planted on its side) and proven there: the last column counts the classes after it.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections import Counter
from collections.abc import Iterator

from lossless_proof import INSTRUCTIONS

from inference import DominoDrafter, load_target
from inference.decoding import DecodeOptions, TreeOptions, build_decoder
from inference.decoding.batched import BatchedDecoder
from inference.decoding.tree.decoder import TreeDecoder
from inference.eval import divergence
from inference.eval.divergence import batched_ar_rows, prove_divergence
from inference.eval.planted_bugs import sibling_seeing_windows
from inference.eval.recheck import PrecisionRecheck, needs_recheck
from inference.eval.records import Record


@contextlib.contextmanager
def planted() -> Iterator[None]:
    """Every tree verify window shows each node with siblings its first sibling (`sibling_seeing_windows`)."""
    window = TreeDecoder.verify_window
    TreeDecoder.verify_window = sibling_seeing_windows(window)
    try:
        yield
    finally:
        TreeDecoder.verify_window = window


def ratio(d: divergence.Divergence) -> str:
    """A divergence's distance over its bound, starred where proven numerical ("-": no distance, e.g. one
    output ended first)."""
    if d.distance is None or not d.allowed:
        return "-"
    return f"{d.distance / d.allowed:.2f}{'*' if d.kind == divergence.NUMERICAL else ''}"


def counts(kinds: list[str]) -> str:
    """`exact / numerical / algorithmic` counts of the generations' classes."""
    seen = Counter(kinds)
    return " / ".join(str(seen[k]) for k in divergence.DIVERGENCE_CLASSES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--budget", type=int, default=8, help="DominoTree's fixed node budget")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--drafter", default="pretrained/smollm2-135m-domino")
    parser.add_argument("--recheck", default="float32", help="precision of the recheck of (c) flags; none: off")
    args = parser.parse_args()
    start = time.perf_counter()
    target = load_target("smollm2", dtype=args.dtype)
    drafter = DominoDrafter.from_pretrained(args.drafter, target=target)
    options = DecodeOptions()
    ar = build_decoder("ar", target, options=options)
    tree = build_decoder("dominotree", target, drafter, options, TreeOptions(budget=args.budget))
    prompts = [target.chat_ids([{"role": "user", "content": t}]) for t in INSTRUCTIONS[: args.prompts]]
    expected = [ar.generate(p, args.tokens).tokens for p in prompts]
    shape = f"DominoTree budget {args.budget}; {len(prompts)} prompts x {args.tokens} tokens"
    print(f"SmolLM2 in {target.precision_name}; {shape}")
    fine = args.recheck if args.recheck not in ("none", target.precision_name) else None

    def build() -> dict:
        fine_target = load_target("smollm2", dtype=fine)
        fine_drafter = DominoDrafter.from_pretrained(args.drafter, target=fine_target)
        fine_tree = build_decoder("dominotree", fine_target, fine_drafter, options, TreeOptions(budget=args.budget))
        return {"ar": build_decoder("ar", fine_target, options=options), "dominotree": fine_tree}

    recheck = PrecisionRecheck(build, fine, args.tokens) if fine else None
    last = f"after the {fine} recheck" if fine else "recheck (off)"
    print(f"| tree | concurrency | exact / numerical / algorithmic | distance / bound of each divergence | {last} |")
    print("|---|---|---|---|---|")
    for bug in (False, True):
        for level in args.concurrency:
            with planted() if bug else contextlib.nullcontext():
                if level == 1:
                    outs = [tree.generate(p, args.tokens) for p in prompts]
                else:
                    outs = BatchedDecoder(tree, level).generate(prompts, args.tokens, references=expected)
                proofs = []
                for i, (prompt, out) in enumerate(zip(prompts, outs, strict=True)):

                    def rows(around: range, i: int = i, level: int = level) -> dict:
                        return batched_ar_rows(ar, level, prompts, expected, i, around)

                    batched = {"captured": out.probe, "batched": True, "batch": rows} if level > 1 else {}
                    sizes = out.stats.draft_sizes
                    proofs.append(
                        prove_divergence(tree, ar, prompt, expected[i], out.tokens, args.tokens, sizes, **batched)
                    )
                after = []
                for i, (out, d) in enumerate(zip(outs, proofs, strict=True)):
                    record = Record("instructions", "dominotree", f"p{i}", 0, out.tokens, None, out.stats)
                    record.divergence, record.concurrency = (d.to_dict() if d else None), level
                    if recheck is not None and needs_recheck(record):
                        recheck(record, prompts, i)
                    after.append(record.divergence["kind"] if record.divergence else "exact")
            side, before = "planted bug" if bug else "correct", counts([d.kind if d else "exact" for d in proofs])
            ratios = " ".join(ratio(d) for d in proofs if d)
            print(f"| {side} | {level} | {before} | {ratios} | {counts(after) if fine else '-'} |")
    print(f"(* proven numerical; {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
