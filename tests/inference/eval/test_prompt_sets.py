import json

import pytest

from inference.eval.prompt_sets import (
    BENCHMARKS,
    MATH_SUFFIX,
    BenchmarkUnavailableError,
    load_benchmark,
    parse_bench_spec,
)


def test_bundled_sets_load_offline_in_file_order():
    name, prompts = load_benchmark("humaneval:3")
    assert name == "humaneval" and [p.id for p in prompts] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert prompts[0].turns[0].startswith("Write a solution to the following problem")
    assert "def has_close_elements" in prompts[0].turns[0] and prompts[0].turns[0].endswith("```")
    name, prompts = load_benchmark("mt_bench:2")
    assert name == "mt-bench" and [p.id for p in prompts] == ["81", "82"]
    assert all(len(p.turns) == 2 for p in prompts)
    assert len(load_benchmark("mt-bench")[1]) == 80


def test_spec_parsing():
    assert parse_bench_spec("MT_Bench:5") == ("mt-bench", 5)
    assert parse_bench_spec("math-500") == ("math500", None)
    for bad in ("gsm8k:0", "gsm8k:x"):
        with pytest.raises(ValueError, match="positive number"):
            parse_bench_spec(bad)
    with pytest.raises(ValueError, match=", ".join(BENCHMARKS)):
        parse_bench_spec("hellaswag")


def test_local_copies_get_the_papers_formats(tmp_path):
    rows = [{"question": "What is 2+2?", "answer": "4"}, {"question": "And 3+3?", "answer": "6"}]
    (tmp_path / "gsm8k.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    _, prompts = load_benchmark("gsm8k:1", {"gsm8k": str(tmp_path / "gsm8k.jsonl")}, allow_hub=False)
    assert [p.turns for p in prompts] == [("What is 2+2?" + MATH_SUFFIX,)]
    folder = tmp_path / "alpaca"
    folder.mkdir()
    (folder / "train.json").write_text(json.dumps([{"instruction": "Translate.", "input": "Hallo", "output": ""}]))
    _, prompts = load_benchmark("alpaca", {"alpaca": str(folder)}, allow_hub=False)
    assert prompts[0].turns == ("Translate.\n\nHallo",)


def test_sharegpt_conversations_give_their_user_turns_from_every_shard(tmp_path):
    """A `domino-data` prepared folder (chat format, shards plus summary.json) and ShareGPT's own format."""
    folder = tmp_path / "prepared"
    folder.mkdir()
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]  # raw U+2028 below
    chat += [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye?"}]
    chat[2]["content"] = "Hello.\u2028Welcome."  # JSON may hold it unescaped; it is no line break of JSONL
    row = json.dumps({"id": "a", "conversations": chat}, ensure_ascii=False)
    (folder / "shard-00000.jsonl").write_text(row + "\n", encoding="utf-8")
    native = [{"from": "human", "value": "Why?"}, {"from": "gpt", "value": "Because."}]
    (folder / "shard-00001.jsonl").write_text(json.dumps({"id": "b", "conversations": native}) + "\n")
    (folder / "summary.json").write_text(json.dumps({"rows": 2}))
    _, prompts = load_benchmark("sharegpt", {"sharegpt": str(folder)}, allow_hub=False)
    assert [(p.id, p.turns) for p in prompts] == [("a", ("Hi?", "Bye?")), ("b", ("Why?",))]
    (folder / "shard-00002.jsonl").write_text(json.dumps({"id": "c", "conversations": native[1:]}) + "\n")
    with pytest.raises(ValueError, match=r"sharegpt row 2 \(id c\) .*: its conversation has no user turn"):
        load_benchmark("sharegpt", {"sharegpt": str(folder)}, allow_hub=False)


def test_a_datasets_folder_is_read(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.DatasetDict({"test": datasets.Dataset.from_list([{"problem": "Solve x."}])}).save_to_disk(tmp_path / "m")
    _, prompts = load_benchmark("math500", {"math500": str(tmp_path / "m")}, allow_hub=False)
    assert prompts[0].turns == ("Solve x." + MATH_SUFFIX,)


def test_unavailable_sets_name_the_config_key(tmp_path):
    with pytest.raises(BenchmarkUnavailableError, match="gsm8k.*bench_data.gsm8k"):
        load_benchmark("gsm8k", allow_hub=False)
    with pytest.raises(BenchmarkUnavailableError, match="bench_data.aime24"):
        load_benchmark("aime24", {"aime24": str(tmp_path / "missing.jsonl")})


@pytest.mark.parametrize("content", ["", "\n\n", "[]"], ids=["empty", "blank-lines", "empty-array"])
def test_a_local_copy_without_prompts_is_refused_naming_the_file(tmp_path, content):
    path = tmp_path / ("gsm8k.json" if content == "[]" else "gsm8k.jsonl")
    path.write_text(content)
    with pytest.raises(BenchmarkUnavailableError, match=f"bench_data.gsm8k={path} holds no prompts"):
        load_benchmark("gsm8k", {"gsm8k": str(path)}, allow_hub=False)


@pytest.mark.parametrize(
    ("name", "row", "shown"),
    [
        ("gsm8k", {"question": 1234}, "holds 1234 (int), not text"),
        ("gsm8k", {"question": {"text": "What?"}}, "holds {'text': 'What?'} (dict), not text"),
        ("mt-bench", {"question_id": 7, "turns": ["First?", 2]}, "holds ['First?', 2] (list), not text"),
        ("sharegpt", {"conversations": [{"role": "user", "content": None}]}, "message 0 holds None (NoneType)"),
    ],
)
def test_a_prompt_that_is_not_text_is_refused_naming_its_row(tmp_path, name, row, shown):
    rows = [{**row, "question": "Fine?", "turns": ["Fine?"], "conversations": [{"role": "user", "content": "?"}]}]
    rows.append(row)
    (tmp_path / "set.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(ValueError) as info:
        load_benchmark(name, {name: str(tmp_path / "set.jsonl")}, allow_hub=False)
    message = str(info.value)
    assert message.startswith(f"{name} row 1 (id ") and shown in message and "\n" not in message, message
