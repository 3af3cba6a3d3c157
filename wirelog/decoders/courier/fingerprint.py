"""Which software is on each end, from what the bytes betray (reference/courier.md §3, Fingerprints).

Evidence: HELO/VERS length and client ID (32 = Go >= 2.6.4, 20 = Ruby >= 2.7.2, 8 = Ruby 2.7.0–2.7.1,
0/1 = Go 2.5.0–2.6.3, none = legacy), the zlib level in each payload's header (78 5e = Go level 3,
78 9c = Ruby default) and Go's stream tail, and nonces: Go's `Intn(255)` never yields 0xFF, and the
unseeded Go 2.0–2.6.3 always starts with the same nonce.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirelog.decoders.courier.handshake import HELO_CLASSES, VERS_CLASSES, Handshake

UNSEEDED_GO_FIRST_NONCE = "56847afe9799739b3d9677972a3b58ef"  # Go's default seed, first 16 Intn(255)


@dataclass(slots=True)
class Fingerprint:
    helo: Handshake | None = None
    vers: Handshake | None = None
    server_declined: bool = False  # the server answered HELO with ????
    zlib_levels: set[str] = field(default_factory=set)
    go_tail: bool = False
    nonces: int = 0
    nonce_with_ff: bool = False
    unseeded_nonce: bool = False
    client_messages: int = 0

    def see_nonce(self, nonce: bytes) -> None:
        if self.nonces == 0 and nonce.hex() == UNSEEDED_GO_FIRST_NONCE:
            self.unseeded_nonce = True
        self.nonces += 1
        self.nonce_with_ff |= b"\xff" in nonce

    def unseeded_possible(self) -> bool:
        """Could nonces repeat across runs (Go 2.0–2.6.3: no HELO or an empty one, no 0xFF)?"""
        legacy = self.helo is None or self.helo.length == 0
        return legacy and not self.nonce_with_ff

    def client(self) -> tuple[str | None, str | None]:
        """(implementation, version class) of the client."""
        if self.helo is not None:
            impl, cls = HELO_CLASSES.get(
                self.helo.length, (None, f"unknown HELO layout ({self.helo.length} bytes)")
            )
            if self.helo.client_id == "LCVR":
                cls = cls.replace("log-courier", "Log Carver")
            return impl, cls
        if not self.client_messages:
            return None, None
        if self.unseeded_nonce or (("fast" in self.zlib_levels or self.go_tail) and not self.nonce_with_ff):
            return "go", "Go log-courier < 2.5 (no handshake)"
        if "default" in self.zlib_levels or self.nonce_with_ff:
            return "ruby", "Ruby gem <= 1.10 or handshake disabled (no HELO)"
        return None, "legacy client (no HELO): Go < 2.5 or Ruby gem <= 1.10"

    def server(self) -> tuple[str | None, str | None]:
        if self.vers is not None:
            return VERS_CLASSES.get(
                self.vers.length, (None, f"unknown VERS layout ({self.vers.length} bytes)")
            )
        if self.server_declined:
            return "ruby", "Ruby server without handshake (disable_handshake or gem <= 1.10)"
        return None, None

    def fields(self) -> dict[str, object]:
        client_impl, client_class = self.client()
        server_impl, server_class = self.server()
        return {
            "client_impl": client_impl,
            "client_class": client_class,
            "client_version": self.helo.version if self.helo else None,
            "client_id": self.helo.client_id if self.helo else None,
            "helo_length": self.helo.length if self.helo else None,
            "server_impl": server_impl,
            "server_class": server_class,
            "server_version": self.vers.version if self.vers else None,
            "server_id": self.vers.client_id if self.vers else None,
            "vers_length": self.vers.length if self.vers else None,
            "evnt_negotiated": bool(self.vers and self.vers.evnt),
            "zlib_levels": sorted(self.zlib_levels),
            "zlib_go_tail": self.go_tail,
            "nonce_with_ff": self.nonce_with_ff,
            "unseeded_go_nonce": self.unseeded_nonce,
        }
