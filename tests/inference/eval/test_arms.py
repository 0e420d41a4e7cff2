"""An arm = a method at the run's draft size or its own (`dominotree/2`)."""

import pytest

from inference.decoding.options import DecodeOptions, TreeOptions
from inference.eval.arms import arm_method, arm_options, check_arms

RUN, TREE = DecodeOptions(chain_window="auto"), TreeOptions(budget="auto")


@pytest.mark.parametrize(
    ("arm", "window", "budget"),
    [
        ("dominotree", "auto", "auto"),
        ("dominotree/2", "auto", 2),
        ("ddtree/auto", "auto", "auto"),
        ("domino/3", 3, "auto"),
        ("dflash/full", None, "auto"),
        ("ar", "auto", "auto"),
    ],
)
def test_an_arm_takes_its_own_size_or_the_runs(arm, window, budget):
    check_arms([arm])
    options, tree = arm_options(arm, RUN, TREE)
    assert (options.chain_window, tree.budget) == (window, budget)
    assert arm_method(arm) == arm.partition("/")[0]


@pytest.mark.parametrize(
    ("arms", "message"),
    [
        (["dominotree/two"], "must be N or auto, e.g. dominotree/2"),
        (["ddtree/full"], "must be N or auto"),
        (["domino/0"], "must be N, auto or full"),
        (["ar/4"], "ar drafts nothing"),
        (["medusa/2"], "unknown decoding method 'medusa'"),
        (["ar", "domino", "ar"], "'ar' is listed twice"),
        ([], "no methods given"),
    ],
)
def test_a_malformed_arm_is_refused_in_one_line(arms, message):
    with pytest.raises(ValueError, match=message) as err:
        check_arms(arms)
    assert "\n" not in str(err.value)
