"""The kernel table (`inference.kernels.table`) and the measured precision (`inference.kernels.choice`),
on fake timings: the fastest kernel per bucket is chosen, slow kernels stop being timed, the table is
cached per machine, and `dtype: auto` picks the precision whose costs decode fastest."""

import json
from types import SimpleNamespace

import pytest
import torch

from inference.kernels.choice import PrecisionChoice, choose_precision, resolve_precision
from inference.kernels.linear import ROW_BUCKETS
from inference.kernels.policy import KernelPolicy
from inference.kernels.table import KernelTable
from inference.targets.lean_forward import forward_linears
from inference.targets.tiny import tiny_target_config


def _fake(costs):
    """A timer from {kernel: f(rows)} (seconds), recording what it was asked to time."""
    asked = []

    def timer(kernel, precision, shape, rows, bias=False):
        asked.append((kernel, precision, rows))
        return costs[kernel](rows)

    timer.asked = asked
    return timer


def test_the_fastest_kernel_wins_each_bucket_and_slow_ones_stop_being_timed(tmp_path, monkeypatch):
    monkeypatch.setattr("inference.kernels.table.available_kernels", lambda p: ("plain", "transposed", "onednn"))
    timer = _fake({"plain": lambda r: 1.0 + 0.5 * r, "transposed": lambda r: 0.9 * r, "onednn": lambda r: 50.0})
    table = KernelTable({}, path=tmp_path / "t.json")
    assert table.measure("float32", [((8, 4), False)], timer) == [((8, 4), False)]
    plan = table.plan("float32", (8, 4), False)
    assert plan[1] == "transposed" and plan[2] == "transposed" and plan[4] == "plain" and plan[256] == "plain"
    onednn_rows = [r for k, _, r in timer.asked if k == "onednn"]
    assert onednn_rows == [1]  # 50x the best at one row: never timed again
    assert table.measure("float32", [((8, 4), False)], timer) == []  # cached in the table


def test_a_weight_copy_for_one_bucket_alone_must_pay_for_itself():
    table = KernelTable({}, path=None)
    for rows in ROW_BUCKETS:  # bf16w everywhere, but at 256 rows onednn is 10 % faster and transposed 40 %
        times = {"bf16w": 1.0, "plain": 2.0, "onednn": 0.9 if rows == 256 else 5.0}
        if rows == 64:
            times["transposed"] = 0.6
        table.entries[f"bf16-weights:8x4:r{rows}"] = times
    plan = table.plan("bf16-weights", (8, 4), False)
    assert plan[256] == "bf16w"  # 10 % does not pay for a second copy of the weight
    assert plan[64] == "transposed"  # 1.67x does
    assert set(plan.values()) == {"bf16w", "transposed"}


def test_a_row_count_timed_slower_than_a_larger_one_is_timed_again(monkeypatch):
    monkeypatch.setattr("inference.kernels.table.available_kernels", lambda p: ("plain",))
    seen = []

    def timer(kernel, precision, shape, rows, bias=False):
        seen.append(rows)
        return 30.0 if rows == 8 and seen.count(8) == 1 else float(rows)  # the first 8-row sample disturbed

    table = KernelTable({}, path=None)
    table.measure("float32", [((8, 4), False)], timer)
    assert seen.count(8) == 2 and table.seconds("float32", (8, 4), False, 8) == 8.0


def test_the_table_is_saved_and_reused_only_on_the_same_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("DOMINO_CACHE", str(tmp_path))
    table = KernelTable.load()
    table.measure("float32", [((8, 4), True)], _fake(dict.fromkeys(("plain", "transposed", "onednn"), lambda r: r)))
    path = table.save()
    assert path.parent == tmp_path / "kernels"
    again = KernelTable.load()
    assert again.has("float32", (8, 4), True) and not again.has("float32", (8, 4), False)
    raw = json.loads(path.read_text())
    raw["fingerprint"]["cpu"] = "another CPU"
    path.write_text(json.dumps(raw))
    assert KernelTable.load().entries == {}


def _table_of(per_precision):
    """A table whose every shape costs per_precision[p](rows) x out_features x 1e-9 seconds."""
    table = KernelTable({}, path=None)
    linears = forward_linears(tiny_target_config("llama"))
    for precision, cost in per_precision.items():
        for shape, bias, _ in linears:
            for rows in ROW_BUCKETS:
                key = f"{precision}:{shape[0]}x{shape[1]}{'+b' if bias else ''}:r{rows}"
                table.entries[key] = {"plain": cost(rows) * shape[0] * 1e-9}
    return table, linears


def test_auto_precision_takes_the_one_that_decodes_fastest():
    # A bf16 whose verify is flat beats an fp32 step that is 1.2x cheaper at one row.
    table, linears = _table_of({"float32": lambda r: 1.0 * r, "bfloat16": lambda r: 1.2})
    choice = choose_precision(linears, table, ["float32", "bfloat16"])
    assert choice.name == "bfloat16" and choice.how == "measured"
    assert choice.scores["bfloat16"] > choice.scores["float32"] and set(choice.forward_ms) == {"float32", "bfloat16"}
    # bf16 cheap at one row but 20x per extra row (emulated): bf16-valued weights with fp32 compute win.
    table, linears = _table_of(
        {"float32": lambda r: 2.0 + 0.1 * r, "bfloat16": lambda r: 1.0 * r**2, "bf16-weights": lambda r: 1.0 + 0.1 * r}
    )
    assert choose_precision(linears, table, ["float32", "bfloat16", "bf16-weights"]).name == "bf16-weights"
    # a tie keeps the first candidate (fp32 rounds least)
    table, linears = _table_of({"float32": lambda r: 1.0, "bfloat16": lambda r: 1.0})
    assert choose_precision(linears, table, ["float32", "bfloat16"]).name == "float32"


def test_explicit_precisions_win_and_other_devices_follow_the_rule():
    config = forward_linears(tiny_target_config("qwen3"))
    assert resolve_precision("float32", "cpu", config) == PrecisionChoice("float32", "explicit")
    bf16w = resolve_precision("bf16-weights", "cpu", config)
    assert bf16w.dtype == torch.float32 and bf16w.weights_bf16
    assert resolve_precision("auto", "cuda", config).name == "bfloat16"
    assert resolve_precision("auto", "cpu", None).how == "rule"  # a target the lean engine cannot run
    assert forward_linears(SimpleNamespace(model_type="gemma3_text")) is None


def test_the_prepack_switch_maps_to_a_policy():
    assert KernelPolicy.from_prepack(False, "cpu", "float32").mode == "plain"
    assert KernelPolicy.from_prepack("auto", "cuda", "bfloat16").mode == "plain"
    assert KernelPolicy.from_prepack("auto", "cpu", "bf16-weights").weights_bf16
    with pytest.raises(ValueError, match="prepack must be auto, true or false"):
        KernelPolicy.from_prepack("yes", "cpu", "float32")
    with pytest.raises(ValueError, match="prepack=true is not possible here"):
        KernelPolicy.from_prepack(True, "cuda", "float32")
