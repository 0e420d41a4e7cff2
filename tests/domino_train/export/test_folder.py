"""`domino-export` from a checkpoint refuses what is not a drafter checkpoint of ours, and never unpickles
code from one (the end-to-end exports are in tests/domino_train/run/test_train.py)."""

from pathlib import Path

import pytest
import torch

from domino_train.cli.export import main as export_main
from domino_train.export.folder import export_checkpoint
from inference import DrafterCheckpointError


def test_export_refuses_bad_checkpoints(tmp_path):
    with pytest.raises(SystemExit, match="no such checkpoint"):
        export_main([str(tmp_path / "missing.ckpt"), str(tmp_path / "out")])
    (tmp_path / "bad.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(DrafterCheckpointError, match="cannot read the checkpoint"):
        export_checkpoint(tmp_path / "bad.ckpt", tmp_path / "out")
    torch.save({"state_dict": {}}, tmp_path / "foreign.ckpt")
    with pytest.raises(DrafterCheckpointError, match="no drafter_config"):
        export_checkpoint(tmp_path / "foreign.ckpt", tmp_path / "out")


class _RunsCode:
    """Unpickling this touches `marker`: the shape of any pickle that runs code on load."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("layout", ["ckpt", "zero"])
def test_export_never_runs_code_from_a_checkpoint(tmp_path, layout):
    marker = tmp_path / "ran"
    payload = {"drafter_config": {}, "state_dict": {}, "callbacks": _RunsCode(marker)}
    if layout == "ckpt":
        path = tmp_path / "sent.ckpt"
        torch.save(payload, path)
    else:
        path = tmp_path / "sent_zero.ckpt"
        (path / "checkpoint").mkdir(parents=True)
        torch.save(payload, path / "checkpoint" / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    with pytest.raises(DrafterCheckpointError, match=r"refused, loading it would run code: .*pathlib"):
        export_checkpoint(path, tmp_path / "out")
    assert not marker.exists() and not (tmp_path / "out").exists()
