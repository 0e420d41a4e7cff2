import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from domino_train.data.backends import LocalBackend, OpenAIBackend, Request, Response
from domino_train.data.prepare import prepare
from domino_train.data.regenerate import regenerate, request_seed
from domino_train.data.shards import list_shards, read_shards
from domino_train.data.sources import LocalFiles
from inference.decoding.batch_generation import generate_batch
from inference.decoding.sampling import SamplingParams


@pytest.fixture
def prepared(tmp_path, tiny_corpus):
    prepare({"t": LocalFiles(name="t", paths=[str(tiny_corpus)])}, tmp_path / "prepared")
    return tmp_path / "prepared"


def _backend(target):
    return LocalBackend(target, SamplingParams(temperature=1.0), max_new_tokens=6, batch_size=4)


class _Echo:
    """Answers every request from what it was shown, and remembers every request."""

    max_context = None

    def __init__(self):
        self.seen = []

    def prompt_tokens(self, messages):
        return None

    def generate(self, requests):
        self.seen += requests
        return [
            Response(text=f"re[{r.messages[-1]['content']}]#{len(r.messages)}", finish_reason="stop", num_tokens=2)
            for r in requests
        ]


def test_turn_by_turn_with_the_conversation_so_far(prepared, tmp_path):
    echo = _Echo()
    summary = regenerate(echo, prepared, tmp_path / "r", {"t": 1}, 6, seed=3, shard_size=4)
    by_id = {r["id"]: r for r in read_shards(tmp_path / "r")}
    assert summary["rows_in"] == summary["rows_out"] == 6 and summary["turns"] == 7
    assert by_id["t/b"]["conversations"] == [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "re[2+2?]#1"},
        {"role": "user", "content": "and 3+3?"},
        {"role": "assistant", "content": "re[and 3+3?]#3"},  # saw its own first answer, not the source's "4"
    ]
    second_turn = [r for r in echo.seen if r.messages[-1]["content"] == "and 3+3?"][0]
    assert second_turn.messages[1] == {"role": "assistant", "content": "re[2+2?]#1"}
    assert by_id["t/c"]["conversations"][:2] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "why?"},
    ]
    assert by_id["t/d"]["finish_reasons"] == ["stop"]  # a prompt without an answer gets one


def test_local_backend_answers_with_the_targets_generation(qwen_target, prepared, tmp_path):

    backend = _backend(qwen_target)
    regenerate(backend, prepared, tmp_path / "r", {"t": 1}, 6, seed=3, shard_size=4)
    rows = {r["id"]: r for r in read_shards(tmp_path / "r")}
    row = rows["t/a"]
    prompt = qwen_target.chat_ids(row["conversations"][:1])
    gen = torch.Generator().manual_seed(request_seed(3, "t/a", 0))
    expected = generate_batch(qwen_target, [prompt], 6, SamplingParams(temperature=1.0), [gen])[0]
    assert row["conversations"][1]["content"] == qwen_target.tokenizer.decode(
        expected.token_ids, skip_special_tokens=True
    )


class _Flaky:
    """A backend that dies after `fail_after` generate calls, like a killed job."""

    def __init__(self, inner, fail_after):
        self.inner, self.calls, self.fail_after = inner, 0, fail_after
        self.max_context, self.prompt_tokens = inner.max_context, inner.prompt_tokens

    def generate(self, requests):
        self.calls += 1
        if self.calls > self.fail_after:
            raise KeyboardInterrupt("killed")
        return self.inner.generate(requests)


def test_a_killed_run_resumes_to_the_same_shards(qwen_target, prepared, tmp_path):
    regenerate(_backend(qwen_target), prepared, tmp_path / "full", {"t": 1}, 6, seed=3, shard_size=2)
    with pytest.raises(KeyboardInterrupt):
        regenerate(_Flaky(_backend(qwen_target), 3), prepared, tmp_path / "resumed", {"t": 1}, 6, seed=3, shard_size=2)
    done = list_shards(tmp_path / "resumed")
    assert 0 < len(done) < 3
    regenerate(_backend(qwen_target), prepared, tmp_path / "resumed", {"t": 1}, 6, seed=3, shard_size=2)
    full, resumed = list_shards(tmp_path / "full"), list_shards(tmp_path / "resumed")
    assert [p.read_text() for p in resumed] == [p.read_text() for p in full]
    assert not list((tmp_path / "resumed").glob(".*tmp"))


def test_resuming_with_other_settings_is_refused(qwen_target, prepared, tmp_path):
    regenerate(_backend(qwen_target), prepared, tmp_path / "r", {"t": 1}, 6, seed=3, shard_size=4)
    with pytest.raises(ValueError, match=r"other settings or input \(seed: 3 -> 4\); pass overwrite=true"):
        regenerate(_backend(qwen_target), prepared, tmp_path / "r", {"t": 1}, 6, seed=4, shard_size=4)


def test_other_prepared_rows_are_never_resumed_into(prepared, tmp_path):
    """The same command on another input: the old regeneration is refused, or redone with overwrite."""
    regenerate(_Echo(), prepared, tmp_path / "r", {"t": 1}, 6, shard_size=4)
    first = [r["id"] for r in read_shards(tmp_path / "r")]
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "z", "conversations": [{"from": "human", "value": "new question"}]}))
    prepare({"t": LocalFiles(name="t", paths=[str(other)])}, prepared)
    with pytest.raises(
        ValueError, match=r"/r was made with other settings or input \(input_sha256: .* -> .*\); pass overwrite=true"
    ):
        regenerate(_Echo(), prepared, tmp_path / "r", {"t": 1}, 6, shard_size=4)
    assert [r["id"] for r in read_shards(tmp_path / "r")] == first  # refused: untouched
    dependent = tmp_path / "tokenized"
    dependent.mkdir()
    summary = regenerate(
        _Echo(), prepared, tmp_path / "r", {"t": 1}, 6, shard_size=4, overwrite=True, dependents=[dependent]
    )
    assert summary["rows_in"] == 1 and [r["id"] for r in read_shards(tmp_path / "r")] == ["t/z"]
    assert not dependent.exists()


def test_context_rule_and_failures_are_counted(qwen_target, prepared, tmp_path):
    backend = _backend(qwen_target)
    backend.max_context = 40  # every prompt with more than 34 tokens is over the limit
    summary = regenerate(backend, prepared, tmp_path / "r", {"t": 1}, 6, shard_size=8)
    assert summary.get("dropped_prompt_too_long", 0) > 0
    assert summary["rows_out"] + summary["dropped_prompt_too_long"] + summary.get("dropped_empty_response", 0) == 6

    class Failing:
        max_context, prompt_tokens = None, staticmethod(lambda m: None)

        def generate(self, requests):
            return [Response(error="HTTP 400") for _ in requests]

    with pytest.raises(ValueError, match="kept no row of 6: 6 dropped as backend_error; check that the backend"):
        regenerate(Failing(), prepared, tmp_path / "f", {"t": 2}, 6, shard_size=8)
    assert json.loads((tmp_path / "f" / "summary.json").read_text())["dropped_backend_error"] == 6
    assert not list_shards(tmp_path / "f")  # nothing kept: a rerun once the backend answers redoes every shard
    echoed = regenerate(_Echo(), prepared, tmp_path / "f", {"t": 2}, 6, shard_size=8)
    assert echoed["rows_out"] == 6


class _Handler(BaseHTTPRequestHandler):
    bodies: list = []
    fail_first = 1

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.bodies.append(body)
        if _Handler.fail_first > 0:
            _Handler.fail_first -= 1
            self.send_response(503)
            self.end_headers()
            return
        reply = {
            "choices": [{"message": {"content": "echo: " + body["messages"][-1]["content"]}, "finish_reason": "stop"}],
            "usage": {"completion_tokens": 3, "prompt_tokens": 11},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_backend_against_a_local_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = OpenAIBackend(
            f"http://127.0.0.1:{server.server_port}/v1",
            "m",
            SamplingParams(temperature=0.7, top_k=20),
            32,
            concurrency=2,
            max_retries=2,
            chat_template_kwargs={"enable_thinking": False},
        )
        out = backend.generate([Request([{"role": "user", "content": f"q{i}"}], seed=i) for i in range(3)])
    finally:
        server.shutdown()
    assert [r.text for r in out] == ["echo: q0", "echo: q1", "echo: q2"] and all(r.num_tokens == 3 for r in out)
    assert all(r.prompt_tokens == 11 for r in out)  # the server's own count, checked against the template's
    body = _Handler.bodies[-1]
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["top_k"] == 20
    assert body["max_tokens"] == 32 and body["temperature"] == 0.7
    refused = OpenAIBackend("http://127.0.0.1:9/v1", "m", SamplingParams(), 8, max_retries=0)
    assert refused.generate([Request([{"role": "user", "content": "x"}], seed=0)])[0].error


def test_local_backend_batches_sorted_prompts_within_both_caps(qwen_target):
    backend = LocalBackend(qwen_target, SamplingParams(), max_new_tokens=10, batch_size=3, max_batch_tokens=60)
    lengths = [5, 40, 8, 6, 7, 9, 12]
    batches = backend.batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert [lengths[b[0]] for b in batches] == sorted(lengths[b[0]] for b in batches)  # shortest first
    for b in batches:
        assert len(b) <= 3 and (len(b) == 1 or (max(lengths[i] for i in b) + 10) * len(b) <= 60)
    assert [1] in batches  # 40 + 10 tokens: alone under the token cap
