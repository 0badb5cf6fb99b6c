"""Data-parallel CPU generation gives the single-process outputs and fails cleanly."""

from __future__ import annotations

import pytest

from tests.task.test_transformers_backend import MISSING, _model, _prompts, _tokenizer

pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"needs the task-env ML stack; missing: {MISSING}"
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    _tokenizer(path)
    _model(path, "llama")
    return path


def test_workers_give_the_single_process_outputs(tiny_model, monkeypatch):
    from posttrainbench.task.benchmarks.base import GenerationSettings
    from posttrainbench.task.evaluation.backends import TransformersBackend, make_backend
    from posttrainbench.task.evaluation.cpu_workers import DataParallelBackend

    monkeypatch.setenv("PTB_EVAL_WORKERS", "3")
    prompts = _prompts(11)
    settings = GenerationSettings(max_new_tokens=12, stop=("w5",))
    backend = make_backend(str(tiny_model), batch_size=2)
    assert isinstance(backend, DataParallelBackend) and backend.workers == 3
    finished: list[int] = []  # the live progress: answers as the workers finish them
    try:
        ours = backend.generate(prompts, settings, seed=0, progress=finished.append)
    finally:
        backend.close()
    assert sum(finished) == len(prompts)
    single: list[int] = []
    assert ours == TransformersBackend(str(tiny_model), batch_size=4).generate(
        prompts, settings, seed=0, progress=single.append
    )
    assert (
        sum(single) == len(prompts) and len(single) > 1
    )  # one report per finished row, not one at the end


def test_auto_uses_one_process_on_request_and_workers_for_small_models(tiny_model, monkeypatch):
    from posttrainbench.task.evaluation.cpu_workers import resolve_workers

    monkeypatch.setenv("PTB_EVAL_WORKERS", "1")
    assert resolve_workers(str(tiny_model)) == 1
    monkeypatch.setenv("PTB_EVAL_WORKERS", "auto")
    assert resolve_workers(str(tiny_model)) >= 1


def test_a_model_that_fails_in_the_workers_raises_model_load_error(tiny_model, tmp_path):
    import shutil

    from posttrainbench.task.benchmarks.base import GenerationSettings
    from posttrainbench.task.evaluation.backends import ModelLoadError
    from posttrainbench.task.evaluation.cpu_workers import DataParallelBackend

    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    for weights in broken.glob("*.safetensors"):
        weights.write_bytes(b"not weights")  # the tokenizer loads, the model does not
    backend = DataParallelBackend(str(broken), workers=2)
    with pytest.raises(ModelLoadError):
        backend.generate(["w1 w2"], GenerationSettings(max_new_tokens=4))
    assert backend._pool is None  # workers were stopped
