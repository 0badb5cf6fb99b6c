"""Recorded-judge environment for the judged-benchmark tests (imported explicitly)."""

from __future__ import annotations

from pathlib import Path

import pytest


def use_recordings(monkeypatch: pytest.MonkeyPatch, recordings: Path) -> None:
    """Replay *recordings* instead of calling a live judge, with no key in reach."""
    for name in ("PTB_JUDGE_MODEL", "PTB_JUDGE_RECORD_TO", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PTB_JUDGE_RECORDINGS", str(recordings))
    monkeypatch.setenv("PTB_JUDGE_CONCURRENCY", "4")
