"""`one_line_errors`: bad input ends a command in one line, also when Hydra's instantiate wraps it."""

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from inference.cli.errors import one_line_errors


def test_a_target_that_does_not_load_through_instantiate_ends_in_one_line_naming_it(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text("{not json")
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    load = one_line_errors("domino-data")(
        lambda: instantiate({"_target_": "inference.load_target", "spec": str(tmp_path)})
    )
    with pytest.raises(SystemExit) as stop:
        load()
    message = str(stop.value.code)
    assert message.startswith(f"domino-data: error: target '{tmp_path}': the local folder does not load"), message
    assert "\n" not in message and "Error in call to target" not in message


def test_a_wrapped_error_that_is_not_bad_input_keeps_its_traceback(monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    crash = one_line_errors("domino-data")(lambda: instantiate({"_target_": "builtins.divmod", "_args_": [1, 0]}))
    with pytest.raises(InstantiationException):
        crash()


def test_inside_a_submitit_job_bad_input_stays_an_exception_for_the_launcher(monkeypatch, capsys):
    """submitit pickles a job's exception for the launcher; a SystemExit would leave it waiting for a result."""

    def refuse():
        raise ValueError("data made for another target")

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setenv("SUBMITIT_FOLDER", "/tmp/job")
    with pytest.raises(ValueError, match="another target"):
        one_line_errors("domino-train")(refuse)()
    assert capsys.readouterr().err.strip() == "domino-train: error: data made for another target"
    monkeypatch.delenv("SUBMITIT_FOLDER")
    with pytest.raises(SystemExit):
        one_line_errors("domino-train")(refuse)()
