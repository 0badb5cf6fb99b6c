"""Per-instance host directories: the writable sandbox root and the /opt/ptb layer.

Layout under ``<instance_dir>``::

    rootfs/         bound as "/" (writable): app/, tmp/, root/, etc/, logs/, tests/ ...
    ptb/upper,work  overlayfs upper and work dirs over the cached layers
    ptb/merged      the overlay mount point (or a full copy when overlayfs is unavailable)

Uploads and downloads map a sandbox path to a trusted host directory and a path below it
through :meth:`InstanceFs.locate`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from posttrainbench.core.model_task_layout import MODEL_LAYOUT

# Minimal /etc: enough for name resolution, TLS, the dynamic loader, Debian's
# alternatives symlinks and shells. Host secrets (shadow, ssh keys, ...) stay out.
ETC_WHITELIST: tuple[str, ...] = (
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "resolv.conf",
    "nsswitch.conf",
    "gai.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "localtime",
    "timezone",
    "mime.types",
    "protocols",
    "services",
    "bash.bashrc",
    "profile",
    "profile.d",
    "inputrc",
    "environment",
    "os-release",
    "debian_version",
    "login.defs",
    "shells",
    "pip.conf",
    "xdg",
)


@dataclass
class InstanceFs:
    """Host-side directories of one sandbox instance."""

    instance_dir: Path
    ptb_mode: str = "none"  # "overlay" | "copy" | "none"
    host_mounts: dict[str, Path] = field(default_factory=dict)
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger(__name__))

    @property
    def rootfs(self) -> Path:
        """The host dir bound as the sandbox's ``/``."""
        return self.instance_dir / "rootfs"

    @property
    def ptb_merged(self) -> Path:
        """The host dir bound at ``/opt/ptb``."""
        return self.instance_dir / "ptb" / "merged"

    def create(self, workspace: Path | None, extra_dirs: list[str]) -> None:
        """Create a fresh root: /app from ``workspace``, /tmp, /root, a minimal /etc."""
        if self.instance_dir.exists():
            self.unmount_ptb()
            shutil.rmtree(self.instance_dir)
        root = self.rootfs
        root.mkdir(parents=True)
        for name in ("usr/bin", "usr/lib", "usr/lib64", "usr/sbin"):
            base = name.split("/")[1]
            if os.path.islink(f"/{base}"):
                (root / base).symlink_to(os.readlink(f"/{base}"))
        app = root / "app"
        if workspace is not None and workspace.is_dir():
            shutil.copytree(workspace, app, symlinks=True)
        else:
            app.mkdir()
        (root / "tmp").mkdir(mode=0o1777)
        os.chmod(root / "tmp", 0o1777)
        (root / "root").mkdir(mode=0o700)
        (root / "opt" / "ptb").mkdir(parents=True)
        self._make_etc(root / "etc")
        for directory in extra_dirs:
            path = root / directory.lstrip("/")
            path.mkdir(parents=True, exist_ok=True)
            os.chmod(path, 0o777)

    def _make_etc(self, etc: Path) -> None:
        etc.mkdir()
        for name in ETC_WHITELIST:
            source = Path("/etc") / name
            target = etc / name
            if source.is_symlink():
                target.symlink_to(os.readlink(source))
            elif source.is_dir():
                shutil.copytree(source, target, symlinks=True)
            elif source.is_file():
                shutil.copy2(source, target)
        if not (etc / "passwd").exists():
            (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
        (etc / "hostname").write_text("sandbox\n")

    def make_traversable(self, sandbox_path: Path) -> None:
        """Let every user pass through the instance's own dirs on the way to ``sandbox_path``.

        The sandbox Python may live under /root (pyenv), which is 0700 here: the agent's
        unprivileged user must reach the interpreter the task venv links to, not list /root.
        """
        current = self.rootfs
        for part in PurePosixPath(sandbox_path).parts[1:]:
            current = current / part
            if current.is_symlink():
                return
            # Made here, before bwrap would make the mount point's parents (0700).
            current.mkdir(mode=0o755, exist_ok=True)
            os.chmod(current, current.stat().st_mode & 0o7777 | 0o111)

    def use_nameserver(self, address: str) -> None:
        """Point the instance's resolver at ``address`` (the user-mode network's DNS forwarder)."""
        resolv = self.rootfs / "etc" / "resolv.conf"
        resolv.unlink(missing_ok=True)  # the host's may be a link; never write through it
        resolv.write_text(f"nameserver {address}\n")

    def setup_ptb(self, layers: list[Path]) -> str:
        """Give the instance a writable view of the cached layers (bottom first) at ``ptb/merged``.

        overlayfs stacks them (``lowerdir=top:...:bottom``) under a per-instance upper and
        work dir, at no cost; if mounting fails (not root, no overlay support) the layers
        are copied into ``ptb/merged`` bottom up (``cp -a --reflink=auto``), so a file of
        an upper layer replaces the same file of a lower one, as in the overlay.
        """
        ptb = self.instance_dir / "ptb"
        upper, work, merged = ptb / "upper", ptb / "work", self.ptb_merged
        for path in (upper, work, merged):
            path.mkdir(parents=True, exist_ok=True)
        lower = ":".join(str(layer) for layer in reversed(layers))
        options = f"lowerdir={lower},upperdir={upper},workdir={work}"
        result = subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o", options, str(merged)],
            capture_output=True,
            text=True,
        )
        if result.returncode == 0:
            self.ptb_mode = "overlay"
            return self.ptb_mode
        self.logger.warning(
            "overlayfs mount failed (%s); copying the environment instead",
            result.stderr.strip(),
        )
        self.copy_layers(layers)
        return self.ptb_mode

    def copy_layers(self, layers: list[Path]) -> None:
        """The fallback of :meth:`setup_ptb`: a private copy of the layers, bottom up."""
        merged = self.ptb_merged
        shutil.rmtree(merged, ignore_errors=True)
        merged.mkdir(parents=True)
        os.chmod(merged, 0o755)
        for layer in layers:
            subprocess.run(["cp", "-a", "--reflink=auto", f"{layer}/.", str(merged)], check=True)
        self.ptb_mode = "copy"

    def unmount_ptb(self) -> None:
        """Lazily unmount the overlay if this instance mounted one (idempotent)."""
        merged = self.ptb_merged
        if merged.is_dir() and os.path.ismount(merged):
            subprocess.run(["umount", "-l", str(merged)], capture_output=True)

    def delete(self) -> None:
        """Remove every host dir of the instance (never the bound trial dirs)."""
        self.unmount_ptb()
        if self.ptb_merged.is_dir() and os.path.ismount(self.ptb_merged):
            raise RuntimeError(f"{self.ptb_merged} is still mounted; not deleting")
        shutil.rmtree(self.instance_dir, ignore_errors=True)
        try:  # the shared "sandbox/" parent under the trial dir, once empty
            self.instance_dir.parent.rmdir()
        except OSError:
            pass

    def locate(self, sandbox_path: str) -> tuple[Path, str]:
        """The trusted host directory that backs ``sandbox_path``, and the path below it.

        Explicit host mounts and ``/opt/ptb`` win over the root; read-only system dirs are
        rejected because the sandbox cannot write there either. The caller opens the path
        below the directory without following links (:mod:`posttrainbench.host.envs.transfer`):
        its components are the agent's to plant.
        """
        path = PurePosixPath(os.path.normpath(sandbox_path))
        if not path.is_absolute():
            path = PurePosixPath(MODEL_LAYOUT.workspace) / path
        candidates = {**self.host_mounts, MODEL_LAYOUT.root: self.ptb_merged}
        best: tuple[int, Path, PurePosixPath] | None = None
        for target, source in candidates.items():
            target_path = PurePosixPath(target)
            if path == target_path or path.is_relative_to(target_path):
                depth = len(target_path.parts)
                if best is None or depth > best[0]:
                    best = (depth, source, path.relative_to(target_path))
        if best is not None:
            return best[1], best[2].as_posix()
        if path.parts[1:2] and f"/{path.parts[1]}" in ("/usr", "/proc", "/dev", "/sys"):
            raise PermissionError(f"{sandbox_path} is read-only inside the sandbox")
        return self.rootfs, path.relative_to("/").as_posix()


def _unescape_mount_field(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def stale_ptb_mounts(under: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Path]:
    """The instances' overlay mount points (``.../ptb/merged``) below *under*."""
    root = Path(os.path.realpath(under))
    found = []
    for line in mountinfo.read_text().splitlines():
        fields, _, fs = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not fs.startswith("overlay "):
            continue
        point = Path(_unescape_mount_field(parts[4]))
        if point.name == "merged" and point.parent.name == "ptb" and point.is_relative_to(root):
            found.append(point)
    return found


def release_stale_mounts(under: Path) -> list[Path]:
    """Lazily unmount the overlays of instances below *under* whose runner is gone.

    The caller must know that no live instance is below *under* (a sweep's runner holds
    the sweep's lock). A runner killed with ``kill -9`` never unmounts its instances'
    overlays; their trial dirs then cannot be removed (EBUSY), which is what Harbor does
    before it runs an unfinished trial again.
    """
    released = []
    for point in stale_ptb_mounts(under):
        result = subprocess.run(["umount", "-l", str(point)], capture_output=True, text=True)
        if result.returncode == 0:
            released.append(point)
        else:
            logging.getLogger(__name__).warning(
                "could not unmount %s: %s", point, result.stderr.strip()
            )
    return released
