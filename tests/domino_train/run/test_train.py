"""End-to-end training on the tiny experiment: export, resume, checkpoints, strategies, offline features, and
how `domino-train` ends (a run without a step, bad input, Ctrl-C)."""

import json
import logging
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest
import torch
from lightning.pytorch.callbacks import Callback

from domino_train.cli import train as train_cli
from domino_train.cli.export import main as export_main
from domino_train.export.folder import export_checkpoint
from domino_train.method.module import DominoLitModule, NoOptimizerStepError, clip_gradients
from domino_train.run.resume import resolve_ckpt_path
from domino_train.run.status import read_status
from domino_train.run.train import build, train
from inference import DominoDrafter, tiny_target
from inference.drafter.serving import serving_line, serving_section


class Recorder(Callback):
    def __init__(self, stop_after: int | None = None):
        self.losses, self.stop_after = {}, stop_after

    def on_train_batch_end(self, trainer, module, outputs, batch, idx):
        self.losses[trainer.global_step] = float(outputs["loss"])
        if self.stop_after is not None and trainer.global_step >= self.stop_after:
            raise RuntimeError("simulated kill")


def _fit(cfg, recorder=None):
    module, datamodule, trainer = build(cfg)
    if recorder is not None:
        trainer.callbacks.append(recorder)
    trainer.fit(module, datamodule=datamodule, ckpt_path=resolve_ckpt_path(cfg))
    return module, trainer


def test_tiny_experiment_trains_and_exports(tiny_cfg, tmp_path, capsys):
    cfg = tiny_cfg("trainer.max_steps=12", "callbacks.model_checkpoint.every_n_train_steps=6")
    metrics = train(cfg)
    export = tmp_path / "run" / "export"
    drafter = DominoDrafter.from_pretrained(export, target_config=tiny_target().config)
    assert drafter.config.block_size == 8 and drafter.head is not None
    assert (export / "data_manifest.json").is_file() and (export / "training_config.yaml").is_file()
    assert {"train/loss", "train/lambda", "val/tau_final", "val/ce_base"} <= set(metrics)
    card = (export / "README.md").read_text()  # the model card reports the run's own last validation
    assert f"- val/tau_final: {metrics['val/tau_final']:.3f}" in card and "- step: 12" in card
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert all(k.startswith("drafter.") for k in ckpt["state_dict"])  # the frozen target never enters
    n_params = sum(p.numel() for p in drafter.parameters())
    state = ckpt["optimizer_states"][0]["state"]
    assert sum(s["exp_avg"].numel() for s in state.values()) == n_params
    # domino-export on the Lightning checkpoint writes the same drafter as the end-of-fit export
    out = tmp_path / "from_ckpt"
    capsys.readouterr()
    export_main([str(tmp_path / "run" / "checkpoints" / "last.ckpt"), str(out)])
    hf_config = json.loads((out / "config.json").read_text())
    assert capsys.readouterr().out.splitlines()[-1] == serving_line(hf_config)  # one line: where it can be served
    card = (out / "README.md").read_text()
    assert f"- val/tau_final: {metrics['val/tau_final']:.3f}" in card
    assert "\n".join(serving_section(hf_config)) + "\n\n## Use" in card
    again = DominoDrafter.from_pretrained(out)
    for (k, a), b in zip(drafter.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), k


def test_a_run_stopped_between_its_last_checkpoint_and_the_export_exports_when_resumed(tiny_cfg, tmp_path):
    cfg = tiny_cfg("trainer.max_steps=4", "callbacks.model_checkpoint.every_n_train_steps=4")
    train(cfg)
    export = tmp_path / "run" / "export"
    first = DominoDrafter.from_pretrained(export).state_dict()
    shutil.rmtree(export)  # the requeue signal came after the step-4 checkpoint, before the export
    train(cfg)  # resumes at max_steps: Lightning skips the training loop (and on_train_end)
    again = DominoDrafter.from_pretrained(export).state_dict()
    assert all(torch.equal(first[k], again[k]) for k in first)


@pytest.mark.parametrize("flags", [{"avx512f", "avx512_bf16"}, {"avx512f"}], ids=["bf16-cpu", "fp32-cpu"])
def test_precision_auto_trains_in_bf16_autocast_exactly_where_the_cpu_computes_bf16(
    tiny_cfg, tmp_path, flags, monkeypatch
):
    monkeypatch.setattr("inference.precision.cpu_flags", lambda: frozenset(flags))
    cfg = tiny_cfg(
        "trainer.precision=auto",
        "target.dtype=auto",
        "trainer.max_steps=4",
        "callbacks.model_checkpoint.every_n_train_steps=4",
    )
    module, trainer = _fit(cfg)
    expected = "bf16-mixed" if "avx512_bf16" in flags else "32-true"
    assert trainer.precision == expected and module.hparams.run_config["trainer"]["precision"] == expected
    assert module.target.dtype == (torch.bfloat16 if "avx512_bf16" in flags else torch.float32)
    assert module.target.prepacked_linears == 0  # training backpropagates through plain linears, even in bf16
    assert all(p.dtype == torch.float32 for p in module.drafter.parameters())  # master weights stay fp32
    assert trainer.callback_metrics["train/loss"].isfinite()


@pytest.mark.parametrize("precision", ["bf16-mixed", "32-true"])
def test_the_fused_optimizer_steps_on_gradients_clipped_to_the_trainers_norm(tiny_cfg, precision, monkeypatch):
    norms = []

    def recording(params, clip_val, algorithm="norm"):
        params = [p for p in params if p.grad is not None]
        clip_gradients(params, clip_val, algorithm)
        norms.append(float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))))

    monkeypatch.setattr("domino_train.method.module.clip_gradients", recording)
    cfg = tiny_cfg(
        f"trainer.precision={precision}",
        "trainer.gradient_clip_val=0.01",
        "trainer.max_steps=3",
        "callbacks.export=null",
    )
    _, trainer = _fit(cfg)
    assert all(group["fused"] for group in trainer.optimizers[0].param_groups)
    assert len(norms) == 3 and max(norms) <= 0.01 * 1.001, norms


def test_an_fp32_training_loads_an_auto_target_in_fp32(tiny_cfg, monkeypatch):
    monkeypatch.setattr("inference.precision.cpu_flags", lambda: frozenset({"avx512_bf16"}))
    cfg = tiny_cfg("trainer.precision=32-true", "target.dtype=auto", "trainer.max_steps=2")
    module, _ = _fit(cfg)
    assert module.target.dtype == torch.float32


def test_loss_falls_well_below_its_start(tiny_cfg):
    cfg = tiny_cfg(
        "trainer.max_steps=80",
        "data.num_rows=24",
        "data.val_size=4",
        "train.warmup_ratio=0.05",
        "callbacks.export=null",
        "callbacks.model_checkpoint=null",
    )
    rec = Recorder()
    _fit(cfg, rec)
    first, last = rec.losses[1], sum(rec.losses[s] for s in range(76, 81)) / 5
    assert last < 0.5 * first, (first, last)


def test_resume_continues_exactly(tiny_cfg, tmp_path):
    common = [
        "trainer.max_steps=9",
        "callbacks.model_checkpoint.every_n_train_steps=4",
        "callbacks.export=null",
        "trainer.val_check_interval=100",
    ]
    full = Recorder()
    _fit(tiny_cfg(*common, "paths.output_dir=" + str(tmp_path / "full")), full)
    killed = Recorder(stop_after=6)
    with pytest.raises(RuntimeError, match="simulated kill"):
        _fit(tiny_cfg(*common, "paths.output_dir=" + str(tmp_path / "resumed")), killed)
    assert (tmp_path / "resumed" / "checkpoints" / "last.ckpt").is_file()
    resumed = Recorder()
    _module, trainer = _fit(
        tiny_cfg(*common, "paths.output_dir=" + str(tmp_path / "resumed"), "ckpt_path=last"), resumed
    )
    assert trainer.global_step == 9 and min(resumed.losses) == 5  # restarted after step 4's checkpoint
    for step in range(5, 10):
        assert resumed.losses[step] == pytest.approx(full.losses[step], rel=1e-6, abs=1e-7), step


class Validations(Callback):
    """(step, val/ce_base, batches) of every validation."""

    def __init__(self):
        self.rows, self._batches = [], 0

    def on_validation_start(self, trainer, module):
        self._batches = 0

    def on_validation_batch_end(self, trainer, module, outputs, batch, batch_idx, dataloader_idx=0):
        self._batches += 1

    def on_validation_end(self, trainer, module):
        self.rows.append((trainer.global_step, float(trainer.callback_metrics["val/ce_base"]), self._batches))


def test_resume_redoes_the_validation_due_at_its_checkpoint_over_every_batch(tiny_cfg, tmp_path):
    """Step 8 checkpoints before it validates; a kill after that validation must not leave a hole at step 8,
    and the redone validation covers every batch (the checkpoint also holds step 4's finished validation,
    whose progress must not be taken for this one's)."""
    common = [
        "trainer.max_steps=12",
        "trainer.val_check_interval=4",
        "callbacks.model_checkpoint.every_n_train_steps=4",
        "callbacks.export=null",
    ]

    def fit(run, *callbacks, resume=False):
        cfg = tiny_cfg(*common, f"paths.output_dir={tmp_path / run}", *(["ckpt_path=last"] if resume else []))
        module, datamodule, trainer = build(cfg)
        trainer.callbacks += list(callbacks)
        trainer.fit(module, datamodule=datamodule, ckpt_path=resolve_ckpt_path(cfg))
        return trainer.fit_loop.epoch_loop._batches_that_stepped  # the step loggers write rows at

    (full, whole), (killed, resumed, after) = (Validations(), Recorder()), (Validations(), Validations(), Recorder())
    logged_steps = fit("full", full, whole)
    with pytest.raises(RuntimeError, match="simulated kill"):
        fit("resumed", killed, Recorder(stop_after=10))
    assert [s for s, *_ in full.rows] == [4, 8, 12] and [s for s, *_ in killed.rows] == [4, 8]
    assert {b for *_, b in full.rows} == {4}  # 16 validation rows, 4 per batch
    assert fit("resumed", resumed, after, resume=True) == logged_steps
    assert [s for s, *_ in resumed.rows] == [8, 12]  # step 8's validation again, then step 12's
    for (_, redone, batches), (_, original, _) in zip(resumed.rows, full.rows[1:], strict=True):
        assert batches == 4 and redone == pytest.approx(original, rel=1e-6)
    assert min(after.losses) == 9  # training restarted after step 8's checkpoint, as it was
    for step in range(9, 13):
        assert after.losses[step] == pytest.approx(whole.losses[step], rel=1e-6, abs=1e-7), step


def _tokenized_set(
    tmp_path,
    name="tokenized",
    first=0,
    n=12,
    layer_ids=(1, 3),
    dtype=torch.float32,
    target=None,
    topk=0,
    sources=None,
):
    """A small tokenized set of rows q{i} / a{i} (i in first..first+n) and its fp32 feature cache (with the
    target's top-k distribution when `topk`), made for `target` (the tiny Qwen3 by default). `sources`
    names the sources the rows are dealt to in turn (one source named `name` by default)."""
    import json

    from domino_train.data.feature_cache import build_feature_cache
    from domino_train.data.prepare import prepare
    from domino_train.data.sources import LocalFiles
    from domino_train.data.tokenize import tokenize

    rows = [
        {"messages": [{"role": "user", "content": f"q{i} " * 3}, {"role": "assistant", "content": f"a{i} " * 8}]}
        for i in range(first, first + n)
    ]
    sources = list(sources or [name])
    for k, source in enumerate(sources):
        (tmp_path / f"{source}.jsonl").write_text("\n".join(json.dumps(r) for r in rows[k :: len(sources)]))
    target = target or tiny_target()
    files = {source: LocalFiles(name=source, paths=[str(tmp_path / f"{source}.jsonl")]) for source in sources}
    prepare(files, tmp_path / f"{name}-prepared")
    tokenize(target, tmp_path / f"{name}-prepared", tmp_path / name, 96)
    build_feature_cache(target, tmp_path / name, tmp_path / f"{name}-features", list(layer_ids), dtype=dtype, topk=topk)
    return tmp_path / name, tmp_path / f"{name}-features"


def _three_steps_on(tokenized):
    """Overrides: three training steps on the tokenized set, nothing exported or checkpointed."""
    return [
        "data=tokenized",
        f"data.path={tokenized}",
        "data.val_size=2",
        "data.num_workers=0",
        "data.batch_size=2",
        "data.max_length=96",
        "trainer.max_steps=3",
        "callbacks.export=null",
        "callbacks.model_checkpoint=null",
        "trainer.val_check_interval=100",
    ]


def test_offline_features_give_the_online_loss(tmp_path, tiny_cfg):
    from domino_train.data.feature_cache import build_feature_cache

    target = tiny_target()
    tokenized, features = _tokenized_set(tmp_path, "tokenized")
    (tmp_path / "features").symlink_to(features)
    data = _three_steps_on(tokenized)
    online, offline = Recorder(), Recorder()
    _fit(tiny_cfg(*data), online)
    _fit(tiny_cfg(*data, f"data.features_path={tmp_path / 'features'}"), offline)
    for step in (1, 2, 3):
        assert offline.losses[step] == pytest.approx(online.losses[step], rel=1e-4), step
    # the default bf16 cache feeds an fp32 drafter: cast on the way in, rounding the loss only slightly
    build_feature_cache(target, tmp_path / "tokenized", tmp_path / "features16", [1, 3], dtype=torch.bfloat16)
    half = Recorder()
    _fit(tiny_cfg(*data, f"data.features_path={tmp_path / 'features16'}"), half)
    for step in (1, 2, 3):
        assert half.losses[step] == pytest.approx(online.losses[step], rel=2e-2), step
    with pytest.raises(ValueError, match="feature cache holds target layers"):
        _fit(tiny_cfg(*data, f"data.features_path={tmp_path / 'features'}", "drafter.num_draft_layers=3"))


def test_distribution_losses_train_offline_as_online(tmp_path, tiny_cfg):
    tokenized, features = _tokenized_set(tmp_path, "tokenized", topk=8)
    _, plain = _tokenized_set(tmp_path, "plain")
    data = [
        *_three_steps_on(tokenized),
        "train/loss=ce_tv",
        "train.loss.kl=0.5",
        "train.loss.topk=8",
    ]
    online, offline, ce = Recorder(), Recorder(), Recorder()
    _fit(tiny_cfg(*data), online)
    _fit(tiny_cfg(*data, f"data.features_path={features}"), offline)
    _fit(tiny_cfg(*data[:-3], f"data.features_path={features}"), ce)
    for step in (1, 2, 3):
        assert offline.losses[step] == pytest.approx(online.losses[step], rel=1e-4), step
        assert offline.losses[step] != pytest.approx(ce.losses[step], rel=1e-2), step  # the distances count
    with pytest.raises(ValueError, match=r"needs the target's distribution: build the feature caches with cache\.topk"):
        _fit(tiny_cfg(*data, f"data.features_path={plain}"))


DISTILL = [
    "data=tokenized",
    "data.labels=target",
    "data.val_size=3",
    "data.num_workers=0",
    "data.batch_size=2",
    "data.max_length=96",
    "trainer.max_steps=3",
    "callbacks.model_checkpoint=null",
    "trainer.val_check_interval=3",
    "drafter.draft_vocab_size=24",
    "drafter.init=target",
    "drafter.intermediate_size=null",
]


def test_distillation_draft_vocabulary_and_target_init_train_and_export(tmp_path, tiny_cfg):
    train_a, feats_a = _tokenized_set(tmp_path, "a", first=0, n=10)
    train_b, feats_b = _tokenized_set(tmp_path, "b", first=10, n=6)
    val, val_feats = _tokenized_set(tmp_path, "v", first=20, n=4)
    sets = f"[{{path: {train_b}, features_path: {feats_b}}}]"
    offline = [
        f"data.path={train_a}",
        f"data.features_path={feats_a}",
        f"data.more_sets={sets}",
        f"data.val_path={val}",
        f"data.val_features_path={val_feats}",
    ]
    rec = Recorder()
    module, trainer = _fit(tiny_cfg(*DISTILL, *offline), rec)
    data = module.trainer.datamodule
    assert len(data.train_set) == 16 and len(data.val_set) == 3
    assert data.manifest["validation"]["dropped_from_training"] == 0
    report = module.data_manifest["draft_vocab"]
    assert report["size"] == 24 and 0 < report["coverage_val"] <= report["coverage_train"] <= 1
    assert {"val/tau_final", "val/out_of_vocab", "train/out_of_vocab"} <= set(trainer.callback_metrics)
    drafter = DominoDrafter.from_pretrained(tmp_path / "run" / "export", target=tiny_target())
    assert drafter.config.draft_vocab_size == 24 and torch.equal(drafter.d2t, module.drafter.d2t.cpu())
    # The vocabulary is the 24 most frequent distilled labels of the 16 training rows.
    counts = module.trainer.datamodule.train_set.label_counts(drafter.config.vocab_size)
    assert counts[drafter.vocab.draft_to_target()].min() >= counts.sort(descending=True).values[23]
    # Online features give the same distilled labels, hence the same losses.
    online = Recorder()
    _fit(
        tiny_cfg(*DISTILL, f"data.path={train_a}", f"data.more_sets=[{{path: {train_b}}}]", f"data.val_path={val}"),
        online,
    )
    for step in (1, 2, 3):
        assert online.losses[step] == pytest.approx(rec.losses[step], rel=1e-4), step


def test_validation_reports_tau_per_source_of_its_rows(tmp_path, tiny_cfg):
    mixed, _ = _tokenized_set(tmp_path, "mixed", n=16, sources=("chat", "code"))
    module, trainer = _fit(tiny_cfg(*_three_steps_on(mixed), "data.val_size=6", "trainer.val_check_interval=3"))
    assert module.trainer.datamodule.val_set.sources == ["chat", "code"]
    metrics = trainer.callback_metrics
    for name in ("tau_base/chat", "tau_final/chat", "tau_base/code", "tau_final/code"):
        assert 1.0 <= float(metrics[f"val/{name}"]) <= 4.0, name


def test_training_rows_that_share_an_id_with_validation_rows_are_dropped(tmp_path, tiny_cfg):
    train_a, _ = _tokenized_set(tmp_path, "a", first=0, n=10)
    (tmp_path / "copy").mkdir()
    again, _ = _tokenized_set(tmp_path / "copy", "a", first=0, n=10)  # same source and ids
    data = ["data=tokenized", f"data.path={train_a}", f"data.val_path={again}", "data.val_size=4"]
    from domino_train.run.train import build

    _, datamodule, _ = build(tiny_cfg(*data))
    datamodule.setup()
    assert len(datamodule.train_set) == 6 and datamodule.manifest["validation"]["dropped_from_training"] == 4


def test_data_made_for_another_target_is_refused_before_training(tmp_path, tiny_cfg):
    llama, _ = _tokenized_set(tmp_path, "llama", n=4, target=tiny_target("llama"))  # same vocabulary and template
    wide, _ = _tokenized_set(tmp_path, "wide", n=4, target=tiny_target(vocab_size=1024))
    mine, mine_features = _tokenized_set(tmp_path, "mine", n=4)
    data = ["data=tokenized", "data.val_size=1"]
    with pytest.raises(
        ValueError,
        match=rf"^data set {llama} was made for tiny-llama \(512 tokens, chat template \w+\), not tiny-qwen3 ",
    ):
        build(tiny_cfg(*data, f"data.path={llama}"))
    with pytest.raises(ValueError, match=r"was made for tiny-qwen3 \(1024 tokens, .*\), not tiny-qwen3 \(512 tokens"):
        build(tiny_cfg(*data, f"data.path={mine}", f"data.val_path={wide}"))
    llama_features = tmp_path / "llama-features"
    with pytest.raises(ValueError, match=rf"^feature cache {llama_features} was made by tiny-llama"):
        build(tiny_cfg(*data, f"data.path={mine}", f"data.features_path={llama_features}"))
    build(tiny_cfg(*data, f"data.path={mine}", f"data.features_path={mine_features}"))
    build(tiny_cfg(*data, f"data.path={llama}", "data.check_target=false"))  # the same model under another name


def test_distillation_refuses_caches_without_next_ids(tmp_path, tiny_cfg):
    from safetensors.torch import load_file, save_file

    train_a, feats_a = _tokenized_set(tmp_path, "a", n=6)
    for shard in feats_a.glob("features-*.safetensors"):
        tensors = load_file(shard)
        del tensors["next_ids"]
        save_file(tensors, shard, metadata={"first_row": "0"})
    with pytest.raises(ValueError, match="holds no next_ids"):
        _fit(tiny_cfg(*DISTILL, f"data.path={train_a}", f"data.features_path={feats_a}"))


@pytest.mark.slow
def test_ddp_two_cpu_processes(tiny_cfg, tmp_path):
    cfg = tiny_cfg(
        "strategy=ddp_spawn",
        "trainer.devices=2",
        "trainer.max_steps=4",
        "callbacks.model_checkpoint.every_n_train_steps=2",
    )
    train(cfg)
    assert DominoDrafter.from_pretrained(tmp_path / "run" / "export").head is not None


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_zero_on_cpu_and_export_from_the_zero_directory(stage, tiny_cfg, tmp_path):
    cfg = tiny_cfg(
        f"strategy=deepspeed_stage_{stage}",  # one override: without CUDA it runs on the CPU
        "trainer.devices=2",
        "trainer.max_steps=4",
        "callbacks.model_checkpoint.every_n_train_steps=4",
    )
    train(cfg)
    zero_dir = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert zero_dir.is_dir() and any((zero_dir / "checkpoint").glob("*optim_states.pt"))
    from_zero = DominoDrafter.from_pretrained(export_checkpoint(zero_dir, tmp_path / "from_zero"))
    at_end = DominoDrafter.from_pretrained(Path(tmp_path / "run" / "export"))
    for (k, a), b in zip(at_end.state_dict().items(), from_zero.state_dict().values(), strict=True):
        assert torch.equal(a, b), k


def _card_step(export: Path) -> int:
    return int(re.search(r"^- step: (\d+)$", (export / "README.md").read_text(), re.M).group(1))


def test_an_epoch_steps_on_whole_accumulations_only(tiny_cfg, tmp_path):
    # 80 training rows / batch 4 = 20 batches an epoch; accumulating 3, the last 2 are left out: 6 steps an
    # epoch, as under DeepSpeed (test_every_strategy_takes_the_same_steps), not Lightning's 7th of 2 batches
    cfg = tiny_cfg("trainer.accumulate_grad_batches=3", "trainer.max_steps=-1", "trainer.max_epochs=2")
    _module, trainer = _fit(cfg)
    assert trainer.global_step == 12 and trainer.num_training_batches == 18


def test_an_accumulation_longer_than_an_epoch_is_refused_before_training(tiny_cfg, tmp_path):
    with pytest.raises(ValueError, match=r"accumulate_grad_batches=32 is more than the 20 batches an epoch holds"):
        train(tiny_cfg("trainer.accumulate_grad_batches=32"))
    assert not (tmp_path / "run" / "export").exists() and read_status(tmp_path / "run")["state"] == "FAILED"


def test_a_run_that_takes_no_optimizer_step_fails_and_exports_nothing(tiny_cfg, tmp_path):
    with pytest.raises(NoOptimizerStepError, match="without an optimizer step"):
        train(tiny_cfg("trainer.max_steps=0"))
    assert not (tmp_path / "run" / "export").exists() and read_status(tmp_path / "run")["state"] == "FAILED"


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp_spawn", "deepspeed_stage_2"])
def test_every_strategy_takes_the_same_steps(strategy, tiny_cfg, tmp_path):
    # 2 workers x 10 batches an epoch, accumulating 3: 3 steps an epoch (before: ddp 4, DeepSpeed 3)
    cfg = tiny_cfg(
        f"strategy={strategy}",
        "trainer.devices=2",
        "trainer.accumulate_grad_batches=3",
        "trainer.max_steps=-1",
        "trainer.max_epochs=2",
    )
    train(cfg)
    assert _card_step(tmp_path / "run" / "export") == 6


def test_a_gpu_trainer_without_a_gpu_is_refused_before_anything_starts(tiny_cfg, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("domino_train.run.train.build", lambda cfg: pytest.fail("built a trainer"))
    with pytest.raises(ValueError, match=r"^no GPU here \(trainer.accelerator=gpu\): add trainer=cpu$"):
        train(tiny_cfg("trainer=gpu"))


def test_bad_input_is_not_logged_with_a_traceback(tiny_cfg, caplog):
    with pytest.raises(ValueError, match="leaves none to train on"), caplog.at_level(logging.INFO):
        train(tiny_cfg("data.val_size=1000"))
    assert not [r for r in caplog.records if r.exc_info]  # the command says it in one line


@pytest.fixture
def cli(tmp_path, monkeypatch, tiny_overrides):
    """`cli(*overrides)`: run `domino-train` on the tiny experiment under tmp_path; returns how it ended."""
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    root, sigint = logging.getLogger(), signal.getsignal(signal.SIGINT)
    handlers, level = root.handlers[:], root.level

    def run(*overrides: str) -> SystemExit:
        monkeypatch.setattr(sys, "argv", ["domino-train", *tiny_overrides, f"paths.root_dir={tmp_path}", *overrides])
        with pytest.raises((SystemExit, KeyboardInterrupt)) as stop:  # an interrupt let through fails, not aborts
            train_cli.main()
        return stop.value

    yield run
    root.handlers[:], root.level = handlers, level  # Hydra pointed them at pytest's captured streams
    signal.signal(signal.SIGINT, sigint)  # Lightning ignores SIGINT once it has handled one


def test_ctrl_c_ends_domino_train_in_one_line_with_the_command_that_resumes_it(
    cli, tmp_path, monkeypatch, capsys, tiny_overrides
):
    def interrupted(self, batch, batch_idx):
        raise KeyboardInterrupt

    monkeypatch.setattr(DominoLitModule, "training_step", interrupted)
    stop = cli("run_id=first")
    assert getattr(stop, "code", None) == 130
    run_dir = tmp_path / "artifacts" / "runs" / "tiny" / "first"
    out, err = capsys.readouterr()
    assert f"run folder: {run_dir}" in out + err  # said at the start
    overrides = " ".join([*tiny_overrides, f"paths.root_dir={tmp_path}"])
    assert err.splitlines()[-1] == f"domino-train: interrupted; resume with: domino-train {overrides} run_id=first"
    assert read_status(run_dir)["state"] == "STOPPED"
    assert getattr(cli(), "code", None) == 130  # no run_id given: the launch time names the folder, and the hint
    (run_id,) = {p.name for p in run_dir.parent.iterdir()} - {"first"}
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"paths.root_dir={tmp_path} run_id={run_id}")


def test_an_unwritable_run_folder_ends_domino_train_in_one_line(cli, tmp_path):
    (tmp_path / "file").write_text("")
    stop = cli(f"hydra.run.dir={tmp_path / 'file' / 'run'}")
    assert str(stop.code) == (
        f"domino-train: error: cannot write the run folder {tmp_path / 'file' / 'run'} (Not a directory): choose a "
        "writable place (hydra.run.dir=DIR, or paths.root_dir=DIR / $DOMINO_ROOT for the default folders)"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.accumulate_grad_batches=16"], "trainer.accumulate_grad_batches=16 is more than the 10 batches"),
        (  # Lightning counts DeepSpeed's steps inside an epoch only: 2 batches never complete one of 4
            ["trainer.accumulate_grad_batches=4", "+trainer.limit_train_batches=2", "trainer.max_epochs=2"],
            "training ended without an optimizer step",
        ),
    ],
    ids=["refused_up_front", "no_step_taken"],
)
def test_a_deepspeed_run_that_would_take_no_step_fails_in_one_line(overrides, message, tiny_cfg, tmp_path):
    """The issue's run: 2 workers of 10 batches an epoch, accumulating more, stepped never and exported an
    untrained drafter with exit 0. Now it fails, and the worker's error comes back as that one error, not as
    the worker's traceback."""
    cfg = tiny_cfg("strategy=deepspeed_stage_2", "trainer.devices=2", "trainer.max_steps=-1", *overrides)
    with pytest.raises(ValueError) as refused:
        train(cfg)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    assert not (tmp_path / "run" / "export").exists() and read_status(tmp_path / "run")["state"] == "FAILED"
