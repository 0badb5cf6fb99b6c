"""The judge sandbox's first process: the model endpoint's forwarder, then the CLI.

Runs inside the sandbox (bubblewrap, its own network namespace with only loopback) as
the namespace's root, started as ``python -I -S launch.py`` with its configuration as
JSON on stdin (never on a command line or in an environment the sandbox can read):

- ``listen``: ``[host, port]`` on loopback where the CLI's base URL points;
- ``socket``: the Unix socket the trusted side listens on, which connects to the judge
  model's endpoint and nowhere else (:mod:`sandbox`);
- ``uid``: the unprivileged user the CLI runs as; ``env``: its whole environment (the
  judge's key included: the CLI's environment is the only place the key is);
- ``argv``, ``cwd``, ``stdout``: the CLI's command line, directory and output file;
- ``mkdirs``: directories made for the CLI's user first (its ``HOME``, ``CODEX_HOME``).

It exits with the CLI's status. Standard library only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

PR_SET_NO_NEW_PRIVS = 38


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            upstream.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _no_new_privs() -> None:
    # Inherited by the CLI: no setuid binary can make it root of the namespace again.
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def main() -> int:
    config = json.loads(sys.stdin.read())
    _no_new_privs()
    host, port = config["listen"]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, config["socket"]), daemon=True).start()
    uid = int(config["uid"])
    for path in config.get("mkdirs", []):  # HOME and the CLIs' own dirs, on the tmpfs
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chown(path, uid, uid)
    with open(config["stdout"], "wb") as out:
        try:
            proc = subprocess.Popen(
                config["argv"],
                cwd=config["cwd"],
                env=config["env"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                user=uid,
                group=uid,
                extra_groups=[],
                close_fds=True,
            )
        except OSError as exc:
            print(f"cannot start {config['argv'][0]}: {exc}", file=sys.stderr)
            return 127
        return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
