"""`load_target(spec)`: a built-in name, a local HF folder or a hub id -> `TargetModel`.

Built-ins: `smollm2` (the real offline chat model, see `inference.targets.smollm2`) and `tiny-qwen3` /
`tiny-llama` (random, for tests; `tiny` = `tiny-qwen3`). `load_target_config` returns only the HF config
and also knows the Qwen3-4B / Qwen3-8B configs offline, so drafters for them can be composed and built on
the `meta` device on a machine with no weights.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from inference.device import default_device
from inference.kernels.choice import PrecisionChoice, resolve_precision
from inference.targets.adapter import TargetModel
from inference.targets.engine import install_engine
from inference.targets.lean_forward import forward_linears

TINY_SPECS = {"tiny": "qwen3", "tiny-qwen3": "qwen3", "tiny-llama": "llama"}
BUILTIN_SPECS = ("smollm2", *TINY_SPECS)
# Hub ids whose config ships with the package (the architecture numbers of the public models).
KNOWN_CONFIGS = {"Qwen/Qwen3-8B": "Qwen3-8B.json", "Qwen/Qwen3-4B": "Qwen3-4B.json"}


def _load_error(spec: str, err: Exception) -> ValueError:
    """One line saying why `spec` did not load: "not found" only where nothing answers to the name (no
    built-in, no local folder, no reachable hub id); an existing folder or a reachable id says what failed."""
    cause = f"{type(err).__name__}: {' '.join(str(err).split())}"
    if Path(spec).expanduser().exists():
        return ValueError(f"target {spec!r}: the local folder does not load as a Hugging Face causal LM ({cause})")
    if isinstance(err, OSError):
        return ValueError(
            f"target {spec!r} is neither a built-in ({', '.join(BUILTIN_SPECS)}), an existing local folder, "
            f"nor a hub id that can be reached from here ({cause}). Pass a folder with config.json + weights, "
            "or run once with network access so the hub cache holds it."
        )
    return ValueError(f"target {spec!r} does not load ({cause})")


def load_target_config(spec: str) -> Any:
    """The target's HF config without loading weights (offline for built-ins and KNOWN_CONFIGS)."""
    from transformers import AutoConfig, PretrainedConfig

    if spec in TINY_SPECS:
        from inference.targets.tiny import tiny_target_config

        return tiny_target_config(TINY_SPECS[spec])
    if spec == "smollm2":
        from inference.targets.smollm2 import smollm2_folder

        spec = str(smollm2_folder())
    elif spec in KNOWN_CONFIGS and not Path(spec).is_dir():
        text = resources.files("inference.targets").joinpath("known_configs", KNOWN_CONFIGS[spec]).read_text()
        raw = json.loads(text)
        config_cls = AutoConfig.for_model(raw["model_type"]).__class__
        cfg: PretrainedConfig = config_cls.from_dict(raw)
        cfg._name_or_path = spec
        return cfg
    try:
        return AutoConfig.from_pretrained(spec)
    except (OSError, ValueError) as e:
        raise _load_error(spec, e) from e


def load_target(
    spec: str,
    dtype: PrecisionChoice | torch.dtype | str | None = "auto",
    device: torch.device | str | None = None,
    mask_token_id: int | None = None,
    attn_implementation: str | None = "auto",
    chat_template_kwargs: dict[str, Any] | None = None,
    prepack: bool | str = "auto",
    engine: str = "auto",
) -> TargetModel:
    """Load a frozen target model (and its tokenizer when it has one).

    `dtype` may be a torch dtype, its name ("bfloat16") or `bf16-weights` (fp32 compute on weights rounded
    to bf16); `auto` (or None) is measured on a CPU for a Llama-family target
    (`inference.kernels.choice.resolve_precision`) and follows `inference.precision`'s rule elsewhere.
    `device="meta"` loads no weights: the tokenizer, chat template and config only (for tokenizing, or
    for talking to a remote server that runs the model).
    `chat_template_kwargs` (e.g. `{"enable_thinking": False}`) apply to every prompt rendered for it.
    `attn_implementation` is HF's (sdpa, eager, ...); auto = SDPA where the model supports it, else eager
    (Gemma 2's softcapping has no SDPA path).
    `engine` (auto, lean, graphed, hf) picks the forward decoding runs (`inference.targets.engine`: the
    lean layer loop on a static cache where the model allows, its steps CUDA-graphed on a GPU, else
    HF's). `prepack` picks the linears' kernels: auto = the fastest measured on this machine per shape
    and row count (`inference.kernels`), true = oneDNN's prepacked layout everywhere, false = plain
    `F.linear`. Inference only: training loads its target with `prepack=False`.
    """
    device = device if device is not None else default_device()
    precision = _precision(spec, dtype, device)
    template_kwargs = dict(chat_template_kwargs or {})
    if spec in TINY_SPECS:
        from inference.targets.tiny import tiny_target

        target = tiny_target(TINY_SPECS[spec], dtype=precision.dtype)
        target.model.to(device)
        target.chat_template_kwargs = template_kwargs
        return _with_engine(target, precision, engine, prepack, device)
    path = model_folder(spec)
    model = _hf_model(spec, path, precision.dtype, device, attn_implementation)
    target = TargetModel(
        model.to(device),
        tokenizer=_tokenizer(path),
        name=spec,
        mask_token_id=mask_token_id,
        chat_template_kwargs=template_kwargs,
    )
    return _with_engine(target, precision, engine, prepack, device)


def _precision(
    spec: str, dtype: PrecisionChoice | torch.dtype | str | None, device: torch.device | str
) -> PrecisionChoice:
    """The target's precision: `auto` on a CPU is measured on its forward's linears, else the rule."""
    measured = torch.device(device).type == "cpu" and (dtype is None or dtype == "auto")
    return resolve_precision(dtype, device, forward_linears(load_target_config(spec)) if measured else None)


def _hf_model(
    spec: str, path: str, dtype: torch.dtype, device: torch.device | str, attn_implementation: str | None
) -> Any:
    """The HF causal LM of a non-built-in target: weights from `path`, or only its shapes on `meta`."""
    from transformers import AutoModelForCausalLM

    if torch.device(device).type == "meta":
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(load_target_config(spec), dtype=dtype)
    attention = None if attn_implementation == "auto" else attn_implementation  # None: transformers' rule
    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=attention)
    except (OSError, ValueError) as e:
        raise _load_error(spec, e) from e


def _tokenizer(path: str) -> Any:
    """The target's tokenizer, or None when the folder has none (a target driven by token ids only)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError):
        return None


def model_folder(spec: str) -> str:
    """Where `from_pretrained` finds a target: the materialised folder of a built-in, else `spec` itself."""
    if spec == "smollm2":
        from inference.targets.smollm2 import smollm2_folder

        return str(smollm2_folder())
    return spec


def _with_engine(
    target: TargetModel, precision: PrecisionChoice, engine: str, prepack: bool | str, device: torch.device | str
) -> TargetModel:
    """`target` in its precision, on its engine and kernels (`device="meta"` holds no weights: HF, plain)."""
    target.precision = precision
    if torch.device(device).type == "meta":
        return target
    if precision.weights_bf16:
        with torch.no_grad():
            for param in target.model.parameters():
                param.copy_(param.to(torch.bfloat16))
    return install_engine(target, engine, prepack)
