"""The prompt sources bundled in reasoning-gym: code tasks and math problems, read offline and prepared
like any other source."""

import pytest

from domino_train.data import package_sources
from domino_train.data.package_sources import CodeIOPackage, GSMSymbolic
from domino_train.data.prepare import prepare
from domino_train.data.shards import read_shards


def test_code_tasks_ask_for_the_function_and_carry_the_reference():
    rows = list(CodeIOPackage(name="codeio").records())
    assert len(rows) == 2750 and len(list(CodeIOPackage(name="codeio", subset="all").records())) == 3002
    where, first = rows[0]
    assert where == "codeio-hq.jsonl.gz:0"
    user, answer = first["messages"]
    assert user["content"].startswith("Write a Python function `main_solution` for this task.\n\n")
    assert "Input:" in user["content"] and "def main_solution" in answer["content"]
    with pytest.raises(ValueError, match="subset must be hq or all"):
        next(CodeIOPackage(name="codeio", subset="best").records())


def test_math_problems_are_drawn_again_by_their_seed():
    draw = [r for _, r in GSMSymbolic(name="gsm", size=6, seed=3).records()]
    assert len(draw) == 6 and draw == [r for _, r in GSMSymbolic(name="gsm", size=6, seed=3).records()]
    assert draw != [r for _, r in GSMSymbolic(name="gsm", size=6, seed=4).records()]
    assert all(r["messages"][0]["content"].endswith("?") or "answer" in r["messages"][0]["content"] for r in draw)
    assert all("####" in r["messages"][1]["content"] for r in draw)  # the step-by-step answer and its result


def test_a_missing_package_is_named_with_its_install(monkeypatch):
    monkeypatch.setattr(package_sources.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install reasoning-gym"):
        next(CodeIOPackage(name="codeio").records())
    with pytest.raises(FileNotFoundError, match="pip install reasoning-gym"):
        next(GSMSymbolic(name="gsm").records())


def test_they_prepare_beside_each_other_in_disjoint_slices(tmp_path):
    sources = {"codeio": CodeIOPackage(name="codeio", skip=2, limit=3), "gsm": GSMSymbolic(name="gsm", size=8, limit=4)}
    prepare(sources, tmp_path / "prepared")
    ids = [r["id"] for r in read_shards(tmp_path / "prepared")]
    assert ids == ["codeio/2", "codeio/3", "codeio/4", "gsm/0", "gsm/1", "gsm/2", "gsm/3"]
