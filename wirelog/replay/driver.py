"""The thin socket loop under a sans-IO sender: connect (TCP, TLS), write what the sender makes,
feed it what the receiver writes, journal every acknowledgement, reconnect with backoff.

Failures a receiver can cause — refused, reset, closed, stalled (no byte for `timeout` seconds:
ACK 0 keep-alives and PONGs count as bytes, as in Filebeat and Log Courier), bytes its protocol
does not allow — each end the connection with one `Problem` line; the unacknowledged rest is sent
again on the next connection, after a backoff doubling from `backoff` to `max_backoff`
(Filebeat's 1 s to 60 s). After `retries` connections in a row that acknowledged nothing the run
gives up (`GaveUp`); the journal keeps what was acknowledged.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from wirelog.replay.events import Acked, Item, ProtocolError, Ready, Rejected
from wirelog.replay.journal import Journal
from wirelog.replay.target import Target

RECV_SIZE = 256 * 1024


class Sender(Protocol):
    name: str

    def connection_made(self) -> bytes: ...
    def connection_lost(self) -> None: ...
    @property
    def ready(self) -> bool: ...
    def can_send(self) -> bool: ...
    def has_resend(self) -> bool: ...
    def send_resend(self) -> tuple[bytes, int]: ...
    def send(self, items: list[Item]) -> bytes: ...
    def receive(self, data: bytes) -> list: ...
    @property
    def outstanding(self) -> int: ...


@dataclass
class Settings:
    window: int = 2048
    timeout: float = 30.0
    retries: int = 3
    backoff: float = 1.0
    max_backoff: float = 60.0
    keepalive: float = 10.0  # Log Courier: PING after this long idle (the Go shipper's keepaliveTimeout)
    ca: str | None = None
    cert: str | None = None
    key: str | None = None


@dataclass
class Tally:
    sent: int = 0  # events written at least once
    resent: int = 0  # events written again on a later connection
    acked: int = 0
    bytes: int = 0
    connections: int = 0
    receiver: str | None = None
    problems: list[str] = field(default_factory=list)


class GaveUp(Exception):
    """The receiver kept failing: `retries` connections in a row acknowledged nothing."""


class Refused(Exception):
    """The receiver refused events for good (`Rejected`): the run stops without a retry."""


def tls_context(settings: Settings) -> ssl.SSLContext:
    """Certificate and host name checked (against --ca, else the system's CAs); --cert/--key
    for receivers that ask for a client certificate."""
    ctx = ssl.create_default_context(cafile=settings.ca)
    if settings.cert:
        ctx.load_cert_chain(settings.cert, settings.key)
    return ctx


class Driver:
    def __init__(
        self,
        sender: Sender,
        target: Target,
        settings: Settings,
        journal: Journal,
        on_ack: Callable[[Tally], None] = lambda _t: None,
        on_problem: Callable[[str], None] = lambda _p: None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.sender, self.target, self.settings, self.journal = sender, target, settings, journal
        self.on_ack, self.on_problem, self.sleep = on_ack, on_problem, sleep
        self.tally = Tally()
        self._ctx = tls_context(settings) if target.tls else None
        self._pings = hasattr(sender, "ping")  # Log Courier: PING an idle connection
        self._last_io = 0.0  # when a byte last went either way on the connection

    def run(self, items: Iterator[Item]) -> Tally:
        """Send every item, until each is acknowledged (or the receiver kept failing: GaveUp)."""
        source = _ReadAhead(items) if self._pings else _Source(items)
        try:
            return self._run(source)
        finally:
            source.close()

    def _run(self, source: _Source) -> Tally:
        failures, delay = 0, self.settings.backoff
        while source.more() or self.sender.has_resend():
            acked_before = self.tally.acked
            try:
                self._connection(source)
            except _Lost as e:
                self.sender.connection_lost()
                problem = f"{self.target.where()}: {e}"
                self.tally.problems.append(problem)
                if self.tally.acked > acked_before:
                    failures, delay = 0, self.settings.backoff
                failures += 1
                if failures > self.settings.retries:
                    raise GaveUp(problem) from None
                self.on_problem(f"{problem}; connecting again in {delay:g} s")
                self.sleep(delay)
                delay = min(delay * 2, self.settings.max_backoff)
        return self.tally

    def _connect(self) -> socket.socket:
        t = self.target
        try:
            sock = socket.create_connection((t.host, t.port), timeout=self.settings.timeout)
        except TimeoutError:
            raise _Lost(f"no answer to the connection in {self.settings.timeout:g} s") from None
        except OSError as e:
            raise _Lost(_why(e)) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._last_io = time.monotonic()
        if self._ctx is None:
            return sock
        try:
            return self._ctx.wrap_socket(sock, server_hostname=t.host)
        except ssl.SSLCertVerificationError as e:
            sock.close()
            raise _Lost(f"TLS: the receiver's certificate was refused: {e.verify_message} (--ca)") from None
        except (ssl.SSLError, OSError) as e:
            sock.close()
            raise _Lost(f"TLS handshake failed: {_why(e).removeprefix('TLS: ')}") from None

    def _connection(self, source: _Source) -> None:
        sock = self._connect()
        self.tally.connections += 1
        sender, tally = self.sender, self.tally
        try:
            hello = sender.connection_made()
            if hello:
                self._write(sock, hello)
            while True:
                while sender.ready and sender.can_send():
                    if sender.has_resend():
                        data, n = sender.send_resend()
                        tally.resent += n
                    else:
                        items = source.take(self.settings.window, getattr(sender, "max_bytes", None),
                                            self._idle_left(sender))  # fmt: skip
                        if not items:
                            break
                        data = sender.send(items)
                        tally.sent += len(items)
                    self._write(sock, data)
                idle = not sender.outstanding and not sender.has_resend()
                if sender.ready and idle and source.done():
                    return
                if getattr(sender, "reconnect", False) and not sender.outstanding:
                    return  # the receiver closes this connection after its answer (HTTP)
                if self._pings and sender.ready and idle and not sender.pinging:  # type: ignore[attr-defined]
                    if self._idle_left(sender):
                        continue  # (the selection's wait ended early: wait again)
                    self._write(sock, sender.ping())  # type: ignore[attr-defined]  # idle: still there?
                self._read(sock)
        finally:
            _close(sock)

    def _idle_left(self, sender: Sender) -> float | None:
        """How long the loop may wait for the selection: as long as it takes (None), except on a
        connection that is PINGed when idle (Log Courier): there, not at all while events are
        outstanding (their ACKNs are read meanwhile), else until it has been idle `keepalive` s."""
        if not self._pings:
            return None
        if sender.outstanding or not sender.ready or sender.pinging:  # type: ignore[attr-defined]
            return 0.0
        return max(0.0, self._last_io + self.settings.keepalive - time.monotonic())

    def _write(self, sock: socket.socket, data: bytes) -> None:
        self._last_io = time.monotonic()
        try:
            sock.sendall(data)
        except TimeoutError:
            raise _Lost(f"stalled: the receiver read nothing for {self.settings.timeout:g} s") from None
        except OSError as e:
            raise _Lost(_why(e)) from None
        self.tally.bytes += len(data)

    def _read(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(RECV_SIZE)
        except TimeoutError:
            waiting = self.sender.outstanding
            if not waiting and getattr(self.sender, "pinging", False):
                raise _Lost(f"stalled: no PONG to a PING in {self.settings.timeout:g} s") from None
            what = f"{waiting} events waiting" if waiting else "the handshake waiting"
            raise _Lost(f"stalled: no acknowledgement in {self.settings.timeout:g} s ({what})") from None
        except OSError as e:
            raise _Lost(_why(e)) from None
        self._last_io = time.monotonic()
        if not data:
            raise _Lost(
                f"the receiver closed the connection ({self.sender.outstanding} events not acknowledged)"
            )
        try:
            events = self.sender.receive(data)
        except ProtocolError as e:
            raise _Lost(str(e)) from None
        except Rejected as e:
            problem = f"{self.target.where()}: {e}"
            self.tally.problems.append(problem)
            raise Refused(problem) from None
        for ev in events:
            if isinstance(ev, Acked):
                self.journal.add(ev.keys)
                self.tally.acked += len(ev.keys)
                self.on_ack(self.tally)
            elif isinstance(ev, Ready):
                self.tally.receiver = ev.receiver


class _Lost(Exception):
    """The connection is over; the message says why, in one line."""


class _Source:
    """The items to send, taken a window at a time, read as the loop asks for them."""

    def __init__(self, items: Iterator[Item]) -> None:
        self._items = items
        self._next: Item | None = None
        self._done = False
        self._then: float | None = None  # how long take() waits for each item after the first

    def _fill(self, wait: float | None) -> bool:
        """Whether an item is at hand (`_next`), waiting up to `wait` s for one (None: until it
        comes or the selection ends)."""
        if self._next is None and not self._done:
            self._next = next(self._items, None)
            self._done = self._next is None
        return self._next is not None

    def more(self) -> bool:
        """Whether items are left (waiting until that is known)."""
        return self._fill(None)

    def done(self) -> bool:
        """The selection ended and every item was taken (waiting until that is known)."""
        return not self._fill(None)

    def take(self, n: int, max_bytes: int | None = None, wait: float | None = None) -> list[Item]:
        """Up to `n` items and, with `max_bytes`, up to that many bytes of payloads (at least
        one item, whatever its size: the receiver says whether it takes it); none when the
        selection ended, or nothing came within `wait` seconds."""
        out: list[Item] = []
        if not self._fill(wait):
            return out
        if max_bytes is None and self._then is None:  # read as asked: the rest in one C call
            out.append(self._next)  # type: ignore[arg-type]
            self._next = None
            out += itertools.islice(self._items, n - 1)
            self._done = len(out) < n
            return out
        size = 0
        while len(out) < n and self._fill(self._then):
            nxt: Item = self._next  # type: ignore[assignment]
            if max_bytes is not None:
                size += len(nxt[1])
                if size > max_bytes and out:
                    break
            out.append(nxt)
            self._next = None
        return out

    def close(self) -> None:
        """Stop reading ahead (the caller may read the rest of the selection itself)."""


class _End:
    """The selection ended (or raised `error`, which the loop raises in its turn)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class _ReadAhead(_Source):
    """The selection read in a thread, a bounded queue ahead, so that the loop can wait for it
    with a timeout: a Log Courier connection left idle while a capture is read (nothing
    selected for a while) is kept alive with PINGs meanwhile, as the Go shipper does. A window
    takes what has come (it does not wait to fill: the Go shipper sends a partial spool after
    its `spool timeout` the same way)."""

    DEPTH = 4096  # items read ahead at most

    def __init__(self, items: Iterator[Item]) -> None:
        super().__init__(items)
        self._then = 0.0
        self._queue: queue.Queue[Item | _End] = queue.Queue(self.DEPTH)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="replay-selection", daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        try:
            for item in self._items:
                while not self._stop.is_set():
                    try:
                        self._queue.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        pass
                if self._stop.is_set():
                    return
            self._queue.put(_End())
        except BaseException as e:  # the selection's own errors (a refused event): the loop's
            self._queue.put(_End(e))

    def _fill(self, wait: float | None) -> bool:
        if self._next is None and not self._done:
            try:
                got = self._queue.get(timeout=wait) if wait is None or wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                return False
            if isinstance(got, _End):
                self._done = True
                if got.error is not None:
                    raise got.error
            else:
                self._next = got
        return self._next is not None

    def done(self) -> bool:
        """(never waits: the loop pings meanwhile)"""
        self._fill(0)
        return self._done and self._next is None

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


# TLS alerts a receiver sends about the client's certificate (OpenSSL's reason names)
_CLIENT_CERT = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "TLS: the receiver requires a client certificate (--cert, --key)",
    "TLSV1_ALERT_UNKNOWN_CA": "TLS: the receiver does not know the client certificate's CA (--cert)",
    "SSLV3_ALERT_BAD_CERTIFICATE": "TLS: the receiver refused the client certificate (--cert)",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "TLS: the receiver refused the client certificate (--cert)",
}


def _why(e: OSError) -> str:
    if isinstance(e, ssl.SSLError):
        reason = e.reason or ""
        return _CLIENT_CERT.get(reason, f"TLS: {reason.replace('_', ' ').lower() or e}")
    if isinstance(e, ConnectionRefusedError):
        return "connection refused (nothing listens there?)"
    if isinstance(e, ConnectionResetError):
        return "the receiver reset the connection"
    if isinstance(e, BrokenPipeError):
        return "the receiver closed the connection while events were being written"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve the host: {e.strerror}"
    return e.strerror or str(e)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
