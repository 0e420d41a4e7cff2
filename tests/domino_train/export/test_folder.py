"""`domino-export` from a checkpoint refuses what is not a drafter checkpoint of ours, and never unpickles
code from one (the end-to-end exports are in tests/domino_train/run/test_train.py)."""

from pathlib import Path

import pytest
import torch

from domino_train.cli.export import main as export_main
from domino_train.export.folder import export_checkpoint
from inference import DominoDrafter, DrafterCheckpointError


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


def _checkpoint(tmp_path: Path, target, make_drafter) -> Path:
    """A training checkpoint of a small drafter, as `DominoLitModule.on_save_checkpoint` writes one."""
    drafter = make_drafter(target)
    state = {f"drafter.{k}": v for k, v in drafter.state_dict().items()}
    path = tmp_path / "run.ckpt"
    torch.save({"drafter_config": drafter.config.to_hf_dict(), "state_dict": state}, path)
    return path


def test_export_replaces_an_earlier_export_and_refuses_any_other_folder(tmp_path, qwen_target, make_drafter, capsys):
    ckpt = _checkpoint(tmp_path, qwen_target, make_drafter)
    out = tmp_path / "drafter"
    export_main([str(ckpt), str(out)])
    (out / "training_config.yaml").write_text("stale: true\n")  # an earlier export's, of another run
    export_main([str(ckpt), str(out)])  # an earlier export is replaced
    assert not (out / "training_config.yaml").exists()  # this checkpoint has no run config: nothing stale kept
    model = tmp_path / "target"  # a target model's folder: its config and weights must survive
    model.mkdir()
    qwen_target.config.save_pretrained(model)
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "tokenizer.json").write_text("{}")
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    with pytest.raises(SystemExit) as stop:
        export_main([str(ckpt), str(model)])
    assert str(stop.value).count("\n") == 0 and str(stop.value).startswith("domino-export: error: ")
    assert "holds tokenizer.json" in str(stop.value) and "--force" in str(stop.value)
    (model / "tokenizer.json").unlink()  # config and weights only: its config.json is not a drafter's
    with pytest.raises(SystemExit, match="not an earlier drafter export .no drafter config"):
        export_main([str(ckpt), str(model)])
    assert {p.name: p.read_bytes() for p in model.iterdir()} == {
        k: v for k, v in before.items() if k != "tokenizer.json"
    }
    export_main([str(ckpt), str(model), "--force"])
    assert (
        DominoDrafter.from_pretrained(model).config.to_hf_dict()
        == DominoDrafter.from_pretrained(out).config.to_hf_dict()
    )
