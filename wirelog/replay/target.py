"""`--to URL`: where replayed events go, and how."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

SCHEMES = {
    "lumberjack": ("lumberjack", False),
    "lumberjacks": ("lumberjack", True),
    "courier": ("courier", False),
    "couriers": ("courier", True),
    "hercules+http": ("hercules", False),
    "hercules+https": ("hercules", True),
}
DEFAULT_PORTS = {"lumberjack": 5044, "courier": 5043, "hercules": 6306}


class TargetError(ValueError):
    """`--to` is not a URL replay can send to (the message says why and what would be)."""


@dataclass(frozen=True)
class Target:
    url: str
    protocol: str  # lumberjack, courier, hercules
    tls: bool
    host: str
    port: int
    stream: str | None = None  # hercules: the Gate stream

    @property
    def loopback(self) -> bool:
        """The host is this machine (a name that resolves only to loopback addresses too)."""
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            pass
        if self.host == "localhost":
            return True
        try:
            infos = socket.getaddrinfo(self.host, None)
        except OSError:
            return False
        return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)

    def where(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_target(url: str) -> Target:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise TargetError(f"{url!r}: unknown scheme {scheme + '://' if scheme else '(none)'}; known: {known}")
    protocol, tls = SCHEMES[scheme]
    if not parts.hostname:
        raise TargetError(f"{url!r}: no host (write {scheme}://HOST:PORT)")
    try:
        port = parts.port or DEFAULT_PORTS[protocol]
    except ValueError:
        raise TargetError(f"{url!r}: the port is not a number from 1 to 65535") from None
    if port == 0:
        raise TargetError(f"{url!r}: the port is not a number from 1 to 65535")
    stream = None
    if protocol == "hercules":
        stream = (parse_qs(parts.query).get("stream") or [None])[0]
        if not stream:
            raise TargetError(f"{url!r}: name the Gate stream: {scheme}://HOST:PORT/?stream=NAME")
    elif parts.path not in ("", "/") or parts.query:
        raise TargetError(f"{url!r}: {scheme}:// takes HOST:PORT only")
    return Target(url, protocol, tls, parts.hostname, port, stream)
