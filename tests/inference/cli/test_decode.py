import json
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from domino_conf import CONF_DIR
from inference import DrafterCheckpointError, tiny_target
from inference.cli import decode
from inference.drafter import DominoDrafter
from inference.eval import decoders
from inference.eval.prompt_sets import BENCHMARKS
from inference.eval.records import RecordLog

CONF = CONF_DIR
QUICK = ["target=tiny", "max_new_tokens=12", "warmup_tokens=4", "progress=false"]


@pytest.fixture
def drafter_path(qwen_target, trained_drafter, tmp_path):
    drafter, _ = trained_drafter(qwen_target)  # the same weights as the `target=tiny` the CLI loads
    return drafter.save_pretrained(tmp_path / "drafter", dtype=torch.float32)


def _cfg(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("decode", overrides=[*QUICK, *overrides])


def test_domino_decode_end_to_end(drafter_path, tmp_path, monkeypatch, capsys, restore_logging):
    argv = ["domino-decode", *QUICK, f"drafter_path={drafter_path}", "bench=[mt-bench:1,humaneval:1]"]
    monkeypatch.setattr(sys, "argv", [*argv, f"hydra.run.dir={tmp_path}"])
    decode.main()
    report = json.loads((tmp_path / "results.json").read_text())
    assert list(report["results"]) == ["mt-bench", "humaneval"]
    for dataset, by_method in report["results"].items():
        assert list(by_method) == ["ar", "dflash", "domino"]
        for method, s in by_method.items():
            assert s["num_prompts"] == 1 and s["skipped_prompts"] == 0 and s["num_output_tokens"] > 0
            assert s["tau"] >= 1 and s["speedup"] > 0 and s["tokens_per_s"] > 0
            assert s["lossless"] is (None if method == "ar" else True), (dataset, method)
    assert report["temperature"] == 0.0 and report["config"]["drafter_path"] == str(drafter_path)
    lines = (tmp_path / "generations.jsonl").read_text().splitlines()
    assert len(lines) == 3 * 3  # methods x (two mt-bench turns + one humaneval prompt)
    table = (tmp_path / "results.md").read_text()
    assert "| method | mt-bench | humaneval | mean |" in table and table in capsys.readouterr().out


def test_cost_aware_overrides_run_end_to_end_and_report_their_costs(drafter_path, tmp_path):
    cfg = _cfg(
        f"drafter_path={drafter_path}",
        "methods=[ar,domino,ddtree]",
        "bench=[humaneval:2]",
        "chain.window=auto",
        "tree.budget=auto",
        "tree.max_budget=8",
    )
    report = decode.run(cfg, tmp_path)
    assert set(report["cost_model"]) == {"domino", "ddtree"}
    tree = report["cost_model"]["ddtree"]
    assert tree["verify_curve"]["windows"][-1] <= 9 and tree["draft_fixed_s"] > 0
    seen = tree["acceptance"]["seen"]
    assert sum(seen) > 2 * len(seen)  # the calibration learnt from the run's rounds (2 prior counts per bin)
    for method in ("domino", "ddtree"):
        s = report["results"]["humaneval"][method]
        assert s["lossless"] is True and s["predicted_tokens_per_round"] >= 1 and sum(s["draft_size_histogram"])
    assert report["noise_window"] == 9 and (tmp_path / "costs.png").is_file() == (report.get("cost_plot") is not None)


def test_prompts_longer_than_the_context_are_skipped_and_counted(drafter_path, tmp_path):
    cfg = _cfg(
        f"drafter_path={drafter_path}", "methods=[ar,domino]", "bench=[humaneval:2,mt-bench:1]", "max_context=300"
    )
    report = decode.run(cfg, tmp_path)
    for method in ("ar", "domino"):
        assert report["results"]["humaneval"][method]["skipped_prompts"] == 2
        assert report["results"]["humaneval"][method]["num_prompts"] == 0
        assert report["results"]["mt-bench"][method]["skipped_prompts"] == 0


def test_a_drafter_for_another_target_is_refused_before_loading_it(tmp_path, monkeypatch, make_drafter):
    other = tiny_target("qwen3", hidden_size=32, num_heads=2, num_kv_heads=1)
    path = make_drafter(other).save_pretrained(tmp_path / "other", dtype=torch.float32)
    monkeypatch.setattr(decode.hydra.utils, "instantiate", lambda *a, **k: pytest.fail("the target was loaded"))
    with pytest.raises(DrafterCheckpointError, match="hidden size 32 != target's 64"):
        decode.run(_cfg(f"drafter_path={path}"), tmp_path / "run")


def test_a_plain_dflash_drafter_for_a_head_method_is_refused_before_the_target(tmp_path, monkeypatch, make_drafter):
    path = make_drafter(tiny_target("qwen3"), head=None).save_pretrained(tmp_path / "dflash", dtype=torch.float32)
    monkeypatch.setattr(decode.hydra.utils, "instantiate", lambda *a, **k: pytest.fail("the target was loaded"))
    with pytest.raises(ValueError, match="'dominotree' needs a drafter with a Domino head"):
        decode.run(_cfg(f"drafter_path={path}", "methods=[ar,dominotree]"), tmp_path / "run")


def test_a_public_config_without_a_mask_id_takes_the_targets(drafter_path, tmp_path, qwen_target, monkeypatch):
    config = json.loads((drafter_path / "config.json").read_text())
    trained_with = config["dflash_config"].pop("mask_token_id")  # public configs may leave it to the target
    (drafter_path / "config.json").write_text(json.dumps(config))
    loaded, load = [], DominoDrafter.from_pretrained
    monkeypatch.setattr(DominoDrafter, "from_pretrained", lambda *a, **k: loaded.append(load(*a, **k)) or loaded[-1])
    report = decode.run(_cfg(f"drafter_path={drafter_path}", "methods=[ar,dflash]", "bench=[humaneval:1]"), tmp_path)
    assert loaded[0].config.mask_token_id == trained_with == qwen_target.mask_token_id
    assert report["results"]["humaneval"]["dflash"]["lossless"] is True


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["methods=[ar,medusa]"], "ar, dflash, domino"),
        (["bench=[mt-bench,hellaswag]"], "gsm8k, math500"),
        (["bench=[gsm8k]", "bench_hub=false", "drafter_path=x"], "bench_data.gsm8k"),
        (["methods=[ar,domino]"], "drafter_path"),
        (["verify=typical", "methods=[ar]"], "match, rejection"),
        (["tree.verify=rejection", "methods=[ar,ddtree]"], "match, residual"),
        (["tree.budget=0", "methods=[ar]"], "tree budget must be auto or >= 1"),
        (["methods=[ar,dominotree/0]"], "dominotree/0': the size after '/' must be N or auto"),
        (["methods=[ar,ar/2]"], "ar drafts nothing"),
        (["methods=[ar,ddtree/2,ddtree/2]"], "listed twice"),
        (["cuda_graph=always", "methods=[ar]"], "cuda_graph must be one of"),
        (["draft_gate=sometimes", "methods=[ar]"], "draft_gate must be true or false"),
        (["max_new_tokens=-1", "methods=[ar]"], "max_new_tokens must be an integer >= 1, got -1"),
        (["max_turns=0", "methods=[ar]"], "max_turns must be an integer >= 1 or null"),
        (["warmup_tokens=-2", "methods=[ar]"], "warmup_tokens must be an integer >= 0"),
    ],
)
def test_bad_input_is_refused_with_the_valid_choices(overrides, message, tmp_path, monkeypatch):
    monkeypatch.setattr(decode.hydra.utils, "instantiate", lambda *a, **k: pytest.fail("the target was loaded"))
    with pytest.raises(ValueError, match=message):
        decode.run(_cfg(*overrides), tmp_path)


@pytest.mark.parametrize("preset", sorted(p.stem for p in (Path(CONF) / "preset").glob("*.yaml")))
def test_every_preset_composes_with_valid_choices(preset):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("decode", overrides=[f"preset={preset}"])
    from inference.decoding.methods import DECODING_METHODS
    from inference.eval.prompt_sets import BENCHMARKS

    assert set(cfg.methods) <= set(DECODING_METHODS) and cfg.target.spec == "smollm2"
    assert all(spec.split(":")[0].replace("_", "-") in BENCHMARKS for spec in cfg.bench)


def test_baselines_draft_with_the_baseline_drafter(drafter_path, qwen_target, make_drafter, tmp_path, monkeypatch):
    """dflash / ddtree get the drafter at `baseline_drafter_path`, domino / dominotree keep `drafter_path`."""
    dflash = make_drafter(qwen_target, head=None).save_pretrained(tmp_path / "dflash", dtype=torch.float32)
    given = {}
    build = decoders.build_decoder

    def spy(method, target, drafter, *args, **kwargs):
        given[method] = drafter
        return build(method, target, drafter, *args, **kwargs)

    monkeypatch.setattr(decoders, "build_decoder", spy)
    overrides = [f"drafter_path={drafter_path}", "methods=[ar,dflash,domino,ddtree]", "bench=[humaneval:1]"]
    report = decode.run(_cfg(*overrides, f"baseline_drafter_path={dflash}"), tmp_path / "run")
    assert given["ar"] is None
    assert given["dflash"] is given["ddtree"] and given["dflash"].head is None
    assert given["domino"].head is not None
    assert all(report["results"]["humaneval"][m]["lossless"] for m in ("dflash", "domino", "ddtree"))
    assert report["baseline_drafter"] == str(dflash)


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_set_takes_a_local_copy_by_the_documented_key(name, tmp_path):
    path = str(tmp_path / f"{name}.jsonl")
    assert _cfg(f"bench_data.{name}={path}").bench_data[name] == path
    assert _cfg(f"bench_data={{{name}: {path}}}").bench_data[name] == path


def test_a_local_copy_of_an_unbundled_set_is_decoded(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    path.write_text(json.dumps({"question": "What is 2+2?"}) + "\n")
    cfg = _cfg(f"bench_data.gsm8k={path}", "bench=[gsm8k]", "bench_hub=false", "methods=[ar]")
    report = decode.run(cfg, tmp_path / "run")
    assert report["results"]["gsm8k"]["ar"]["num_prompts"] == 1


def test_the_presets_validation_set_resolves_its_data_folder(tmp_path, monkeypatch):
    """`preset=smollm2` names the validation slice as ${oc.env:DOMINO_DATA,...}/smollm2-val/prepared."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        preset = compose("decode", overrides=["preset=smollm2"])
    monkeypatch.setenv("DOMINO_DATA", str(tmp_path / "data"))
    folder = Path(preset.bench_data.sharegpt)
    assert folder == tmp_path / "data" / "smollm2-val" / "prepared"
    folder.mkdir(parents=True)
    row = {"id": "v0", "conversations": [{"role": "user", "content": "Name a colour."}]}
    (folder / "shard-00000.jsonl").write_text(json.dumps(row) + "\n")
    cfg = _cfg("preset=smollm2", "bench=[sharegpt:1]", "bench_hub=false", "methods=[ar]")
    assert "${oc.env:DOMINO_DATA" in OmegaConf.to_container(cfg.bench_data)["sharegpt"]  # resolved as decode runs
    report = decode.run(cfg, tmp_path / "run")
    assert report["results"]["sharegpt"]["ar"]["num_prompts"] == 1


@pytest.mark.parametrize("key", ["bench_data.gsm8kk=/x", "+bench_data.gsm8kk=/x", "bench_data={gsm8kk: /x}"])
def test_a_misspelt_set_name_is_refused_naming_the_known_ones(key, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["domino-decode", key])
    with pytest.raises(SystemExit) as stop:
        decode.main()
    message = str(stop.value.code)
    assert message.startswith("domino-decode: error: unknown config key 'bench_data.gsm8kk'") and "\n" not in message
    assert "did you mean 'bench_data.gsm8k'?" in message and "bench_data has: gsm8k, math500, aime24" in message


def test_drafter_is_answered_with_the_right_key(monkeypatch):
    for slip in ("drafter=out/export", "+drafter=out/export"):
        monkeypatch.setattr(sys, "argv", ["domino-decode", slip])
        with pytest.raises(SystemExit, match=r"the drafter folder is `drafter_path=PATH`"):
            decode.main()


def test_bad_input_ends_in_one_line_unless_hydra_full_error(tmp_path, monkeypatch, restore_logging):
    argv = ["domino-decode", *QUICK, "methods=[ar,medusa]", f"hydra.run.dir={tmp_path}"]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit) as stop:
        decode.main()
    message = str(stop.value.code)
    assert message.startswith("domino-decode: error: unknown decoding method 'medusa'") and "\n" not in message
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    with pytest.raises(ValueError, match="unknown decoding method 'medusa'"):
        decode.main()


def test_a_stopped_run_resumes_without_redoing_finished_prompts(drafter_path, tmp_path, monkeypatch):
    overrides = [f"drafter_path={drafter_path}", "bench=[mt-bench:3,humaneval:2]", "methods=[ar,domino]"]
    whole = decode.run(_cfg(*overrides), tmp_path / "whole")
    run_dir, appended = tmp_path / "stopped", []
    real_append = RecordLog.append

    def stop_after_three(self, records):
        if len(appended) == 3:
            raise KeyboardInterrupt  # the session ends mid-run
        appended.append(records[0].prompt_id)
        real_append(self, records)

    monkeypatch.setattr(RecordLog, "append", stop_after_three)
    with pytest.raises(KeyboardInterrupt):
        decode.run(_cfg(*overrides), run_dir)
    monkeypatch.setattr(
        RecordLog, "append", lambda self, records: [appended.append(records[0].prompt_id), real_append(self, records)]
    )
    resumed = decode.run(_cfg(*overrides), run_dir)
    assert len(appended) == 5  # 3 prompts before the stop, the 2 left after it: none twice
    keys = ("dataset", "method", "prompt_id", "turn", "tokens")
    whole_rows, resumed_rows = ([tuple(r[k] for k in keys) for r in _rows(tmp_path / d)] for d in ("whole", "stopped"))
    assert whole_rows == resumed_rows  # T = 0: the same tokens, in the same order
    for bench in ("mt-bench", "humaneval"):
        for method in ("ar", "domino"):
            a, b = whole["results"][bench][method], resumed["results"][bench][method]
            assert (a["tau"], a["num_prompts"], a["lossless"]) == (b["tau"], b["num_prompts"], b["lossless"])
    with pytest.raises(ValueError, match="max_new_tokens: 12 -> 8"):
        decode.run(_cfg(*overrides, "max_new_tokens=8"), run_dir)


def _rows(run_dir):
    with open(run_dir / "generations.jsonl") as f:
        return [json.loads(line) for line in f]


def test_runs_go_under_domino_root_when_it_is_set(tmp_path, monkeypatch, restore_logging):
    """As training's runs (conf/paths): the run folder and the preset's data folder follow $DOMINO_ROOT."""
    run_dirs = []
    monkeypatch.setattr(decode, "run", lambda cfg, out_dir: run_dirs.append(out_dir))
    monkeypatch.setattr(sys, "argv", ["domino-decode", *QUICK, "methods=[ar]"])
    monkeypatch.setenv("DOMINO_ROOT", str(tmp_path))
    monkeypatch.delenv("DOMINO_DATA", raising=False)
    GlobalHydra.instance().clear()
    decode.main()
    assert run_dirs[0].parent == tmp_path / "artifacts" / "runs" / "decode"
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        preset = compose("decode", overrides=["preset=smollm2"])
    assert Path(preset.bench_data.sharegpt) == tmp_path / "artifacts" / "data" / "smollm2-val" / "prepared"


def test_ctrl_c_ends_in_one_line_with_the_command_that_resumes_the_run(tmp_path, monkeypatch, capsys, restore_logging):
    def interrupted(cfg, out_dir):
        raise KeyboardInterrupt

    monkeypatch.setattr(decode, "run", interrupted)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    run_dir = tmp_path / "run dir"
    monkeypatch.setattr(sys, "argv", ["domino-decode", *QUICK, f"hydra.run.dir={run_dir}"])
    with pytest.raises((SystemExit, KeyboardInterrupt)) as stop:  # an interrupt let through fails, not aborts
        decode.main()
    assert getattr(stop.value, "code", None) == 130
    out, err = capsys.readouterr()
    assert f"run folder: {run_dir}" in out + err  # said at the start
    assert err.splitlines()[-1] == (  # one line, the run folder's override once, quoted for the shell
        f"domino-decode: interrupted; resume with: domino-decode {' '.join(QUICK)} 'hydra.run.dir={run_dir}'"
    )
