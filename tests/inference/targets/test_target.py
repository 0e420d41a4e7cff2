import pytest
import torch

from inference import load_target, load_target_config, tree_attention_mask
from inference.targets.mask_token import choose_mask_token_id


def test_layer_id_l_is_the_output_of_decoder_layer_l(any_tiny_target):
    target = any_tiny_target
    ids = torch.randint(0, 500, (2, 9))
    seen = {}
    hooks = [
        layer.register_forward_hook(lambda m, i, o, k=k: seen.__setitem__(k, o[0] if isinstance(o, tuple) else o))
        for k, layer in enumerate(target.layers)
    ]
    try:
        hf = target.model(ids, output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    layer_ids = [1, 3, 4]
    out = target(ids, layer_ids=layer_ids)
    expected = torch.cat([seen[i] for i in layer_ids], dim=-1)
    torch.testing.assert_close(out.features, expected, rtol=0, atol=0)
    # HF convention: hidden_states[0] is the embedding output, hidden_states[l + 1] the output of layer l.
    torch.testing.assert_close(out.features, torch.cat([hf.hidden_states[i + 1] for i in layer_ids], -1))
    torch.testing.assert_close(out.logits, hf.logits)


def test_features_follow_the_requested_order(qwen_target):
    ids = torch.randint(0, 500, (1, 5))
    a = qwen_target(ids, layer_ids=[1, 3]).features
    b = qwen_target(ids, layer_ids=[3, 1]).features
    h = qwen_target.config.hidden_size
    torch.testing.assert_close(a[..., :h], b[..., h:])


def test_incremental_cache_matches_full_forward(any_tiny_target):
    target = any_tiny_target
    ids = torch.randint(0, 500, (1, 12))
    full = target(ids, layer_ids=[2])
    cache = target.new_cache()
    first = target(ids[:, :7], cache=cache, layer_ids=[2])
    second = target(ids[:, 7:], cache=cache, layer_ids=[2])
    assert target.cache_length(cache) == 12
    torch.testing.assert_close(torch.cat([first.logits, second.logits], 1), full.logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.cat([first.features, second.features], 1), full.features, rtol=1e-4, atol=1e-5)


# A tree over a prefix: node -> parent (-1 = the root, which is node 0 itself here).
PARENTS = [-1, 0, 0, 1, 1, 2, 3]


def _ancestors(parents):
    n = len(parents)
    visible = torch.zeros(n, n, dtype=torch.bool)
    depth = []
    for i, p in enumerate(parents):
        visible[i, i] = True
        if p >= 0:
            visible[i] |= visible[p]
        depth.append(0 if p < 0 else depth[p] + 1)
    return visible, torch.tensor(depth)


def _path(parents, i):
    path = []
    while i >= 0:
        path.append(i)
        i = parents[i]
    return path[::-1]


def test_tree_forward_equals_sequential_forward(any_tiny_target):
    target = any_tiny_target
    prefix = torch.randint(0, 500, (1, 6))
    tokens = torch.randint(0, 500, (1, len(PARENTS)))
    visible, depth = _ancestors(PARENTS)
    cache = target.new_cache()
    target(prefix, cache=cache)
    mask = tree_attention_mask(prefix.shape[1], visible, target.dtype)
    tree = target(
        tokens, cache=cache, position_ids=(prefix.shape[1] + depth).unsqueeze(0), attention_mask=mask, layer_ids=[1, 4]
    )
    for node in range(len(PARENTS)):
        path = _path(PARENTS, node)
        seq = target(torch.cat([prefix, tokens[:, path]], dim=1), layer_ids=[1, 4])
        torch.testing.assert_close(tree.logits[0, node], seq.logits[0, -1], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(tree.features[0, node], seq.features[0, -1], rtol=1e-4, atol=1e-5)


def test_compaction_then_one_more_step_equals_a_fresh_forward(any_tiny_target):
    target = any_tiny_target
    prefix = torch.randint(0, 500, (1, 5))
    tokens = torch.randint(0, 500, (1, len(PARENTS)))
    visible, depth = _ancestors(PARENTS)
    cache = target.new_cache()
    target(prefix, cache=cache)
    start = prefix.shape[1]
    target(
        tokens,
        cache=cache,
        position_ids=(start + depth).unsqueeze(0),
        attention_mask=tree_attention_mask(start, visible, target.dtype),
    )
    accepted = _path(PARENTS, 6)  # root -> 1 -> 3 -> 6
    target.compact_cache(cache, start, torch.tensor(accepted))
    assert target.cache_length(cache) == start + len(accepted)
    nxt = torch.randint(0, 500, (1, 1))
    step = target(nxt, cache=cache, layer_ids=[2])
    fresh = target(torch.cat([prefix, tokens[:, accepted], nxt], dim=1), layer_ids=[2])
    torch.testing.assert_close(step.logits[0, -1], fresh.logits[0, -1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(step.features[0, -1], fresh.features[0, -1], rtol=1e-4, atol=1e-5)


def test_crop_then_continue_equals_fresh_forward(qwen_target):
    ids = torch.randint(0, 500, (1, 10))
    cache = qwen_target.new_cache()
    qwen_target(ids, cache=cache)
    qwen_target.crop_cache(cache, 6)
    nxt = torch.randint(0, 500, (1, 2))
    out = qwen_target(nxt, cache=cache)
    fresh = qwen_target(torch.cat([ids[:, :6], nxt], 1))
    torch.testing.assert_close(out.logits, fresh.logits[:, -2:], rtol=1e-4, atol=1e-5)


def test_tree_mask_values():
    visible, _ = _ancestors([-1, 0, 0])
    m = tree_attention_mask(2, visible, torch.float32)
    assert m.shape == (1, 1, 3, 5)
    allowed = m[0, 0] == 0
    assert allowed[:, :2].all()
    assert allowed[2, 2 + 0] and allowed[2, 2 + 2] and not allowed[2, 2 + 1]


class _StubTokenizer:
    def __init__(self, n, specials, template=""):
        self.n, self.all_special_ids, self.chat_template = n, specials, template
        self.bos_token_id, self.eos_token_id, self.pad_token_id, self.unk_token_id = 1, 2, 2, 0

    def __len__(self):
        return self.n

    def convert_ids_to_tokens(self, i):
        return f"<s{i}>"


def test_mask_id_is_the_first_padded_row_or_a_spare_special_token():
    cfg = load_target_config("tiny-llama")
    assert choose_mask_token_id(_StubTokenizer(500, [0, 1, 2]), cfg) == 500
    assert choose_mask_token_id(_StubTokenizer(512, [0, 1, 2, 7, 9], template="<s9>"), cfg) == 7
    with pytest.raises(ValueError, match="no spare special token"):
        choose_mask_token_id(_StubTokenizer(512, [0, 1, 2]), cfg)


def test_unknown_target_gives_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="neither a built-in"):
        load_target(str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="neither a built-in"):
        load_target_config(str(tmp_path / "nope"))
