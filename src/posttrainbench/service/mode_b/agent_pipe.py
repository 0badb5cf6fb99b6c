"""The pipe between Mode B's trusted proxy and the unprivileged candidate side.

One JSON line per message over a socket pair, each a pydantic model with
``extra="forbid"`` and a bounded length. Environment calls carry file contents (base64;
directories as tar of regular files and directories only), never a host path, so the
trusted side never opens a file the candidate names. Both sides import this module;
only the proxy's parser (:func:`parse_host_message`) is relied on for safety.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import stat
import tarfile
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from harbor.models.trial.result import AgentInfo
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    TypeAdapter,
    ValidationError,
)

MAX_LINE = 64 * 1024 * 1024  # one message, base64 included; bigger transfers are refused
_TEXT = 1_000_000  # longest error/traceback text kept from the candidate side


class CandidateAgentError(RuntimeError):
    """The candidate's agent failed (raised, exited, or could not be built)."""


class CandidateProtocolError(CandidateAgentError):
    """The candidate side sent something the protocol does not allow."""


def decode_b64(value: object) -> bytes:
    """Strict base64 (str) to bytes; bytes pass through."""
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise ValueError("expected a base64 string")
    return base64.b64decode(value, validate=True)


# Raw bytes on the wire: strict base64 in JSON, bytes in Python.
B64 = Annotated[
    bytes,
    PlainValidator(decode_b64),
    PlainSerializer(lambda b: base64.b64encode(b).decode("ascii"), when_used="json"),
]
User = int | str | None


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- candidate side -> proxy ---------------------------------------------------------------


class ExecCall(_Msg):
    """``environment.exec`` (the environment's default user applies when *user* is None)."""

    method: Literal["exec"]
    command: str
    cwd: str | None = None
    env: dict[str, str] | None = None
    timeout_sec: int | None = None
    user: User = None


class UploadFileCall(_Msg):
    """``environment.upload_file``: the file's bytes, never a host path."""

    method: Literal["upload_file"]
    target_path: str
    data: B64


class UploadDirCall(_Msg):
    """``environment.upload_dir``: a tar of regular files and directories."""

    method: Literal["upload_dir"]
    target_dir: str
    tar: B64


class DownloadFileCall(_Msg):
    """``environment.download_file``: the reply carries the bytes."""

    method: Literal["download_file"]
    source_path: str


class DownloadDirCall(_Msg):
    """``environment.download_dir``: the reply carries a tar."""

    method: Literal["download_dir"]
    source_dir: str


class PathCheckCall(_Msg):
    """``environment.is_dir`` / ``environment.is_file``."""

    method: Literal["is_dir", "is_file"]
    path: str
    user: User = None


EnvCall = Annotated[
    ExecCall | UploadFileCall | UploadDirCall | DownloadFileCall | DownloadDirCall | PathCheckCall,
    Field(discriminator="method"),
]


class Call(_Msg):
    """One environment call; the proxy answers with a :class:`Reply` of the same id."""

    type: Literal["call"]
    id: int = Field(ge=0)
    call: EnvCall


class Hello(_Msg):
    """The candidate class was built: what Harbor records as the agent."""

    type: Literal["hello"]
    agent_info: AgentInfo


class ContextUpdate(_Msg):
    """The candidate's AgentContext so far (kept if the run is cut off by a timeout)."""

    type: Literal["context"]
    context: dict[str, Any]


class PhaseDone(_Msg):
    """``setup`` or ``run`` returned."""

    type: Literal["done"]
    phase: Literal["setup", "run"]
    context: dict[str, Any] | None = None


class PhaseFailed(_Msg):
    """Building the class, ``setup`` or ``run`` raised."""

    type: Literal["failed"]
    phase: Literal["init", "setup", "run"]
    error: str = Field(max_length=_TEXT)
    traceback: str = Field(default="", max_length=_TEXT)


HostMessage = Annotated[
    Call | Hello | ContextUpdate | PhaseDone | PhaseFailed, Field(discriminator="type")
]


# -- proxy -> candidate side ---------------------------------------------------------------


class Init(_Msg):
    """Which class to build, and the usual Harbor constructor arguments."""

    type: Literal["init"]
    import_path: str
    model_name: str | None = None
    kwargs: dict[str, Any] = Field(default_factory=dict)
    logs_dir: str
    session_id: str | None = None
    context_id: str | None = None
    mcp_servers: list[dict[str, Any]] = Field(
        default_factory=list, description="the task's, as Harbor gave them"
    )
    skills_dir: str | None = None


class Start(_Msg):
    """Run one phase; ``default_user``/``os`` describe the real environment."""

    type: Literal["start"]
    phase: Literal["setup", "run"]
    instruction: str | None = None
    default_user: User = None
    os: str = "linux"
    session_id: str = ""


class Reply(_Msg):
    """The answer to :class:`Call` *id*: a value, or an error line."""

    type: Literal["reply"]
    id: int
    ok: bool
    value: dict[str, Any] | None = None
    error: str | None = None


class Stop(_Msg):
    """No more phases: exit."""

    type: Literal["stop"]


ProxyMessage = Annotated[Init | Start | Reply | Stop, Field(discriminator="type")]
_HOST_ADAPTER: TypeAdapter[HostMessage] = TypeAdapter(HostMessage)
_PROXY_ADAPTER: TypeAdapter[ProxyMessage] = TypeAdapter(ProxyMessage)


def encode(message: _Msg) -> bytes:
    """One message as a JSON line."""
    return message.model_dump_json().encode("utf-8") + b"\n"


def parse_host_message(line: bytes) -> Any:
    """A candidate-side line as its message model; anything else raises :class:`CandidateProtocolError`."""
    try:
        return _HOST_ADAPTER.validate_json(line)
    except ValidationError as exc:
        raise CandidateProtocolError(
            f"bad message from the candidate agent: {str(exc).splitlines()[0]}"
        ) from None


def parse_proxy_message(line: bytes) -> Any:
    """A proxy line as its message model (the candidate side's parser)."""
    return _PROXY_ADAPTER.validate_json(line)


async def read_line(reader: asyncio.StreamReader) -> bytes | None:
    """The next line, or None at end of stream; a line over the limit is a protocol error."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise CandidateProtocolError(
                "the candidate side ended in the middle of a message"
            ) from None
        return None
    except asyncio.LimitOverrunError:
        raise CandidateProtocolError(
            f"a message from the candidate side exceeds {MAX_LINE} bytes"
        ) from None
    return line


# -- directories as tar (regular files and directories only) --------------------------------


def pack_dir(root: Path) -> bytes:
    """*root*'s regular files and directories as a tar; links and special files are skipped."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for current, dirs, files in os.walk(root):
            for name in sorted(dirs + files):
                path = Path(current, name)
                mode = os.lstat(path).st_mode
                if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                    tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    return buffer.getvalue()


def unpack_dir(data: bytes, dest: Path) -> None:
    """Extract a tar of regular files and directories into *dest*; anything else is refused."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        members = tar.getmembers()
        for member in members:
            parts = PurePosixPath(member.name).parts
            if (
                not (member.isfile() or member.isdir())
                or member.name.startswith("/")
                or ".." in parts
            ):
                raise CandidateProtocolError(
                    f"tar member {member.name!r}: only relative files and dirs are allowed"
                )
        if hasattr(
            tarfile, "data_filter"
        ):  # Python >= 3.11.4; the members were checked above anyway
            tar.extractall(dest, members=members, filter="data")
        else:
            tar.extractall(dest, members=members)
