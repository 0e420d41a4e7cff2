"""`ResumableSampler`: an epoch holds a whole number of gradient accumulations, so every strategy steps alike."""

import pytest

from domino_train.data.sampler import ResumableSampler


@pytest.mark.parametrize(
    ("rows", "accumulate", "kept", "steps"),
    [(22, 1, 22, 6), (22, 2, 22, 3), (22, 4, 16, 1), (22, 5, 20, 1), (24, 3, 24, 2)],
)
def test_an_epoch_holds_whole_accumulations(rows, accumulate, kept, steps):
    # batch 4: 22 rows = 6 batches (the last of 2 rows); a left-over batch is dropped, never stepped alone
    sampler = ResumableSampler(rows, 4, seed=0, shuffle=True, accumulate=accumulate)
    epoch = list(sampler)
    assert len(epoch) == len(sampler) == kept and sampler.steps_per_epoch == steps
    assert len(set(epoch)) == kept and set(epoch) <= set(range(rows))
    sampler.resume_at(epoch=0, batches_done=2)  # a resumed epoch continues the same order
    assert list(sampler) == epoch[8:]


def test_an_accumulation_longer_than_an_epoch_is_refused_in_one_line():
    with pytest.raises(ValueError) as refused:
        ResumableSampler(40, 4, seed=0, shuffle=True, rank=1, world=2, accumulate=6)
    assert str(refused.value) == (
        "trainer.accumulate_grad_batches=6 is more than the 5 batches an epoch holds (20 training rows per device, "
        "data.batch_size=4): no optimizer step would be taken; lower trainer.accumulate_grad_batches or add data"
    )
