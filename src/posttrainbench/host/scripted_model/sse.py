"""Server-sent events as the model APIs stream them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    """One event: an optional ``event:`` name and a JSON ``data:`` payload (or a raw one)."""

    name: str | None
    data: dict[str, Any] | str

    def encode(self) -> bytes:
        """The event's bytes on the wire, blank line included."""
        payload = self.data if isinstance(self.data, str) else json.dumps(self.data)
        head = f"event: {self.name}\n" if self.name else ""
        return f"{head}data: {payload}\n\n".encode()
