"""Drive the genuine Go Log Courier: the shipper `log-courier` and the receiver `log-carver`.

`make peers-courier` builds both from the unmodified sources in ../shared/peers/log-courier into
.cache/log-courier/bin. They run as real subprocesses on loopback with debug logs, which say what
went over the wire from each side: the shipper every payload it sent (nonce, event count, the
connection) and every ACKN it read; the receiver every ACKN it wrote and every event it accepted
(`debug events`). `Delivery` turns those logs into the expected fate of each line of the input
file, independently of wirelog, for the tests to compare with `wirelog convert`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO.parent / "shared" / "peers" / "log-courier"
BIN = REPO / ".cache" / "log-courier" / "bin"

# Shipper log lines (lc-lib/publisher/endpoint/endpoint.go, lc-lib/transports/tcp/courier/protocol.go)
FIRST_SENT = re.compile(
    r"\[E (?P<server>\S+)\] Sending payload (?P<nonce>[0-9a-f]{32}) with (?P<n>\d+) events"
)
SENT = re.compile(
    r"\[T (?P<local>\S+) > (?P<remote>\S+)\] Sending (?P<type>EVNT|JDAT) payload with nonce (?P<nonce>[0-9a-f]{32})"
    r" and (?P<n>\d+) events"
)
READ_ACK = re.compile(
    r"\[T (?P<local>\S+) < (?P<remote>\S+)\] Received acknowledgement for nonce (?P<nonce>[0-9a-f]{32})"
    r" with sequence (?P<seq>\d+)"
)
REGISTERED = re.compile(r"Registrar received offsets for (\d+) log entries")
# Receiver log lines (lc-lib/transports/tcp/courier/protocol.go, lc-lib/processor/pool.go)
WROTE_ACK = re.compile(
    r"\[R (?P<local>\S+) > (?P<remote>\S+)\] Sending acknowledgement for nonce (?P<nonce>[0-9a-f]{32})"
    r" with sequence (?P<seq>\d+)"
)
RECEIVED = re.compile(
    r"\[R (?P<local>\S+) < (?P<remote>\S+)\] Received payload with nonce (?P<nonce>[0-9a-f]{32})"
    r" and (?P<n>\d+) events"
)
ACCEPTED = re.compile(r"Final event: (\{.*\})$")


def require_log_courier() -> Path:
    """The folder of the built binaries, or skip the test saying what is missing."""
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump not installed")
    if not all((BIN / name).is_file() for name in ("log-courier", "log-carver")):
        if not SOURCES.is_dir():
            missing = "../shared/peers/log-courier absent"
        elif shutil.which("go") is None:
            missing = "go not installed"
        else:
            missing = "Log Courier not built"
        pytest.skip(f"{missing}: run `make peers-courier` (builds {BIN.relative_to(REPO)})")
    return BIN


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 20) -> Any:
    """Poll `check` until it returns something true; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Process:
    """A Go peer writing its log (stdout and stderr) to `log`; stopped by its own PID only."""

    args: list[str]
    log: Path
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def kill(self) -> None:
        """SIGKILL: no goodbye on the wire beyond what the kernel does for a dead process."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM (a graceful shutdown: the shipper waits for its ACKs), SIGKILL if it hangs."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps(config, indent=2))
    return path


class Carver(Process):
    """`log-carver` receiving Courier over plain TCP on `listen`, its pipeline discarding events
    (transport `test`, acknowledging each internal batch after `delay` seconds, sometimes in two
    steps); `spool` events per internal batch give the shipper partial ACKNs. `tls`: the receiver's
    `tls` transport with these settings (`ssl certificate`, `ssl key`, `ssl client ca`: then it
    requires a client certificate signed by one of them, lc-lib/transports/tcp/receivertcp.go)."""

    def __init__(
        self,
        tmp: Path,
        name: str,
        listen: list[str],
        spool: int = 7,
        delay: int = 0,
        tls: dict[str, Any] | None = None,
    ) -> None:
        folder = tmp / name
        (folder / "persist").mkdir(parents=True, exist_ok=True)
        config = {
            "general": {
                "persist directory": str(folder / "persist"),
                "log level": "debug",
                "debug events": True,
                "processor routines": 1,
                "spool size": spool,
                "spool timeout": "10ms",
            },
            "receivers": [
                {"transport": "tls", "listen": listen, **tls}
                if tls
                else {"transport": "tcp", "listen": listen}
            ],
            "network": {"transport": "test", "servers": ["discard"], "min delay": delay, "max delay": delay},
        }
        cfg = write_config(folder / "log-carver.json", config)
        super().__init__([str(BIN / "log-carver"), "-config", str(cfg)], folder / "log-carver.log")
        self.listen = listen

    def start(self) -> None:
        super().start()
        wait_for(
            f"log-carver listening on {self.listen}",
            lambda: sum("] Listening" in line for line in self.lines()) >= len(self.listen),
            timeout=10,
        )

    def acks_written(self) -> list[tuple[str, str, int]]:
        """(shipper address, nonce, sequence) of every ACKN the receiver wrote, in order."""
        return [
            (m["remote"], m["nonce"], int(m["seq"]))
            for m in map(WROTE_ACK.search, self.lines())
            if m is not None
        ]

    def received(self) -> list[tuple[str, str, int]]:
        """(shipper address, nonce, events) of every payload the receiver read, in order."""
        return [
            (m["remote"], m["nonce"], int(m["n"]))
            for m in map(RECEIVED.search, self.lines())
            if m is not None
        ]

    def accepted(self) -> list[tuple[str, str]]:
        """(shipper address, message) of every event the receiver's pipeline took."""
        out = []
        for m in map(ACCEPTED.search, self.lines()):
            if m is not None:
                doc = json.loads(m[1])
                out.append((doc["@metadata"]["receiver"]["remote"], doc["message"]))
        return out


class Shipper(Process):
    """`log-courier` shipping `input` from its beginning to `servers` over plain TCP, `spool`
    events per payload at most."""

    def __init__(
        self,
        tmp: Path,
        input: Path,
        servers: list[str],
        spool: int = 1024,
        method: str = "random",
        multiline: bool = False,
        backoff: str = "200ms",
        max_pending: int = 10,
    ) -> None:
        folder = tmp / "log-courier"
        (folder / "persist").mkdir(parents=True, exist_ok=True)
        files: dict[str, Any] = {"paths": [str(input)]}
        if multiline:  # lines starting with a space continue the previous event
            files["codecs"] = [
                {"name": "multiline", "patterns": ["^ "], "what": "previous", "previous timeout": "200ms"}
            ]
        config = {
            "general": {
                "persist directory": str(folder / "persist"),
                "log level": "debug",
                "spool size": spool,
                "spool timeout": "50ms",
            },
            "network": {
                "transport": "tcp",
                "servers": servers,
                "method": method,
                "failure backoff": backoff,
                "reconnect backoff": backoff,
                "max pending payloads": max_pending,
            },
            "files": [files],
        }
        cfg = write_config(folder / "log-courier.json", config)
        super().__init__(
            [str(BIN / "log-courier"), "-config", str(cfg), "-from-beginning"], folder / "log-courier.log"
        )

    def registered(self) -> int:
        """Events the shipper has seen acknowledged (its registrar counts each once)."""
        return sum(int(m[1]) for m in map(REGISTERED.search, self.lines()) if m is not None)

    def sent_on(self, client: str) -> list[str]:
        """Nonces of the payloads sent on the connection from `client`, in order."""
        return [m["nonce"] for m in map(SENT.search, self.lines()) if m is not None and m["local"] == client]

    def refusals(self) -> int:
        """Connections the receiver's host refused (nothing listening)."""
        return sum("connect: connection refused" in line for line in self.lines())

    def wait_registered(self, n: int, timeout: float = 20) -> None:
        wait_for(f"log-courier to see {n} events acknowledged", lambda: self.registered() >= n, timeout)


def write_lines(path: Path, messages: list[str]) -> Path:
    path.write_text("".join(f"{m}\n" for m in messages))
    return path


@dataclass
class Sending:
    """One sending of a payload on one connection: its events (line numbers, in payload order) and
    the highest ACKN sequence for it on that connection, as the receiver wrote it and as the
    shipper read it."""

    client: str
    nonce: str
    lines: list[int]
    wrote: int = 0
    read: int = 0


@dataclass
class Delivery:
    """The fate of each line of the input, from the peers' own logs.

    What a payload holds is not in the logs: the Go shipper does not send its payloads in the
    order of the file (payloads held back while others wait for ACKs go out in another order), so
    `contents` (nonce -> the messages of its first, whole, sending) comes from the capture; the
    tests check it against the input and the logs (`payload_problems`). The shipper's
    `[T …] Sending EVNT payload` lines give the sendings per connection (a resend keeps the nonce
    and carries the unacknowledged suffix), the receivers' logs the ACKN sequences they wrote
    (what went on the wire) and the shipper's those it read."""

    messages: list[str]
    sendings: list[Sending] = field(default_factory=list)
    payloads: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def from_logs(
        cls, messages: list[str], shipper: Shipper, carvers: list[Carver], contents: dict[str, list[str]]
    ) -> Delivery:
        d = cls(messages)
        line_of = {m: i for i, m in enumerate(messages)}
        d.payloads = {nonce: [line_of[m] for m in ms] for nonce, ms in contents.items()}
        current: dict[tuple[str, str], Sending] = {}
        for line in shipper.lines():
            if (m := SENT.search(line)) is not None:
                first = d.payloads[m["nonce"]]
                s = Sending(m["local"], m["nonce"], first[len(first) - int(m["n"]) :])
                d.sendings.append(s)
                current[(s.client, s.nonce)] = s
            elif (m := READ_ACK.search(line)) is not None:
                s = current[(m["local"], m["nonce"])]
                s.read = max(s.read, int(m["seq"]))
        for carver in carvers:
            for client, nonce, seq in carver.acks_written():
                s = current[(client, nonce)]
                s.wrote = max(s.wrote, seq)
        return d

    def payload_problems(self, shipper: Shipper) -> list[str]:
        """How `payloads` disagrees with the input and the shipper's log: every line in exactly
        one payload, each payload a run of consecutive lines, first sent with as many events as
        the shipper's `[E …] Sending payload` line says."""
        problems = []
        lines = sorted(line for ls in self.payloads.values() for line in ls)
        if lines != list(range(len(self.messages))):
            problems.append(f"payloads hold lines {lines[:3]}…, not each of {len(self.messages)} once")
        for nonce, ls in self.payloads.items():
            if ls != list(range(ls[0], ls[0] + len(ls))):
                problems.append(f"payload {nonce}: lines {ls} not consecutive")
        logged = {m["nonce"]: int(m["n"]) for m in map(FIRST_SENT.search, shipper.lines()) if m is not None}
        if logged != {nonce: len(ls) for nonce, ls in self.payloads.items()}:
            problems.append(f"payload sizes {logged} in the shipper's log")
        return problems

    def events(self, source: str = "wrote") -> list[tuple[str, str, int, str, bool]]:
        """(client, nonce, index, message, acked) of every event sent, by sending, in log order."""
        out = []
        for s in self.sendings:
            acked = getattr(s, source)
            out += [(s.client, s.nonce, i, self.messages[line], i < acked) for i, line in enumerate(s.lines)]
        return out

    def fates(self) -> dict[int, str]:
        """Each line's best fate across connections: `delivered` (acknowledged on its first
        sending, fully or by a partial ACKN), `resend` (acknowledged only on a later sending),
        `twice` (acknowledged on two sendings), `lost` (sent, never acknowledged)."""
        acks: dict[int, list[bool]] = defaultdict(list)
        for s in self.sendings:
            for i, line in enumerate(s.lines):
                acks[line].append(i < s.wrote)
        out = {}
        for line, got in acks.items():
            if sum(got) > 1:
                out[line] = "twice"
            elif got[0]:
                out[line] = "delivered"
            elif any(got):
                out[line] = "resend"
            else:
                out[line] = "lost"
        return out


# Bytes before the IP header per pcap link type: null/loopback, Ethernet, raw IP, Linux SLL, SLL2.
LINK_HEADER = {0: 4, 1: 14, 101: 0, 113: 16, 276: 20}


def tcp_flags(header: bytes, record: bytes) -> int:
    """The TCP flags of one pcap record (IPv4 or IPv6, no extension headers)."""
    endian = "<" if header[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    (link,) = struct.unpack_from(endian + "I", header, 20)
    ip = record[16 + LINK_HEADER[link & 0xFFFF] :]
    tcp = ip[(ip[0] & 15) * 4 :] if ip[0] >> 4 == 4 else ip[40:]
    return tcp[13]


def refused_first(header: bytes, records: list[bytes]) -> list[int]:
    """An order of the packets in which every refused connection's RST comes before its SYN (each
    SYN directly followed by an RST is swapped with it): the original index of each packet."""
    order, i = list(range(len(records))), 0
    while i + 1 < len(records):
        if tcp_flags(header, records[i]) == 0x02 and tcp_flags(header, records[i + 1]) & 0x04:
            order[i], order[i + 1] = i + 1, i
            i += 2
        else:
            i += 1
    return order
