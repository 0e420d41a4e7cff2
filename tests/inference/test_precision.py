"""The precision policy (`inference.precision`): bf16 exactly where the hardware computes it natively."""

import pytest
import torch

from inference.precision import (
    computes_bf16,
    cpu_flags,
    resolve_dtype,
    resolve_training_precision,
    training_target_dtype,
)

EPYC = {"avx2", "avx512f", "avx512bw", "avx512_bf16"}  # the flags that matter on this project's CPU
SAPPHIRE_RAPIDS = {"avx512f", "amx_bf16", "amx_tile"}
OLD_X86 = {"avx2", "avx512f", "avx512bw"}  # AVX-512 without bf16: oneDNN emulates it, slower than fp32
GRAVITON3 = {"fp", "asimd", "sve", "bf16"}


@pytest.mark.parametrize(
    ("flags", "native"), [(EPYC, True), (SAPPHIRE_RAPIDS, True), (GRAVITON3, True), (OLD_X86, False), (set(), False)]
)
def test_auto_is_bf16_exactly_on_cpus_with_bf16_instructions(flags, native):
    assert computes_bf16("cpu", flags) is native
    assert resolve_dtype("auto", "cpu", flags) == (torch.bfloat16 if native else torch.float32)
    assert resolve_dtype(None, "cpu", flags) == resolve_dtype("auto", "cpu", flags)
    assert resolve_training_precision("auto", "cpu", flags) == ("bf16-mixed" if native else "32-true")


def test_accelerators_are_bf16_whatever_the_cpu():
    assert resolve_dtype("auto", "cuda", set()) == torch.bfloat16
    assert resolve_dtype("auto", "mps", set()) == torch.bfloat16
    assert resolve_training_precision("auto", "gpu", set()) == "bf16-mixed"


def test_an_explicit_dtype_or_precision_always_wins():
    assert resolve_dtype("float32", "cuda", EPYC) == torch.float32
    assert resolve_dtype("torch.bfloat16", "cpu", OLD_X86) == torch.bfloat16
    assert resolve_dtype(torch.float16, "cpu", EPYC) == torch.float16
    assert resolve_training_precision("32-true", "cpu", EPYC) == "32-true"
    assert resolve_training_precision("bf16-mixed", "cpu", OLD_X86) == "bf16-mixed"


def test_an_unknown_dtype_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="unknown dtype 'bf16'.*auto, float32, bfloat16"):
        resolve_dtype("bf16", "cpu")


def test_this_machines_flags_are_read_once(monkeypatch):
    first = cpu_flags()
    assert cpu_flags() is first and first  # cached; a Linux CPU lists its flags
    monkeypatch.setattr("inference.precision.cpu_flags", lambda: frozenset({"avx512_bf16"}))
    assert resolve_dtype("auto", "cpu") == torch.bfloat16  # the default reads this machine's flags


def test_an_auto_target_trains_in_the_training_precision():
    assert training_target_dtype("auto", "bf16-mixed") == torch.bfloat16
    assert training_target_dtype(None, "32-true") == torch.float32
    assert training_target_dtype("float32", "bf16-mixed") == "float32"  # explicit wins
