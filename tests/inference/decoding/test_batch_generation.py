import torch

from inference.decoding.batch_generation import generate_batch
from inference.decoding.sampling import SamplingParams


def _prompts(target):
    return [target.chat_ids([{"role": "user", "content": c}]) for c in ("hi", "a much longer question here?", "x")]


def test_batched_equals_one_by_one_greedy_and_seeded(any_tiny_target):
    target = any_tiny_target
    prompts = _prompts(target)
    for params in (SamplingParams(), SamplingParams(temperature=1.0, top_k=50)):
        gens = [torch.Generator().manual_seed(i) for i in range(3)]
        batched = generate_batch(target, prompts, 12, params, gens)
        gens = [torch.Generator().manual_seed(i) for i in range(3)]
        single = [generate_batch(target, [p], 12, params, [g])[0] for p, g in zip(prompts, gens, strict=True)]
        assert [b.token_ids for b in batched] == [s.token_ids for s in single]


def test_greedy_matches_hf_generate(qwen_target):
    prompt = _prompts(qwen_target)[1]
    ours = generate_batch(qwen_target, [prompt], 10)[0]
    hf = qwen_target.model.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False)
    assert ours.token_ids == hf[0, len(prompt) :].tolist() and ours.finish_reason == "length"


def test_stop_token_ends_a_row_without_being_returned(qwen_target):
    prompt = _prompts(qwen_target)[0]
    free = generate_batch(qwen_target, [prompt], 8)[0].token_ids
    stop = free[3]
    first = free.index(stop)
    out = generate_batch(qwen_target, [prompt, _prompts(qwen_target)[1]], 8, stop_token_ids=[stop])
    assert out[0].token_ids == free[:first] and out[0].finish_reason == "stop"
    assert stop not in out[1].token_ids or out[1].finish_reason == "stop"


def test_rows_that_stop_early_leave_the_batch_without_changing_the_others(any_tiny_target):
    target = any_tiny_target
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(0, 200, (n,), generator=gen).tolist() for n in (3, 9, 5, 7, 4, 6)]
    alone = [generate_batch(target, [p], 16, stop_token_ids=[199])[0].token_ids for p in prompts]
    # A row's first change of token becomes a stop token: rows end at different steps, the batch shrinks.
    stops = sorted({next(t for t in a if t != a[0]) for a in alone if len(set(a)) > 1})
    expected = [generate_batch(target, [p], 16, stop_token_ids=stops)[0] for p in prompts]
    for ratio in (0.0, 0.25, 1.0):
        batched = generate_batch(target, prompts, 16, stop_token_ids=stops, shrink_ratio=ratio)
        assert [g.token_ids for g in batched] == [g.token_ids for g in expected], ratio
        assert [g.finish_reason for g in batched] == [g.finish_reason for g in expected]
    assert len({len(g.token_ids) for g in expected}) > 2  # rows really stopped at different steps


def test_prefill_in_chunks_of_positions_equals_one_forward(any_tiny_target):
    target = any_tiny_target
    prompts = _prompts(target)
    whole = generate_batch(target, prompts, 10, prefill_tokens=10_000)
    for budget in (1, 2 * len(prompts) + 1):  # one position per forward; two positions and a ragged last chunk
        chunked = generate_batch(target, prompts, 10, prefill_tokens=budget)
        assert [c.token_ids for c in chunked] == [w.token_ids for w in whole]
