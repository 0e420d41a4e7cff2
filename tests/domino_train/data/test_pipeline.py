from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

from domino_train import CONF_DIR
from domino_train.data.feature_cache import FeatureCache
from domino_train.data.freshness import content_digest
from domino_train.data.pipeline import run
from domino_train.data.sources import Source
from domino_train.data.tokenize import load_tokenized

SOURCES = sorted(p.stem for p in (Path(CONF_DIR) / "pipeline" / "source").glob("*.yaml"))


def _compose(overrides):
    with initialize_config_dir(CONF_DIR, version_base="1.3"):
        return compose("data_pipeline", overrides=overrides, return_hydra_config=True)


def _resolve_hydra(cfg, tmp_path):
    from hydra.core.hydra_config import HydraConfig

    cfg.hydra.runtime.output_dir = str(tmp_path / "run")
    cfg.hydra.runtime.cwd = str(tmp_path)
    HydraConfig.instance().set_config(cfg)
    return cfg


@pytest.mark.parametrize("source", SOURCES)
def test_every_source_recipe_composes_and_instantiates(source, tmp_path):
    overrides = [f"pipeline/source={source}"]
    if source == "local_files":
        overrides.append(f"pipeline.source.sources.local.paths=[{tmp_path}/a.jsonl]")
    cfg = _resolve_hydra(_compose(overrides), tmp_path)
    for name, spec in cfg.pipeline.source.sources.items():
        assert isinstance(instantiate(spec, name=name), Source)
    assert cfg.out_dir.startswith(str(tmp_path))


def test_the_pipeline_runs_end_to_end_on_a_tiny_target(tmp_path, tiny_corpus):
    cfg = _compose(
        [
            "target=tiny",
            "pipeline/source=local_files",
            f"pipeline.source.sources.local.paths=[{tiny_corpus}]",
            "stages=[prepare,regenerate,tokenize,cache]",
            "regenerate.max_new_tokens=4",
            "regenerate.temperature=1.0",
            "tokenize.max_length=128",
            "cache.num_draft_layers=2",
            "cache.dtype=float32",
        ]
    )
    cfg = _resolve_hydra(cfg, tmp_path)
    results = run(cfg)
    out = Path(cfg.out_dir)
    assert out == tmp_path / "artifacts" / "data" / "local-tiny"
    assert results["prepare"]["kept"] == 6 and results["regenerate"]["rows_in"] == 6
    ds, manifest = load_tokenized(out / "tokenized")
    assert len(ds) == manifest["counts"]["rows"] > 0
    assert manifest["lineage"]["regenerated"]["settings"]["sampling"]["temperature"] == 1.0
    cache = FeatureCache(out / "features")
    assert cache.layer_ids == [1, 3] and len(cache) == len(ds)


def test_bad_stage_and_unknown_keys_are_refused(tmp_path):
    cfg = _resolve_hydra(_compose(["stages=[prepare,train]"]), tmp_path)
    with pytest.raises(ValueError, match="unknown stage"):
        run(cfg)
    with pytest.raises(ConfigCompositionException):
        _compose(["prepare.max_charz=3"])


def test_regenerate_max_context_drops_prompts_that_do_not_fit(tmp_path, tiny_corpus):
    def regenerated(max_context):
        cfg = _compose(
            [
                "target=tiny",
                "pipeline/source=local_files",
                f"pipeline.source.sources.local.paths=[{tiny_corpus}]",
                "stages=[prepare,regenerate]",
                "regenerate.max_new_tokens=4",
                f"regenerate.max_context={max_context}",
                f"name=ctx{max_context}",
            ]
        )
        return run(_resolve_hydra(cfg, tmp_path))["regenerate"]

    everything = regenerated("null")
    assert everything.get("dropped_prompt_too_long", 0) == 0
    tight = regenerated(30)  # the prompts are 21-31 tokens (+4 new): the longer ones no longer fit
    assert 0 < tight["dropped_prompt_too_long"] and tight["rows_out"] < everything["rows_out"]


def _local(tmp_path, corpus, *overrides):
    cfg = _compose(
        [
            "target=tiny",
            "pipeline/source=local_files",
            f"pipeline.source.sources.local.paths=[{corpus}]",
            "stages=[prepare,regenerate,tokenize,cache]",
            "regenerate.max_new_tokens=4",
            "tokenize.max_length=128",
            "cache.num_draft_layers=2",
            "cache.dtype=float32",
            *overrides,
        ]
    )
    return _resolve_hydra(cfg, tmp_path)


def test_the_same_command_on_another_file_is_refused_or_redone_never_mixed(tmp_path, tiny_corpus):
    run(_local(tmp_path, tiny_corpus))
    out = tmp_path / "artifacts" / "data" / "local-tiny"
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "z", "conversations": [{"from": "human", "value": "something else"}]}\n')
    with pytest.raises(ValueError, match=r"prepared would change .* made from it; pass overwrite=true .* name="):
        run(_local(tmp_path, other))
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before  # nothing touched
    run(_local(tmp_path, other, "overwrite=true"))
    ds, manifest = load_tokenized(out / "tokenized")
    assert ds["id"] == ["local/z"] and len(FeatureCache(out / "features")) == 1
    assert manifest["input_sha256"] == content_digest(out / "regenerated")  # what tokenize read is recorded
    run(_local(tmp_path, other))  # the same command again: nothing changed, nothing refused


def test_folder_targets_get_their_own_data_set_names(tmp_path):
    for folder in (tmp_path / "a" / "model", tmp_path / "b" / "model"):
        folder.mkdir(parents=True)
    names = {
        _resolve_hydra(_compose(["pipeline/source=local_files", f"target.spec={folder}"]), tmp_path).name
        for folder in (tmp_path / "a" / "model", tmp_path / "b" / "model")
    }
    assert len(names) == 2 and all(n.startswith("local-model-") for n in names)
    assert _resolve_hydra(_compose(["pipeline/source=local_files", "target=tiny"]), tmp_path).name == "local-tiny"
