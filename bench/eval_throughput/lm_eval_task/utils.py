"""doc_to_text for the bench task: the exact user message of posttrainbench's Gsm8k."""

from posttrainbench.benchmarks.base import Sample
from posttrainbench.benchmarks.gsm8k.benchmark import Gsm8k

_BENCH = Gsm8k()


def doc_to_text(doc: dict) -> str:
    """The single user message our benchmark sends (lm-eval wraps it in the chat template)."""
    sample = Sample(id=str(doc["id"]), category=str(doc["category"]), data=doc["data"])
    (message,) = _BENCH.build_messages(sample)
    return message["content"]
