"""The chain drafts exactly what training scores: the decoding rollout equals the training forward."""

import pytest
import torch

from inference.decoding import ChainDecoder, build_decoder, draft_chain
from inference.decoding.chain.decoder import draft_chains, sampling_picker
from inference.decoding.sampling import SamplingParams, probabilities


def _recording_picker(seen: list[torch.Tensor]):
    def pick(logits: torch.Tensor):  # [rows, (k,) V]: one row here
        seen.append(logits.reshape(-1, logits.shape[-1]))
        return logits.argmax(-1), None

    return pick


@pytest.mark.parametrize("prefix", [0, 1, 3])
def test_rollout_equals_the_teacher_forced_training_logits(any_tiny_target, prefix, make_drafter):
    target = any_tiny_target
    drafter = make_drafter(target, block_size=6, pure_draft_prefix_len=prefix)
    ids = torch.randint(0, 256, (1, 13), generator=torch.Generator().manual_seed(prefix))
    features = target(ids, layer_ids=drafter.config.target_layer_ids).features
    root, n = ids[:, -1], drafter.config.num_draft_tokens
    domino_logits, dflash_logits = [], []
    with torch.no_grad():
        cache = drafter.new_cache(1, 16)
        drafter.append_context(cache, features[:, :-1])  # the root's own features are not committed yet
        domino = draft_chain(drafter, cache, root, n, use_head=True, pick=_recording_picker(domino_logits)).tokens
        draft_chain(drafter, cache, root, n, use_head=False, pick=_recording_picker(dflash_logits))
        hidden = drafter.forward_blocks(features, ids, torch.tensor([[ids.shape[1] - 1]]))[:, 0]
        causal = torch.cat([root, domino[:-1]]).unsqueeze(0)  # the GRU consumes the root, then the drafts
        expected = drafter.block_logits(hidden, causal)
    assert len(domino_logits) == int(prefix > 0) + n - prefix  # one batched pick for the prefix, then one each
    torch.testing.assert_close(torch.cat(domino_logits), expected.final[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(torch.cat(dflash_logits), expected.base[0], rtol=1e-4, atol=1e-4)
    assert torch.equal(expected.final[0, :prefix], expected.base[0, :prefix])  # pure-draft prefix: base only
    assert not torch.allclose(expected.final[0, prefix:], expected.base[0, prefix:])


@pytest.mark.parametrize("method", ["dflash", "domino"])
def test_accepted_lengths_are_those_the_training_forward_predicts(any_tiny_target, method, trained_drafter):
    """Round r roots at committed position a_r; while its drafts are right they are the teacher-forced
    predictions of the anchor block at a_r, so its accepted length is that block's run of correct
    predictions. Decoding misaligned with training (positions, GRU inputs, context) breaks this while
    staying lossless, which is how trained drafters end up serving tau ~ 1."""
    target = any_tiny_target
    drafter, seqs = trained_drafter(target)
    d = drafter.config.num_draft_tokens
    all_expected = []
    for row in (0, 1):
        prompt = seqs[row, :9]
        out = build_decoder(method, target, drafter).generate(prompt, 40)
        full = torch.cat([prompt, torch.tensor(out.tokens), torch.zeros(d + 1, dtype=torch.long)]).unsqueeze(0)
        roots = (len(prompt) + torch.tensor([0, *out.stats.accept_lengths[:-1]]).cumsum(0)).unsqueeze(0)
        positions = roots.unsqueeze(-1) + torch.arange(d)
        with torch.no_grad():
            features = target(full, layer_ids=drafter.config.target_layer_ids).features
            hidden = drafter.forward_blocks(features, full, roots)
            logits = drafter.block_logits(hidden, torch.gather(full, 1, positions.flatten(1)).view_as(positions))
        predicted = (logits.final if method == "domino" else logits.base).argmax(-1)[0]
        right = predicted == torch.gather(full, 1, positions.flatten(1) + 1).view_as(positions)[0]
        expected = (right.int().cumprod(-1).sum(-1) + 1).tolist()
        assert out.stats.accept_lengths[:-1] == expected[:-1]  # the last round is cut by the token limit
        all_expected += expected[:-1]
    assert {1, d + 1} <= set(all_expected) and set(all_expected) - {1, d + 1}  # rejected, partial and full blocks


class _SnapshotDecoder(ChainDecoder):
    """Records both caches after every commit that continues the generation."""

    def commit(self, state, verdict, tokens, stats):
        finished, stopped = super().commit(state, verdict, tokens, stats)
        if not finished:
            target_keys = state.target_cache.layers[0].keys[0].clone()
            self.drafter.flush_context(state.draft_cache)  # a commit leaves its features waiting
            draft_keys = state.draft_cache.layer(0)[0][0].clone()
            self.snapshots.append((list(tokens), state.length, target_keys, draft_keys))
        return finished, stopped


def test_caches_hold_exactly_the_committed_context(qwen_target, trained_drafter):
    target = qwen_target
    drafter, seqs = trained_drafter(target)
    decoder = _SnapshotDecoder(target, drafter, "domino")
    decoder.snapshots = []
    prompt = seqs[1, :9]
    decoder.generate(prompt, 30)
    assert len(decoder.snapshots) >= 3
    for tokens, length, target_keys, draft_keys in decoder.snapshots:
        context = torch.cat([prompt, torch.tensor(tokens[:-1])]).unsqueeze(0)  # all but the next root
        assert length == context.shape[1] == target_keys.shape[1] == draft_keys.shape[1]
        fresh = target.new_cache()
        with torch.no_grad():
            features = target(context, cache=fresh, layer_ids=drafter.config.target_layer_ids).features
            positions = torch.arange(length).unsqueeze(0)
            expected = drafter.backbone.context_kv(drafter.backbone.fuse(features), positions)[0][0][0]
        torch.testing.assert_close(target_keys, fresh.layers[0].keys[0], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(draft_keys, expected, rtol=1e-4, atol=1e-5)


def test_sampled_drafts_carry_the_distribution_they_were_drawn_from(qwen_target, make_drafter):
    drafter = make_drafter(qwen_target, block_size=5)
    params = SamplingParams(temperature=0.8, top_k=5)
    ids = torch.randint(0, 256, (1, 9), generator=torch.Generator().manual_seed(0))
    features = qwen_target(ids, layer_ids=drafter.config.target_layer_ids).features
    with torch.no_grad():
        cache = drafter.new_cache(1, 16)
        drafter.append_context(cache, features[:, :-1])
        pick = sampling_picker(params, torch.Generator().manual_seed(1))
        draft = draft_chain(drafter, cache, ids[:, -1], drafter.config.num_draft_tokens, use_head=True, pick=pick)
        hidden = drafter.forward_blocks(features, ids, torch.tensor([[ids.shape[1] - 1]]))[:, 0]
        final = drafter.block_logits(hidden, torch.cat([ids[:, -1], draft.tokens[:-1]]).unsqueeze(0)).final[0]
    torch.testing.assert_close(draft.probs, probabilities(final, params), rtol=1e-4, atol=1e-5)
    assert (draft.probs.gather(-1, draft.tokens.unsqueeze(-1)) > 0).all()


@pytest.mark.parametrize("prefix", [0, 1])
@pytest.mark.parametrize("use_head", [True, False])
def test_chains_of_many_rows_are_each_row_s_chain(any_tiny_target, make_drafter, prefix, use_head):
    """`draft_chains` over 3 rows (one lm_head product, one head step per position for all) gives each row
    the tokens and prefix scores it gets alone, and a shorter chain is a prefix of the longer one."""
    drafter = make_drafter(any_tiny_target, block_size=5, pure_draft_prefix_len=prefix)
    g = torch.Generator().manual_seed(3)
    hidden = torch.randn(3, 4, drafter.config.hidden_size, generator=g)
    roots = torch.randint(0, 256, (3,), generator=g)
    with torch.no_grad():
        together = draft_chains(drafter, hidden, roots, 4, use_head, scored=True)
        for r, chain in enumerate(together):
            alone = draft_chains(drafter, hidden[r : r + 1], roots[r : r + 1], 4, use_head, scored=True)[0]
            assert torch.equal(chain.tokens, alone.tokens) and chain.probs is None
            assert chain.scores == pytest.approx(alone.scores, abs=1e-5)
        short = draft_chains(drafter, hidden, roots, 2, use_head, scored=True)
    assert all(torch.equal(s.tokens, t.tokens[:2]) for s, t in zip(short, together, strict=True))
