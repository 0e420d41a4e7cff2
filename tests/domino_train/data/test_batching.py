from domino_train.data.batching import length_sorted_batches


def test_batches_cover_every_row_within_the_token_budget():
    lengths = [5, 40, 7, 39, 100, 6, 8]
    batches = length_sorted_batches(lengths, max_tokens=80)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert batches[-1] == [4]  # longer than the budget: alone (and last: shortest rows first)
    for b in batches:
        assert max(lengths[i] for i in b) * len(b) <= 80 or len(b) == 1
    assert [3, 1] in batches  # the two ~40-token rows share a batch


def test_rows_and_extra_tokens_cap_a_batch():
    lengths = [5, 6, 7, 8, 9, 10]
    assert length_sorted_batches(lengths, max_rows=4) == [[0, 1, 2, 3], [4, 5]]
    # (longest + 10 new tokens) x rows <= 40: two rows per batch, never three
    assert length_sorted_batches(lengths, max_tokens=40, extra=10) == [[0, 1], [2, 3], [4, 5]]
    assert length_sorted_batches([]) == []
