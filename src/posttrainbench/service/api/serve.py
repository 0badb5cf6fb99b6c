"""Run the evaluation service: ``python -m posttrainbench.service.api.serve --config C --state-dir S
--agent-repo R --port P [--secrets-file F]`` (start it as root so candidates run as the
unprivileged user). With ``--secrets-file`` the config's declared secrets are loaded from
that root-only file into the service's own environment (see ``secrets_file``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from posttrainbench.core.errors import PtbError
from posttrainbench.core.secrets_file import export_secrets, load_secrets
from posttrainbench.service.api.scoring import load_config
from posttrainbench.service.api.service import create_app


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the app and serve it with uvicorn until stopped."""
    parser = argparse.ArgumentParser(
        prog="python -m posttrainbench.service.api.serve", description=__doc__
    )
    parser.add_argument("--config", type=Path, required=True, help="agent-task YAML")
    parser.add_argument(
        "--state-dir", type=Path, required=True, help="ledger, candidates, token (made 0700)"
    )
    parser.add_argument("--agent-repo", type=Path, required=True, help="the agent's git repository")
    parser.add_argument(
        "--token-file", type=Path, default=None, help="admin token path (default STATE/admin_token)"
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="parent of the candidates' run directories (root's, made 0711; default: a new temp dir)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--secrets-file",
        type=Path,
        default=None,
        help="JSON of the declared secrets' values (root-only); each must be in it",
    )
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        if args.secrets_file is not None:
            # In this process's own environment: its trusted children inherit them; candidate
            # commands never do (their environment is an allow-list).
            loaded = load_secrets(args.secrets_file, config.secrets)
            export_secrets(loaded)
            print(
                f"secrets loaded: {', '.join(sorted(loaded)) or 'none'}", file=sys.stderr
            )  # names only
        app = create_app(
            args.state_dir,
            config,
            agent_repo=args.agent_repo,
            token_path=args.token_file,
            work_dir=args.work_dir,
        )
    except PtbError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    import uvicorn  # only the server needs it

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
