from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

from domino_train import CONF_DIR
from domino_train.data.feature_cache import FeatureCache
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
