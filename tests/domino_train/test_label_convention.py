"""The label convention, end to end: a drafter trained with the objective's labels (`block_targets`,
through the training module's own step), exported and loaded back, accepts in decoding exactly the
drafts the objective scores as right. An off-by-one anywhere between the two (the anchor, `shift_label`,
the pure-draft prefix, the GRU's inputs) keeps decoding lossless and quietly caps acceptance; here it
fails."""

import pytest
import torch

from domino_train.export.folder import write_export
from domino_train.method.module import DominoLitModule
from domino_train.method.objectives import block_targets
from inference.decoding import build_decoder
from inference.drafter import DominoDrafter

PROMPT, NEW = 8, 48


def _continuations(target, n: int, seed: int) -> torch.Tensor:
    """[n, PROMPT + NEW]: random prompts and the target's greedy continuations."""
    prompts = torch.randint(0, 256, (n, PROMPT), generator=torch.Generator().manual_seed(seed))
    ar = build_decoder("ar", target)
    return torch.stack([torch.cat([p, torch.tensor(ar.generate(p, NEW).tokens)]) for p in prompts])


def _train(target, drafter_config, seqs: torch.Tensor, steps: int = 80) -> DominoDrafter:
    """The training module's step (anchors, labels, loss) on `seqs`, their continuations as assistant text."""
    module = DominoLitModule(drafter_config, target=lambda device: target, num_anchors=8, lr=1e-2)
    module.target = target
    module.drafter.bind_target(target.embed_tokens, target.lm_head)
    module.lambda_t = lambda: 0.5
    loss_mask = torch.zeros_like(seqs)
    loss_mask[:, PROMPT:] = 1
    batch = {"input_ids": seqs, "loss_mask": loss_mask, "attention_mask": torch.ones_like(seqs)}
    opt = torch.optim.AdamW(module.drafter.parameters(), lr=1e-2)
    for step in range(steps):
        loss = module._step(batch, torch.Generator().manual_seed(step))["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    return module.drafter.eval().requires_grad_(False)


def _objective_accepts(drafter, target, full: torch.Tensor, roots: torch.Tensor, method: str) -> list[int]:
    """1 + each round's run of drafts the objective labels right (`block_targets`), rooted where it rooted."""
    loss_mask = torch.zeros_like(full)
    loss_mask[:, PROMPT:] = 1
    with torch.no_grad():
        features = target(full, layer_ids=drafter.config.target_layer_ids).features
        targets = block_targets(full, loss_mask, roots, drafter.config.num_draft_tokens, 7.0)
        logits = drafter.block_logits(drafter.forward_blocks(features, full, roots), targets.causal_tokens)
    chosen = (logits.final if method == "domino" else logits.base).argmax(-1)
    right = (chosen == targets.labels) & targets.valid
    return (right.int().cumprod(-1).sum(-1) + 1)[0].tolist()


@pytest.mark.parametrize("shift_label", [False, True])
def test_an_exported_drafter_accepts_what_the_objective_labels_right(tmp_path, qwen_target, make_drafter, shift_label):
    target = qwen_target
    config = make_drafter(target, block_size=6, shift_label=shift_label).config
    seqs = _continuations(target, 8, seed=1)
    prompts = [*seqs[:4, :PROMPT], *_continuations(target, 3, seed=2)[:, :PROMPT]]  # trained on, and not
    trained = _train(target, config, seqs)
    write_export(trained, tmp_path, torch.float32, manifest={}, run_config=None)
    served = DominoDrafter.from_pretrained(tmp_path, target=target)
    assert served.config == trained.config
    d, seen = config.num_draft_tokens, set()
    for method in ("dflash", "domino"):
        for prompt in prompts:
            out = build_decoder(method, target, served).generate(prompt, 32)
            roots = PROMPT + torch.tensor([0, *out.stats.accept_lengths[:-1]]).cumsum(0)  # prefill made token 1
            full = torch.cat([prompt, torch.tensor(out.tokens), torch.zeros(d + 1, dtype=torch.long)])
            expected = _objective_accepts(trained, target, full.unsqueeze(0), roots.unsqueeze(0), method)
            assert out.stats.accept_lengths[:-1] == expected[:-1]  # the last round is cut by the token limit
            seen |= set(expected[:-1])
    assert {1, d + 1} <= seen and seen - {1, d + 1}  # rejected, partial and full blocks all occurred
