"""A scripted optimizer for agent tasks (stdlib only; runs as the agent's user).

1. ``GET /status``; 2. evaluate the baseline commit on the first viewable split;
3. copy the overlay's files into the repository and commit them; 4. evaluate the new
commit on every evaluable split (the whole split, or what the budget allows); 5. in
reward mode ``submit``, submit the commit that did better on the selection split (or the
viewable one). Every response is saved to ``--report``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def call(url: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """GET (no body) or POST JSON; an HTTP error comes back as ``{"error", "detail"}``."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=900) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        return {"error": exc.code, "detail": exc.read().decode(errors="replace")}


def git(repo: Path, *args: str) -> str:
    """Run git in the repository and return its stdout."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def affordable(info: dict[str, Any]) -> int:
    """How many samples one evaluation of this split may score now (0: none)."""
    n = info["size"]
    if info.get("samples_left") is not None:
        n = min(n, info["samples_left"])
    if info.get("runs_left") == 0 or n < info.get("min_samples", 1):
        return 0
    return n


def evaluate(url: str, commit: str, split: str, status: dict[str, Any]) -> dict[str, Any] | None:
    """Evaluate *commit* on *split* if the budget allows, with a fresh view of the budget."""
    info = call(url, "/status")["splits"][split]
    n = affordable(info)
    if n == 0:
        return None
    return call(url, "/eval", {"commit": commit, "split": split, "limit": n})


def main() -> int:
    """Run the five steps; exit 1 when the service cannot be reached."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--overlay", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    args = parser.parse_args()
    report: dict[str, Any] = {"status": call(args.url, "/status"), "evals": []}
    status = report["status"]
    splits = {name: info for name, info in status["splits"].items() if info["tier"] != "hidden"}
    viewable = [name for name, info in splits.items() if info["tier"] == "viewable"]
    selection = status.get("selection_split") or (viewable[0] if viewable else None)

    baseline = git(args.repo, "rev-parse", "HEAD")
    report["baseline"] = baseline
    first = viewable[0] if viewable else selection
    if first:
        report["evals"].append({"commit": "baseline", "split": first,
                                "result": evaluate(args.url, baseline, first, status)})

    candidate = baseline
    if args.overlay.is_dir() and any(args.overlay.iterdir()):
        shutil.copytree(args.overlay, args.repo, dirs_exist_ok=True)
        git(args.repo, "add", "--all")
        git(args.repo, "commit", "--quiet", "-m", "improved solver")
        candidate = git(args.repo, "rev-parse", "HEAD")
        for split in dict.fromkeys([s for s in (first, selection) if s] + list(splits)):
            report["evals"].append({"commit": "improved", "split": split,
                                    "result": evaluate(args.url, candidate, split, status)})
    report["candidate"] = candidate

    if status["reward_mode"] == "submit":
        chosen = candidate if _better(report["evals"], selection or first) else baseline
        report["submit"] = call(args.url, "/submit", {"commit": chosen})
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("baseline", "candidate")}))
    return 0


def _better(evals: list[dict[str, Any]], split: str | None) -> bool:
    """Whether the improved commit's mean on *split* beats the baseline's (no data: yes)."""
    means = {e["commit"]: (e["result"] or {}).get("mean") for e in evals if e["split"] == split}
    improved, base = means.get("improved"), means.get("baseline")
    return improved is not None and (base is None or improved > base)


if __name__ == "__main__":
    sys.exit(main())
