"""The project installs as a wheel that works outside the checkout: its package list is complete, the
Hydra tree travels inside it (`domino_conf`), and every command composes its config from another folder."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_every_package_of_the_checkout_is_listed():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for top in ("inference", "domino_train")
        for p in (REPO / top).rglob("__init__.py")
    }
    assert found | {"domino_conf"} == listed


def test_data_is_documentation_not_a_package():
    """`data/` describes the data sets (a README per set) and holds no Python: never a package named `data`."""
    data = REPO / "data"
    assert not list(data.rglob("*.py"))
    assert all((folder / "README.md").is_file() for folder in [data, *(p for p in data.iterdir() if p.is_dir())])


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel built from this checkout, installed into a bare folder (dependencies come from this venv)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"  # the checkout's files (tracked or not ignored): the build leaves no trace in it
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
    for name in subprocess.run(listed, cwd=REPO, check=True, capture_output=True, text=True).stdout.splitlines():
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", root / "dist", source], check=True)
    (wheel,) = (root / "dist").glob("*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", root / "site", wheel], check=True)
    elsewhere = root / "elsewhere"
    (elsewhere / "mine" / "experiment").mkdir(parents=True)
    (elsewhere / "mine" / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - tiny\ntask_name: my_own_experiment\n"
    )
    env = {**os.environ, "PYTHONPATH": str(root / "site"), "OMP_NUM_THREADS": "1"}
    env.pop("DOMINO_ROOT", None)
    return root, elsewhere, env


def _run(installed, *command):
    root, elsewhere, env = installed
    out = subprocess.run(command, cwd=elsewhere, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow
def test_the_installed_wheel_runs_every_command_from_another_folder(installed):
    root, elsewhere, _ = installed
    where = _run(
        installed,
        sys.executable,
        "-c",
        "import domino_conf, inference; print(domino_conf.CONF_DIR, inference.__file__)",
    )
    assert where.split()[0] == str(root / "site" / "domino_conf") and str(REPO) not in where
    bin_dir = root / "site" / "bin"
    train = _run(installed, sys.executable, "-m", "domino_train", "experiment=tiny", "--cfg", "job", "--resolve")
    assert "task_name: tiny" in train and f"artifacts_dir: {elsewhere}/artifacts" in train  # outputs stay here
    assert "task_name: tiny" in _run(installed, bin_dir / "domino-train", "experiment=tiny", "--cfg", "job")
    assert "stages:" in _run(installed, bin_dir / "domino-data", "--cfg", "job")
    assert "methods:" in _run(installed, bin_dir / "domino-decode", "preset=smollm2", "--cfg", "job")
    mine = _run(installed, bin_dir / "domino-train", "--config-dir", "mine", "experiment=mine", "--cfg", "job")
    assert "task_name: my_own_experiment" in mine  # a user's own folder layers on the packaged tree
