"""A local HTTP server for source tests (imported explicitly, not a conftest).

Sources that download from the Hugging Face hub or GitHub are exercised for real
against this server: the same HTTP code path, with fixture files as the bodies.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def serve_routes(routes: dict[str, bytes], token: str | None = None) -> Iterator[str]:
    """Serve ``{url path: body}`` on a free local port (404 otherwise); yield the base URL.

    With *token*, every request without ``Authorization: Bearer <token>`` gets 401,
    like a gated Hugging Face repository.
    """

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if token is not None and self.headers.get("Authorization") != f"Bearer {token}":
                self.send_response(401)
                self.end_headers()
                return
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"not found")

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def serve_dir(root: Path) -> contextlib.AbstractContextManager[str]:
    """Serve the files directly in *root* at ``/<name>``."""
    return serve_routes({f"/{p.name}": p.read_bytes() for p in root.iterdir() if p.is_file()})
