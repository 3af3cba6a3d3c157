"""TLS decryption against plaintext: `convert --events --to json` of a TLS 1.3 AES-128-GCM Lumberjack
capture and of the same traffic in plaintext, same run (target: TLS CPU time <= 1.3x plaintext's).

Both captures hold the same Beats windows (bench_lumberjack's generator: `2W n` + one `2C` zlib frame
of Filebeat-shaped `2J` events, answered by `2A n`) over N connections, cut into 1448-byte segments.
In the TLS capture each connection is a genuine TLS 1.3 conversation between two OpenSSL stacks
(Python `ssl`: a client and a server `SSLObject` over `MemoryBIO`s, a self-signed certificate made
at run time, the suite forced to TLS_AES_128_GCM_SHA256 through an OpenSSL configuration, since
Python's `ssl` cannot choose TLS 1.3 suites); the client's `keylog_filename` writes the key log.
Then, alternating the two captures (the machine drifts), several times each (median):

    wirelog convert TLS.pcap --events --to json --tls-keylog KEYS     CPU time (user + system)
    wirelog convert PLAIN.pcap --events --to json                     of the child process

and events/s of both, the ratio, and whether both outputs hold the same events (documents and ACK
state, in order; frames, times and the `tls` field differ by nature).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from bench_lumberjack import MSS, cpu_seconds, lumberjack_window, wirelog
from gen_capture import Connection, PcapWriter

SUITE = "TLS_AES_128_GCM_SHA256"
PORT = 5044
TARGET = 1.3


class TlsConnection:
    """A TCP Connection whose bytes go through a TLS client and server joined in memory: what either
    side sends is encrypted by its SSLObject, written to the capture as ciphertext, and decrypted by
    the peer (so the conversation is a real one and the peer's buffers stay empty)."""

    def __init__(self, tcp: Connection, client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext) -> None:
        self._tcp = tcp
        self._bios = [(ssl.MemoryBIO(), ssl.MemoryBIO()) for _ in range(2)]  # (incoming, outgoing)
        client = client_ctx.wrap_bio(*self._bios[0], server_hostname="logstash.example")
        server = server_ctx.wrap_bio(*self._bios[1], server_side=True)
        self._ends = (client, server)
        done = [False, False]
        while not all(done):
            for i, end in enumerate(self._ends):
                if not done[i]:
                    try:
                        end.do_handshake()
                        done[i] = True
                    except ssl.SSLWantReadError:
                        pass
                self._flush(i == 0)
        if client.cipher()[0] != SUITE or client.version() != "TLSv1.3":
            raise SystemExit(f"negotiated {client.version()} {client.cipher()[0]}, not TLS 1.3 {SUITE}")

    def _flush(self, to_server: bool) -> bytes:
        """Carry what one side wrote to the other, through the capture."""
        wire = self._bios[0 if to_server else 1][1].read()
        if wire:
            self._tcp.send(to_server, wire)
            self._bios[1 if to_server else 0][0].write(wire)
        return wire

    def send(self, to_server: bool, data: bytes) -> None:
        self._ends[0 if to_server else 1].write(data)
        self._flush(to_server)
        peer = self._ends[1 if to_server else 0]
        got = bytearray()
        while len(got) < len(data):
            got += peer.read(len(data) - len(got))
        assert got == data, "the TLS peer read other bytes than were sent"


class Tee:
    """Sends the same bytes on several connections (the plaintext and the TLS capture)."""

    def __init__(self, *conns: Connection | TlsConnection) -> None:
        self._conns = conns

    def send(self, to_server: bool, data: bytes) -> None:
        for conn in self._conns:
            conn.send(to_server, data)


def write_captures(tmp: Path, connections: int, windows: int, size: int) -> int:
    """TLS and plaintext captures of the same windows, and the key log; returns the event count.
    Runs in a child whose OPENSSL_CONF allows only SUITE (see `main`)."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=logstash.example",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.check_hostname = False
    client_ctx.verify_mode = ssl.CERT_NONE
    client_ctx.keylog_filename = str(tmp / "keys.log")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    n = 0
    with (tmp / "plain.pcap").open("wb") as plain_f, (tmp / "tls.pcap").open("wb") as tls_f:
        plain_w, tls_w = PcapWriter(plain_f, step_ns=20_000), PcapWriter(tls_f, step_ns=20_000)
        for c in range(connections):
            ends = (0x0A020001 + c, 40000 + c, 0x0A010001, PORT)
            plain, tcp = Connection(plain_w, *ends, mss=MSS), Connection(tls_w, *ends, mss=MSS)
            plain.handshake()
            tcp.handshake()
            both = Tee(plain, TlsConnection(tcp, client_ctx, server_ctx))
            for _ in range(windows):
                lumberjack_window(both, n, size)
                n += size
    return n


def events_digest(pcap: Path, *extra: str) -> tuple[int, str]:
    """(events, SHA-256 of their documents and ACK state in order) of a conversion's output."""
    digest, n = hashlib.sha256(), 0
    cmd = wirelog(pcap, "--events", "--to", "json", *extra)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE) as proc:
        for line in proc.stdout:
            rec = orjson.loads(line)
            digest.update(orjson.dumps([rec["event"], rec.get("acked")]))
            n += 1
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return n, digest.hexdigest()


def bench(tmp: Path, args: argparse.Namespace) -> None:
    conf = tmp / "openssl.cnf"
    conf.write_text(
        "openssl_conf = conf\n[conf]\nssl_conf = ssl\n[ssl]\nsystem_default = tls\n"
        f"[tls]\nCiphersuites = {SUITE}\n"
    )
    sizes = [str(args.connections), str(args.windows), str(args.size)]
    subprocess.run(
        [sys.executable, __file__, "--write", str(tmp), *sizes],
        check=True,
        env={**os.environ, "OPENSSL_CONF": str(conf)},
    )
    tls, plain, keys = tmp / "tls.pcap", tmp / "plain.pcap", tmp / "keys.log"
    n = int((tmp / "events").read_text())
    print(
        f"{n:,} events on {args.connections} connections: plaintext capture {plain.stat().st_size / 1e6:.0f} MB, "
        f"TLS 1.3 {SUITE} capture {tls.stat().st_size / 1e6:.0f} MB"
    )
    runs: dict[str, list[float]] = {"plain": [], "tls": []}
    for _ in range(args.runs):
        runs["plain"].append(cpu_seconds(wirelog(plain, "--events", "--to", "json", "-o", os.devnull)))
        runs["tls"].append(
            cpu_seconds(wirelog(tls, "--events", "--to", "json", "--tls-keylog", str(keys), "-o", os.devnull))
        )
    cpu = {name: statistics.median(times) for name, times in runs.items()}
    for name, label in (("plain", "plaintext"), ("tls", "TLS (--tls-keylog)")):
        spread = ", ".join(f"{t:.2f}" for t in runs[name])
        print(f"  {label:19}: {cpu[name]:.2f} s CPU = {n / cpu[name]:,.0f} events/s   (runs: {spread})")
    ratio = cpu["tls"] / cpu["plain"]
    print(
        f"  ratio TLS / plaintext: {ratio:.2f}x (target <= {TARGET}): {'met' if ratio <= TARGET else 'MISSED'}"
    )
    plain_events, tls_events = events_digest(plain), events_digest(tls, "--tls-keylog", str(keys))
    same = plain_events == tls_events and plain_events[0] == n
    print(
        f"  events out: plaintext {plain_events[0]:,}, TLS {tls_events[0]:,}; same documents and ACKs: {same}"
    )
    if not same:
        raise SystemExit("the TLS capture does not convert to the plaintext capture's events")


def main() -> None:
    if sys.argv[1:2] == ["--write"]:  # the child that writes the captures (under OPENSSL_CONF)
        tmp, sizes = Path(sys.argv[2]), map(int, sys.argv[3:6])
        (tmp / "events").write_text(str(write_captures(tmp, *sizes)))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=40)
    ap.add_argument("--windows", type=int, default=75, help="windows per connection")
    ap.add_argument("--size", type=int, default=512, help="events per window")
    ap.add_argument("--runs", type=int, default=3, help="runs of each conversion (median)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench(Path(tmp), args)


if __name__ == "__main__":
    main()
