"""`DraftCap`: a batch's cap on a row's drafts climbs its ladder towards the cap whose rounds commit the
most per second, by paired trials; a trial upwards that never binds teaches nothing."""

from inference.decoding.draft_cap import STAY, TRIAL, DraftCap


def run(cap: DraftCap, rate: dict[int, float], rounds: int, wants: int = 64) -> list[int]:
    """`rounds` drafting rounds, a round at cap c committing rate[c] tokens a second (1 s a round) and
    keeping min(c, wants) drafts in its widest row; returns the caps the rounds ran at."""
    ran = []
    for _ in range(rounds):
        c = cap.current()
        ran.append(c)
        cap.record(c, rate[c], 1.0, min(c, wants))
    return ran


def test_the_cap_climbs_to_the_best_rate_and_stays_near_it():
    rate = {1: 1.0, 2: 1.2, 3: 1.3, 4: 1.4, 6: 1.2, 8: 1.1, 12: 1.0, 16: 0.9}
    cap = DraftCap(top=16)
    ran = run(cap, rate, 20 * (STAY + 2 * TRIAL))
    assert cap.moves[:3] == [2, 3, 4] and cap.cap == 4
    assert ran[-(STAY + 2 * TRIAL) :].count(4) >= STAY + TRIAL  # the best cap, and a neighbour on trial
    assert set(cap.moves) == {2, 3, 4}  # never went past it


def test_the_cap_comes_down_when_narrower_rows_pay():
    rate = {1: 1.5, 2: 1.0, 3: 0.9, 4: 0.8}
    cap = DraftCap(top=4)
    run(cap, rate, 4 * (STAY + 2 * TRIAL))
    assert cap.cap == 1 and cap.moves[:2] == [2, 1]


def test_a_trial_upwards_the_rule_never_uses_counts_as_a_loss():
    rate = {1: 1.0, 2: 1.0, 3: 5.0}  # were its rounds not the cap's own, 3 would win
    cap = DraftCap(top=3)
    run(cap, rate, STAY + 2 * TRIAL, wants=2)
    assert cap.cap == 2 and not cap.upwards  # the next trial goes down


def test_a_trial_alternates_the_cap_and_its_neighbour():
    cap = DraftCap(top=8)
    ran = run(cap, dict.fromkeys(range(1, 9), 1.0), STAY + 4)
    assert ran[:STAY] == [2] * STAY and ran[STAY:] == [3, 2, 3, 2]


def test_no_cap_when_disabled_and_a_ladder_within_the_widest_window():
    cap = DraftCap(enabled=False)
    assert cap.current() is None
    cap.record(None, 1.0, 1.0, 5)
    assert cap.moves == [2]
    assert DraftCap(top=5).ladder() == [1, 2, 3, 4, 5]
    one = DraftCap(top=1)
    assert one.cap == 1 and set(run(one, {1: 1.0}, 3 * (STAY + 2 * TRIAL))) == {1}
