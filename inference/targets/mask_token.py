"""The MASK-token rules: which reserved id fills a drafter block's `MASK x (B-1)` slots.

The id must be one the target never generates, and it is recorded in the exported drafter's config, so
training, export and serving must agree on it. Qwen3 has a fixed answer (the id every public Qwen3
DFlash / Domino drafter uses); any other target gets one picked from its tokenizer.
"""

from __future__ import annotations

from typing import Any

# Qwen3's tokenizer defines ids 0..151668; 151669 is the first padded (never generated) embedding row,
# and the id every public Qwen3 DFlash / Domino drafter uses as MASK.
QWEN3_VOCAB_SIZE = 151936
QWEN3_MASK_TOKEN_ID = 151669


def default_mask_token_id(hf_config: Any) -> int:
    """The MASK id when the caller gives none: only defined for the Qwen3 vocabulary.

    Other targets have no universal reserved id; `TargetModel.mask_token_id` picks one from the tokenizer.
    """
    if getattr(hf_config, "model_type", None) == "qwen3" and hf_config.vocab_size == QWEN3_VOCAB_SIZE:
        return QWEN3_MASK_TOKEN_ID
    raise ValueError(
        f"no default MASK id for a {getattr(hf_config, 'model_type', '?')} target with vocab "
        f"{hf_config.vocab_size}: pass mask_token_id= (a reserved id that is never generated; "
        "inference.load_target(...).mask_token_id picks one from the tokenizer)"
    )


def choose_mask_token_id(tokenizer: Any, hf_config: Any) -> int:
    """A reserved id the target never generates, for the drafter's MASK slots.

    The first padded embedding row when the vocabulary is padded past the tokenizer (Qwen3: 151669);
    otherwise the highest special token that is not bos/eos/pad/unk and not used by the chat template.
    """
    vocab = hf_config.vocab_size
    n_tok = len(tokenizer)
    if n_tok < vocab:
        return n_tok
    reserved = {tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id}
    template = tokenizer.chat_template if isinstance(getattr(tokenizer, "chat_template", None), str) else ""
    specials = set(tokenizer.all_special_ids)
    specials |= {i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if getattr(t, "special", False)}
    candidates = [i for i in specials if i not in reserved and tokenizer.convert_ids_to_tokens(i) not in template]
    if not candidates:
        raise ValueError("the tokenizer has no spare special token for MASK: pass mask_token_id explicitly")
    return max(candidates)
