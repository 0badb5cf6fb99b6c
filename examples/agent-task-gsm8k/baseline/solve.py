"""Baseline GSM8K solver for the agent-task example: deliberately weak and deterministic.

Reads JSONL {"id", "question"} on stdin and writes JSONL {"id", "answer"} on stdout; the
answer is the sum of every number in the question. The agent's job is to do better.
"""

import json
import re
import sys

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def solve(question: str) -> str:
    """Add up the numbers in *question* (right only by luck)."""
    total = sum(float(token.replace(",", "")) for token in NUMBER.findall(question))
    return str(int(total)) if total == int(total) else str(total)


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            item = json.loads(line)
            print(json.dumps({"id": item["id"], "answer": solve(item["question"])}), flush=True)


if __name__ == "__main__":
    main()
