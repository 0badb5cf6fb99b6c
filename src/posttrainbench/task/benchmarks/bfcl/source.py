"""BFCL ``exec_simple``, the split PostTrainBench evaluates, from the ``bfcl-eval`` wheel.

PostTrainBench runs inspect_evals' ``bfcl()``, which loads
``hf_dataset("gorilla-llm/Berkeley-Function-Calling-Leaderboard", name="exec_simple",
split="train", revision="1bf8bbc3c0e35d04d00339c223a3fd653aa195ac")``: BFCL v3's
``exec_simple`` file, one record per line with ``question``, ``function``,
``execution_result_type`` and ``ground_truth``. The offline wheel we use keeps the same
100 items, retired from the leaderboard, under ``bfcl_eval/data/unused_datasets/``,
with the ground truth moved to ``possible_answer/``; this source joins the two by id.

What we checked: applying inspect_evals' ``record_to_sample`` to these records gives
the same inputs, targets and tool metadata for all 100 items as it gives for
``BFCL_v3_exec_simple.json`` in ShishirPatil/gorilla at 9c72e6ef (2024-09-19, BFCL v3's
release) and 6da26da9 (2025-01-11, the last version with inline ground truths), and
the item shown in inspect_evals' README (``exec_simple_0``) is identical. What could
still differ: the Hugging Face revision itself cannot be fetched here, so its bytes are
not compared.

One effect of loading through Hugging Face ``datasets`` is reproduced: the Arrow
schema that JSON loading infers makes ``function[].parameters.properties`` one struct
over the whole file, its fields in the order each parameter name first appears, and
every record then lists its own parameters in that order (with None for the others,
which inspect_evals drops). That reorders the parameters of 8 items (exec_simple_70,
71, 76, 77, 88, 89, 92, 93), which changes the tool JSON the model sees. Each sample therefore keeps ``tools``,
the OpenAI tool list built from the docs in that order (:func:`arrow_order`; tests
compare it with pyarrow's own reader and inspect's conversion), as JSON text because
prepared splits are written with sorted keys. ``function`` keeps BFCL's docs (for
contamination checks), ``ground_truth`` the call string. Ids (``exec_simple_N``) are
BFCL's.
"""

from __future__ import annotations

from typing import Any

from ..base import Sample
from ..fetch import Fetcher
from ..rows import Row
from ..source import DataSource, RawFile, SourceFile, wheel_file
from .tools import tools_json

REQUIREMENT = "bfcl-eval==2026.3.23"
CATEGORY = "exec_simple"
NAME = f"BFCL_v4_{CATEGORY}.json"  # JSON Lines, despite the suffix
DATA_DIR = "bfcl_eval/data/unused_datasets"
HF_DATASET = "gorilla-llm/Berkeley-Function-Calling-Leaderboard"
HF_NAME = "exec_simple"
HF_REVISION = "1bf8bbc3c0e35d04d00339c223a3fd653aa195ac"
QUESTIONS = SourceFile(
    "questions",
    f"{DATA_DIR}/question/{NAME}",
    ("id", "question", "function"),
    layouts=(NAME, f"question/{NAME}", f"unused_datasets/question/{NAME}"),
)
ANSWERS = SourceFile(
    "answers",
    f"{DATA_DIR}/possible_answer/{NAME}",
    ("id", "ground_truth"),
    layouts=(f"possible_answer/{NAME}", f"unused_datasets/possible_answer/{NAME}"),
)


def _first_appearance(records: list[Any], order: dict[str, list[str]], path: str) -> None:
    for value in records:
        if isinstance(value, dict):
            keys = order.setdefault(path, [])
            for key, inner in value.items():
                if key not in keys:
                    keys.append(key)
                _first_appearance([inner], order, f"{path}.{key}")
        elif isinstance(value, list):
            _first_appearance(value, order, f"{path}[]")


def _reorder(value: Any, order: dict[str, list[str]], path: str) -> Any:
    if isinstance(value, dict):
        keys = order.get(path, [])
        ranked = sorted(value, key=lambda k: keys.index(k) if k in keys else len(keys))
        return {k: _reorder(value[k], order, f"{path}.{k}") for k in ranked}
    if isinstance(value, list):
        return [_reorder(v, order, f"{path}[]") for v in value]
    return value


def arrow_order(functions_per_record: list[list[dict]]) -> list[list[dict]]:
    """Each record's function docs with every object's keys in Arrow-schema order.

    pyarrow's JSON reader (what ``datasets`` uses) builds one struct type per path,
    fields in first-appearance order over the file; ``to_pylist`` then yields every
    record's dicts in that order. Keys a record lacks are left out here (Arrow gives
    None, which inspect_evals drops).
    """
    order: dict[str, list[str]] = {}
    _first_appearance(functions_per_record, order, "")
    return [_reorder(fs, order, "") for fs in functions_per_record]


class BfclSource(DataSource):
    benchmark_id = "bfcl"
    provenance = (
        f"PyPI {REQUIREMENT}: {DATA_DIR}/{{question,possible_answer}}/{NAME} "
        f"(= HF {HF_DATASET} {HF_NAME} @ {HF_REVISION[:8]}, as inspect_evals loads it)"
    )
    files = (QUESTIONS, ANSWERS)

    def download(self, fetcher: Fetcher) -> dict[str, RawFile]:
        return {f.role: wheel_file(fetcher, REQUIREMENT, f) for f in self.files}

    def build(self, rows: dict[str, list[Row]]) -> dict[str, list[Sample]]:
        answers = {a["id"]: a["ground_truth"] for a in rows["answers"]}
        questions = rows["questions"]
        functions = arrow_order([q["function"] for q in questions])
        test = []
        for q, function in zip(questions, functions):
            if q["id"] not in answers:
                raise ValueError(f"{NAME}: no possible answer for {q['id']}")
            if len(q["question"]) != 1 or len(answers[q["id"]]) != 1:
                raise ValueError(f"{NAME}: {q['id']} is not one turn with one answer")
            test.append(
                Sample(
                    id=q["id"],
                    category=CATEGORY,
                    data={
                        "question": q["question"][0],  # inspect's input: the messages
                        "function": q["function"],  # BFCL's docs (key order not kept)
                        "tools": tools_json(function),  # what the template renders, in order
                        "ground_truth": answers[q["id"]][0],  # "f(a=1, b='x')"
                    },
                )
            )
        return {"test": test}
