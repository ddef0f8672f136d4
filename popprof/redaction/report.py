"""The redaction report: what was replaced, by kind and count; what was kept and dropped; the scan."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..io.atomic import write_text_atomic


@dataclass
class RedactionReport:
    """Outcome of one redaction. Never holds the key or any original value."""

    input: str
    output: str
    input_kind: str
    key_source: str
    tool_version: str
    policy: dict
    replaced: dict[str, dict[str, int]] = field(default_factory=dict)
    kept_public: dict[str, int] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    scan: dict | None = None
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0
    key_fingerprint: str = ""

    @property
    def passed(self) -> bool:
        """True unless the leak scan ran and failed."""
        return self.scan is None or bool(self.scan.get("passed"))

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    def write(self, path: str | Path) -> None:
        """Write the report as JSON (atomically)."""
        write_text_atomic(path, self.to_json())

    def summary(self) -> str:
        """A few human-readable lines."""
        total = sum(v["distinct"] for v in self.replaced.values())
        kinds = ", ".join(f"{k} {v['distinct']:,}" for k, v in self.replaced.items() if v["distinct"])
        lines = [
            f"redacted {self.input_kind} -> {self.output}: {total:,} distinct values replaced"
            + (f" ({kinds})" if kinds else "")
        ]
        if self.dropped:
            lines.append(f"dropped: {', '.join(self.dropped)}")
        if self.scan is not None:
            lines.append(
                "leak scan: "
                + ("passed" if self.scan.get("passed") else "FAILED")
                + f" ({self.scan.get('strings_checked', 0):,} distinct strings, "
                f"{self.scan.get('tokens', 0):,} tokens)"
            )
        return "\n".join(lines)
