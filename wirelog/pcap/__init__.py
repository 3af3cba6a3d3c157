"""Capture reading (pcap/pcapng, compressed, stdin), link/IP/TCP parsing and TCP reassembly.

The capture-reading API: `expand_inputs` and `open_input` (sources), `iter_segments` (one plain
tuple per TCP segment, see its docstring) and `CaptureError` for unusable inputs.
"""

from wirelog.pcap.errors import CaptureError
from wirelog.pcap.segments import iter_segments
from wirelog.pcap.sources import expand_inputs, open_input

__all__ = ["CaptureError", "expand_inputs", "iter_segments", "open_input"]
