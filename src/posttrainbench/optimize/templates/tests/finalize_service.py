"""Close the evaluation service with its admin token and save its record (stdlib only).

A service that is not running is not an error: final scoring then reads the state
directory directly, and nothing can change it any more.
"""

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path


def main() -> int:
    """POST /finalize; write the response to --out."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    try:
        token = args.token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        print(f"no admin token ({exc.strerror}): the service never started")
        return 0
    request = urllib.request.Request(f"{args.url}/finalize", data=b"", method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            summary = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"cannot finalize the service: {exc}")
        return 0
    args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"finalized: {len(summary.get('charges', []))} charges recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
