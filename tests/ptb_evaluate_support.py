"""Run PostTrainBench's own ``evaluate.py`` offline on CPU (for
tests/task/test_ptb_evaluate_agreement.py).

``python -m tests.ptb_evaluate_support SCRIPT BENCHMARK [evaluate.py's arguments]``, run
in a working directory holding PostTrainBench's ``templates/``, executes the pinned copy
*SCRIPT* (tests/fixtures/posttrainbench/src/eval/tasks/<id>/evaluate.py) as ``__main__``
with one change to its text: the provider ``vllm/`` becomes inspect's local ``hf/``. What
else has to be set for inspect's ``hf`` provider to send what PostTrainBench's vLLM
server sends is set here, on the provider, never in the script (see :func:`align_hf`):

* the dataset loader reads the local data instead of the Hugging Face hub;
* ``enable_thinking=True``: vLLM passes no ``enable_thinking`` to the chat template, so
  the template's default (``true``) applies; inspect's ``hf`` passes
  ``enable_thinking=None``, which the template sees as defined (and false);
* the vLLM-only model args (``gpu_memory_utilization``, ``enable_auto_tool_choice``,
  ``tool_call_parser``) are not handed to ``from_pretrained``; ``chat_template`` is
  dropped by ``hf`` itself (the test writes the forced template into the tokenizer);
* tools reach the template as vLLM's chat endpoint hands them over (OpenAI's
  ``{"type": "function", "function": {...}}``, ``tool.model_dump()``), not as inspect's
  ``ToolInfo`` dicts.

It prints the path of inspect's log on its last line; with ``PTB_PROMPTS_OUT`` set, it
appends each prompt the provider renders to that file (JSONL, ``{"chat": ...}``).
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path


def ptb_model_view(base: Path, target: Path, template: Path) -> Path:
    """Copy *base* to *target* as PostTrainBench's vLLM run sees it, for inspect's ``hf/``
    provider: *template* (PostTrainBench's forced one) as the tokenizer's own, since ``hf``
    ignores the ``chat_template`` argument, and greedy decoding through the generation
    config (``top_k`` 1; ``hf`` always samples). Our posttrainbench variant reads the same."""
    import shutil

    shutil.copytree(base, target)
    for name in ("chat_template.jinja", "chat_template.json"):
        (target / name).unlink(missing_ok=True)
    shutil.copyfile(template, target / "chat_template.jinja")
    tok_config = target / "tokenizer_config.json"
    config = json.loads(tok_config.read_text())
    config.pop("chat_template", None)
    tok_config.write_text(json.dumps(config, indent=2))
    gen_path = target / "generation_config.json"
    gen = json.loads(gen_path.read_text()) if gen_path.is_file() else {}
    gen.update(do_sample=True, top_k=1)
    gen_path.write_text(json.dumps(gen, indent=2))
    return target


PROVIDER_FROM = 'f"vllm/{args.model_path}"'
PROVIDER_TO = 'f"hf/{args.model_path}"'
VLLM_ONLY_ARGS = ("gpu_memory_utilization", "enable_auto_tool_choice", "tool_call_parser")
PROMPTS_ENV = "PTB_PROMPTS_OUT"  # where to append each rendered prompt (JSONL)
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def provider_changed(source: str) -> str:
    """The script's text with its one provider string changed (it must occur exactly once)."""
    assert source.count(PROVIDER_FROM) == 1, "the script's provider string moved"
    assert "vllm/" not in source.replace(PROVIDER_FROM, ""), "another vllm/ provider"
    return source.replace(PROVIDER_FROM, PROVIDER_TO)


# ---------- local data for inspect_evals' hf_dataset calls ----------


def gsm8k_hf_dataset(
    path, split, sample_fields=None, data_dir=None, shuffle=False, seed=None, limit=None,
    auto_id=False, **kwargs,
):  # fmt: skip
    """inspect's ``hf_dataset`` for ``openai/gsm8k`` on the local files (as tests/task/test_gsm8k.py)."""
    import numpy as np
    from inspect_ai.dataset import MemoryDataset
    from inspect_ai.dataset._util import data_to_samples, record_to_sample_fn

    assert (path, data_dir, kwargs) == ("openai/gsm8k", "main", {})
    lines = (SHARED_DATA / "gsm8k" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    if shuffle:
        records = [records[i] for i in np.random.default_rng(seed).permutation(len(records))]
    if limit:
        records = records[:limit]
    samples = data_to_samples(records, record_to_sample_fn(sample_fields), auto_id)
    return MemoryDataset(samples=samples, name=path, location=path)


def bfcl_records() -> list[dict]:
    """The bfcl-eval wheel's exec_simple in the Hugging Face record layout, read back
    through pyarrow's JSON reader as ``datasets`` reads it (as test_bfcl_inspect_parity.py)."""
    import bfcl_eval
    import pyarrow.json as paj

    from posttrainbench.task.benchmarks.bfcl.source import NAME

    root = Path(bfcl_eval.__file__).parent / "data" / "unused_datasets"

    def rows(p: Path) -> list[dict]:
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]

    answers = {a["id"]: a for a in rows(root / "possible_answer" / NAME)}
    records = [
        {
            "id": q["id"],
            "question": q["question"],
            "function": q["function"],
            "execution_result_type": answers[q["id"]]["execution_result_type"],
            "ground_truth": answers[q["id"]]["ground_truth"],
        }
        for q in rows(root / "question" / NAME)
    ]
    body = "\n".join(json.dumps(r) for r in records).encode()
    return paj.read_json(io.BytesIO(body)).to_pylist()


def local_data(benchmark: str) -> None:
    """Point the benchmark's inspect_evals task at the local data."""
    import importlib

    if benchmark == "gsm8k":  # (the package's attribute gsm8k is the task function)
        importlib.import_module("inspect_evals.gsm8k.gsm8k").hf_dataset = gsm8k_hf_dataset
    elif benchmark == "bfcl":
        from inspect_ai.dataset import MemoryDataset

        module = importlib.import_module("inspect_evals.bfcl.bfcl")
        records = bfcl_records()

        def hf_dataset(path, *, split, sample_fields, revision, name):
            assert (path, split, name) == (module.DATASET_PATH, "train", "exec_simple")
            return MemoryDataset([sample_fields(r) for r in records])

        module.dataset.hf_dataset = hf_dataset  # type: ignore[attr-defined]
    else:
        raise ValueError(benchmark)


# ---------- inspect's hf provider made to send what vLLM sends ----------


def vllm_tool(tool: dict) -> dict:
    """An inspect ToolInfo dict as vLLM's chat endpoint gives it to the template:
    ``ChatCompletionToolsParam(type, function(name, description, parameters)).model_dump()``
    of the OpenAI tool inspect's vLLM provider sends (``openai_chat_tool_param``)."""
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": tool["parameters"],
        },
    }


def align_hf() -> None:
    from inspect_ai.model._providers import hf

    auto_model = hf.AutoModelForCausalLM

    class CpuModel:
        """``from_pretrained`` without ``device_map="cpu"`` (the same placement; a
        device map needs ``accelerate``, which the task environment does not have)."""

        @staticmethod
        def from_pretrained(path, device_map=None, **kwargs):
            assert device_map == "cpu", device_map
            return auto_model.from_pretrained(path, **kwargs)

    init = hf.HuggingFaceAPI.__init__

    def __init__(self, model_name, *args, **model_args):
        for name in VLLM_ONLY_ARGS:
            model_args.pop(name, None)
        model_args.setdefault("enable_thinking", True)
        hf.AutoModelForCausalLM = CpuModel
        try:
            init(self, model_name, *args, **model_args)
        finally:
            hf.AutoModelForCausalLM = auto_model
        apply = self.tokenizer.apply_chat_template

        def apply_chat_template(messages, *a, tools=None, **kw):
            if tools:
                tools = [vllm_tool(t) for t in tools]
            chat = apply(messages, *a, tools=tools, **kw)
            if os.environ.get(PROMPTS_ENV):
                with open(os.environ[PROMPTS_ENV], "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"chat": chat}) + "\n")
            return chat

        self.tokenizer.apply_chat_template = apply_chat_template

    hf.HuggingFaceAPI.__init__ = __init__


def main(argv: list[str]) -> int:
    script, benchmark, *args = argv
    local_data(benchmark)
    align_hf()
    source = provider_changed(Path(script).read_text(encoding="utf-8"))
    sys.argv = [script, *args]
    exec(compile(source, script, "exec"), {"__name__": "__main__", "__file__": script})
    logs = sorted(Path("logs").glob("*.json"), key=os.path.getmtime)
    print(logs[-1].resolve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
