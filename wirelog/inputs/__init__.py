"""Capture inputs: file names, globs, stdin and URIs (sources, remote), transparent decompression,
raw stream dumps (raw), and `CaptureError` for unusable inputs. The bytes go to the native core
(wirelog._core) through engine/capture.py.
"""

from wirelog.inputs.errors import CaptureError
from wirelog.inputs.sources import expand_inputs, open_input

__all__ = ["CaptureError", "expand_inputs", "open_input"]
