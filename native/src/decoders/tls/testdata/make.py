"""Make the TLS fixtures of the core's tests (run once; the outputs are committed).

Each fixture is one connection between two genuine TLS stacks: Python's `ssl` (OpenSSL) as client
and server, joined in memory (`SSLObject` over `MemoryBIO`s), the client writing its NSS key log
through `SSLContext.keylog_filename`. Every flight of bytes is written as one line `c2s HEX` or
`s2c HEX` in `<name>.transcript` (the TCP payloads in the order the peers sent them), the key log
beside it as `<name>.keylog`. The application data is fixed so the tests can assert it: the
client sends three records of one line each, the server answers with one.

    python3 make.py            # in this directory; needs the `openssl` command for the certificate

TLS 1.3 suites are chosen through an OpenSSL configuration (`Ciphersuites`), since Python's `ssl`
has no call for them; each fixture runs in its own process for that.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUEST = b"ping from the client over TLS\n" * 3
REPLY = b"pong from the server\n"

FIXTURES = {
    # name: (max version, TLS 1.2 cipher string or TLS 1.3 suite, options to clear, resume)
    "tls12-aes128gcm": ("1.2", "ECDHE-RSA-AES128-GCM-SHA256", 0, False),
    "tls12-aes256gcm": ("1.2", "ECDHE-RSA-AES256-GCM-SHA384", 0, False),
    "tls12-chacha20": ("1.2", "ECDHE-RSA-CHACHA20-POLY1305", 0, False),
    "tls12-cbc-sha-etm": ("1.2", "ECDHE-RSA-AES128-SHA", 0, False),
    # OpenSSL's SSL_OP_NO_ENCRYPT_THEN_MAC: MAC-then-encrypt, the classic CBC construction.
    "tls12-cbc-sha384-mte": ("1.2", "ECDHE-RSA-AES256-SHA384", 1 << 19, False),
    "tls12-resumed": ("1.2", "ECDHE-RSA-AES128-GCM-SHA256", 0, True),
    "tls13-aes128gcm": ("1.3", "TLS_AES_128_GCM_SHA256", 0, False),
    "tls13-aes256gcm": ("1.3", "TLS_AES_256_GCM_SHA384", 0, False),
    "tls13-chacha20": ("1.3", "TLS_CHACHA20_POLY1305_SHA256", 0, False),
}


def pump(
    src: ssl.SSLObject, src_out: ssl.MemoryBIO, dst_in: ssl.MemoryBIO, lines: list[str], tag: str
) -> None:
    data = src_out.read()
    if data:
        lines.append(f"{tag} {data.hex()}")
        dst_in.write(data)


def connect(cctx: ssl.SSLContext, sctx: ssl.SSLContext, lines: list[str], session=None) -> ssl.SSLSession:
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = cctx.wrap_bio(c_in, c_out, server_hostname="logstash.example", session=session)
    server = sctx.wrap_bio(s_in, s_out, server_side=True)
    done = [False, False]
    for _ in range(20):
        for i, peer in enumerate((client, server)):
            if not done[i]:
                try:
                    peer.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
        pump(client, c_out, s_in, lines, "c2s")
        pump(server, s_out, c_in, lines, "s2c")
        if all(done):
            break
    for line in REQUEST.splitlines(keepends=True):
        client.write(line)  # one record each
    pump(client, c_out, s_in, lines, "c2s")
    got = b"".join(server.read(100) for _ in REQUEST.splitlines())
    assert got == REQUEST
    server.write(REPLY)
    pump(server, s_out, c_in, lines, "s2c")
    assert client.read(100) == REPLY
    return client.session


def make(name: str, cert: Path, key: Path) -> None:
    version, suite, clear, resume = FIXTURES[name]
    keylog = HERE / f"{name}.keylog"
    keylog.unlink(missing_ok=True)
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.check_hostname = False
    cctx.verify_mode = ssl.CERT_NONE
    cctx.keylog_filename = str(keylog)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    for ctx in (cctx, sctx):
        ctx.options |= clear
        if version == "1.2":
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            ctx.set_ciphers(suite)
    lines: list[str] = []
    session = connect(cctx, sctx, lines)
    if resume:
        lines = []  # the fixture is the resumed connection
        connect(cctx, sctx, lines, session=session)
    (HERE / f"{name}.transcript").write_text("\n".join(lines) + "\n")


def main() -> None:
    if len(sys.argv) == 4:
        make(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=logstash.example",
             "-keyout", key, "-out", cert],
            check=True,
            capture_output=True,
        )  # fmt: skip
        for name, (version, suite, _, _) in FIXTURES.items():
            env = dict(os.environ)
            if version == "1.3":
                conf = Path(tmp, f"{name}.cnf")
                conf.write_text(
                    "openssl_conf = conf\n[conf]\nssl_conf = ssl\n[ssl]\nsystem_default = tls\n"
                    f"[tls]\nCiphersuites = {suite}\n"
                )
                env["OPENSSL_CONF"] = str(conf)
            subprocess.run([sys.executable, __file__, name, cert, key], check=True, env=env)


if __name__ == "__main__":
    main()
