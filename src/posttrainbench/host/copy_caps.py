"""How much of each kind a copy of a trial's agent-written files may hold.

One home for the caps: the results export (`host.results.run_files`) and the cloud volume reader
(`host.envs.cloud_volumes`) both copy under them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class CopyCaps(BaseModel):
    """How much of each kind an export copies per run."""

    model_config = ConfigDict(frozen=True)

    trace_bytes: int = 4 * 2**30
    trace_files: int = 1_000
    snapshot_bytes: int = 1 * 2**30
    snapshot_files: int = 100_000
    # A generous multiple of the largest catalog model in fp32; the verifier caps final_model
    # itself, this only bounds what one export writes.
    final_model_bytes: int = 64 * 2**30
    final_model_files: int = 10_000
