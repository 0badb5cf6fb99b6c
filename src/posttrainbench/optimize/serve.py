"""Run the evaluation service: ``python -m posttrainbench.optimize.serve --config C --state-dir S
--agent-repo R --port P`` (start it as root so candidates run as the unprivileged user)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from posttrainbench.errors import PtbError
from posttrainbench.optimize.config import load_config
from posttrainbench.optimize.service import create_app


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the app and serve it with uvicorn until stopped."""
    parser = argparse.ArgumentParser(prog="python -m posttrainbench.optimize.serve", description=__doc__)
    parser.add_argument("--config", type=Path, required=True, help="agent-task YAML")
    parser.add_argument("--state-dir", type=Path, required=True, help="ledger, candidates, token (made 0700)")
    parser.add_argument("--agent-repo", type=Path, required=True, help="the agent's git repository")
    parser.add_argument("--token-file", type=Path, default=None, help="admin token path (default STATE/admin_token)")
    parser.add_argument("--work-dir", type=Path, default=None, help="where candidate copies are made (default: temp)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    try:
        app = create_app(args.state_dir, load_config(args.config), agent_repo=args.agent_repo,
                         token_path=args.token_file, work_dir=args.work_dir)
    except PtbError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    import uvicorn  # only the server needs it

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
