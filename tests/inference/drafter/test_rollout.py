"""The head's one rollout: both step sets agree, and `roll_out` drafts what its steps and `choose` say."""

import torch

from inference.drafter.head import DominoHead
from inference.drafter.rollout import DecodingSteps, TrainingSteps, roll_out


def test_training_and_decoding_steps_agree(drafter):
    head = drafter.head
    x = torch.randn(2, 3, 4, drafter.config.hidden_size)
    with torch.no_grad():
        train, decode = TrainingSteps(head), DecodingSteps(head)
        torch.testing.assert_close(train.start(x), decode.start(x))
        state = decode.start(x)
        torch.testing.assert_close(train.advance(x[..., 0, :], state), decode.advance(x[..., 0, :], state))
        assert torch.equal(decode.advance(x[..., 0, :], state), head.step(x[..., 0, :], state))


def test_roll_out_consumes_each_choice_before_the_next_position(drafter):
    cfg = drafter.config
    d = cfg.num_draft_tokens
    hidden, base = torch.randn(1, d, cfg.hidden_size), torch.randn(1, d, cfg.vocab_size)
    start = torch.tensor([[5]])
    chosen = []

    def choose(logits):
        chosen.append(logits.argmax(-1))
        return chosen[-1]

    with torch.no_grad():
        roll_out(DecodingSteps(drafter.head), drafter.embed, hidden, base, start, choose)
        state = drafter.head.first_step(drafter.embed(start[0]))
        for j in range(d):
            logits = base[:, j] + drafter.head.correction(hidden[:, j], state)
            assert torch.equal(chosen[j], logits.argmax(-1))
            state = drafter.head.step(drafter.embed(chosen[j]), state)
    assert len(chosen) == d


def test_the_earlier_step_names_are_the_new_ones():
    assert DominoHead.encode is DominoHead.teacher_forced_states
    assert DominoHead.gru_step is DominoHead.training_step
    assert DominoHead.input_projection is DominoHead.decoding_gates
    assert DominoHead.step_projected is DominoHead.decoding_step
    assert DominoHead.first_step_projected is DominoHead.decoding_first_step
