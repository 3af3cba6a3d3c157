"""The one exception the capture layer raises."""

from __future__ import annotations


class CaptureError(Exception):
    """Input is unusable: missing, unreadable, not a capture, or an unsupported format.

    Raised before any packet is produced; `str(e)` is one clear line for the user, starting with the
    input's name. Problems found *inside* a readable capture are findings, never this exception.
    """
