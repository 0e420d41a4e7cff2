"""The unit of an evaluation's work and its on-disk log, which makes a long `domino-decode` run resumable.

A `Record` is one generation (one turn of one prompt) of one method, or a skipped one. `RecordLog` appends
the records of each finished piece of work to `records.jsonl` in the run directory, one line each, flushed
to disk before the next starts: at concurrency 1 a prompt (every method and turn of it at once, so a
prompt's AR baseline and its methods stay paired), above 1 a method's batched run over a set's turn. A
stopped run is resumed from that file and redoes only the work it does not hold. A last line cut short
by the stop is dropped. `settings.json` beside it pins what the records measure: a resume
with other settings is refused.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inference.decoding.logits_probe import LogitsProbe
from inference.decoding.stats import GenerationStats


@dataclass
class Record:
    """One generation (one turn of one prompt) of one method, or a skipped one (`tokens` None)."""

    dataset: str
    method: str
    prompt_id: str
    turn: int
    tokens: list[int] | None
    finish_reason: str | None
    stats: GenerationStats | None
    text: str | None = None
    skip_reason: str | None = None
    noise: float | None = None  # `ar` records at T = 0: this prompt's share of the run's noise floor
    divergence: dict[str, Any] | None = None  # other records at T = 0 that differ from `ar`'s: `Divergence`
    concurrency: int = 1  # sequences decoded together (`BatchedDecoder`) when this one was
    batch: dict[str, Any] | None = None  # concurrency > 1: {"id", "wall_s"} of the batched run it was part of
    # Concurrency > 1 at T = 0: the method's logits where it first parted from the batch-1 `ar` output, as
    # its batched run captured them for the lossless check (`BatchedDecoder`); kept in memory, not stored.
    probe: LogitsProbe | None = field(default=None, repr=False, compare=False)

    @property
    def arm(self) -> str:
        """What the results compare: the method, with its concurrency when above 1 (`domino@4`)."""
        return self.method if self.concurrency == 1 else f"{self.method}@{self.concurrency}"

    @property
    def skipped(self) -> bool:
        return self.tokens is None

    def to_row(self) -> dict[str, Any]:
        """The JSON object of this record: generations.jsonl's row, with the full stats under `stats`."""
        row: dict[str, Any] = {"dataset": self.dataset, "method": self.method, "prompt_id": self.prompt_id}
        row["turn"] = self.turn
        if self.concurrency != 1:
            row |= {"concurrency": self.concurrency, "batch": self.batch}
        if self.skipped:
            return row | {"skipped": self.skip_reason}
        s = self.stats
        return (
            row
            | {
                "prompt_tokens": s.prompt_tokens,
                "output_tokens": s.output_tokens,
                "finish_reason": self.finish_reason,
                "tau": s.tau,
                "accept_lengths": s.accept_lengths,
                "stage_s": s.stage_seconds(),
                "tokens": self.tokens,
                "text": self.text,
                "stats": asdict(s),
            }
            | {k: v for k, v in (("noise", self.noise), ("divergence", self.divergence)) if v is not None}
        )

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Record:
        key = (row["dataset"], row["method"], row["prompt_id"], row["turn"])
        batched = {"concurrency": row.get("concurrency", 1), "batch": row.get("batch")}
        if "skipped" in row:
            return cls(*key, None, None, None, skip_reason=row["skipped"], **batched)
        stats = GenerationStats(**row["stats"])
        tokens, reason, text = row["tokens"], row["finish_reason"], row["text"]
        noise, divergence = row.get("noise"), row.get("divergence")
        return cls(*key, tokens, reason, stats, text, noise=noise, divergence=divergence, **batched)


class RecordLog:
    """`records.jsonl` + `settings.json` in a run directory (see the module docstring)."""

    def __init__(self, out_dir: Path) -> None:
        self.path, self.settings_path = out_dir / "records.jsonl", out_dir / "settings.json"

    def start(self, settings: dict[str, Any]) -> list[Record]:
        """The records of a previous run with the same `settings` in this directory ([] for a new run)."""
        settings = json.loads(json.dumps(settings))  # the form it takes on disk, for the comparison
        if not self.path.is_file():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.settings_path.write_text(json.dumps(settings, indent=2))
            return []
        before = json.loads(self.settings_path.read_text()) if self.settings_path.is_file() else {}
        changed = [
            f"{k}: {before.get(k)!r} -> {settings.get(k)!r}"
            for k in sorted({*before, *settings})
            if before.get(k) != settings.get(k)
        ]
        if changed:
            raise ValueError(
                f"{self.path.parent} holds records measured with other settings ({'; '.join(changed)}): "
                "rerun with the same settings to resume, or choose another hydra.run.dir"
            )
        return self._read()

    def _read(self) -> list[Record]:
        records, good = [], 0
        with open(self.path, "rb") as f:
            for line in f:
                try:
                    rows = json.loads(line)
                except ValueError:
                    break  # cut short by the stop: everything from here on is redone
                records += [Record.from_row(r) for r in rows]
                good += len(line)
        if good < self.path.stat().st_size:
            with open(self.path, "r+b") as f:
                f.truncate(good)
        return records

    def append(self, records: list[Record]) -> None:
        """One finished piece of work's records, as one line, on disk before this returns."""
        with open(self.path, "a") as f:
            f.write(json.dumps([r.to_row() for r in records]) + "\n")
            f.flush()
            os.fsync(f.fileno())
