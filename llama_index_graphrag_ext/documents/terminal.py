"""What the CLI prints is shown, never obeyed: control characters from passage text and file
names (clear screen, window titles, disguised hyperlinks) are written out as ``\\u001b``."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["printable", "safe_print"]

# C0 controls but tab and newline, DEL, and the C1 controls (0x9b is a one-byte CSI).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters written as ``\\uXXXX`` (also valid in JSON)."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def safe_print(*values: Any, **kwargs: Any) -> None:
    """``print`` with every string made :func:`printable`."""
    print(*(printable(v) if isinstance(v, str) else v for v in values), **kwargs)
