"""Sans-IO protocol decoders: bytes of a reassembled stream in, records out.

Nothing here reads files, opens sockets or prints. See `base.py` for the interface a decoder
implements and `registry.py` for the protocols the front ends name (detection runs in the core).
"""
