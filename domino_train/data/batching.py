"""Length-sorted batching: rows of similar length share a batch, so right or left padding stays small."""

from __future__ import annotations


def length_sorted_batches(
    lengths: list[int], max_tokens: int | None = None, max_rows: int | None = None, extra: int = 0
) -> list[list[int]]:
    """Indices into `lengths`, shortest first, grouped so that a batch holds at most `max_rows` rows and at
    most `max_tokens` padded tokens ((its longest length + `extra`) x rows; `extra` counts tokens every
    row will add, e.g. `max_new_tokens`). A row over `max_tokens` on its own gets a batch of its own."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        batch = batches[-1] if batches else None
        fits = batch is not None and (max_rows is None or len(batch) < max_rows)
        if fits and max_tokens is not None:  # sorted: row i is the batch's longest
            fits = (lengths[i] + extra) * (len(batch) + 1) <= max_tokens
        if fits:
            batch.append(i)
        else:
            batches.append([i])
    return batches
