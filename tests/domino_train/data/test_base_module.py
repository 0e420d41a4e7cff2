"""The held-out split: random rows, but the rows of one conversation (one per assistant turn, as a
Qwen3-style template tokenizes them) never straddle validation and training."""

import datasets

from domino_train.data.base_module import DominoDataModule


def _split(ids: list[str], val_size: int) -> tuple[list[int], list[int]]:
    module = DominoDataModule(batch_size=1, val_size=val_size, max_length=8, num_workers=0, seed=0)
    rows = datasets.Dataset.from_dict({"id": ids, "input_ids": [[1, 2]] * len(ids), "loss_mask": [[0, 1]] * len(ids)})
    module._split(rows, len(ids))
    return [j for _, j in module.val_set.indices], [j for _, j in module.train_set.indices]


def test_the_turns_of_a_conversation_stay_on_one_side():
    ids = [f"c{i // 3}" for i in range(30)]  # ten conversations of three turns
    val, train = _split(ids, val_size=4)
    assert len(val) >= 4 and sorted(val + train) == list(range(30))
    assert {ids[j] for j in val}.isdisjoint({ids[j] for j in train})


def test_with_unique_ids_the_split_is_the_plain_random_one():
    val, train = _split([f"r{i}" for i in range(20)], val_size=5)
    assert len(val) == 5 and len(train) == 15
