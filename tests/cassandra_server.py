"""A real Apache Cassandra for the tests: started from the jars `make peers` puts in .cache/cassandra.

The jars come from Maven Central (tests/peers/cassandra/pom.xml, mk/cassandra.mk); this module writes a
cassandra.yaml into a temporary directory and runs `java ... CassandraDaemon` in the foreground on
127.0.0.1 with ports of its own, waits until the default superuser can log in, and stops it with SIGTERM.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "cassandra"
# The versions mk/cassandra.mk installs (CASSANDRA_VERSIONS there); the tests run against each one cached.
VERSIONS = ("5.0.5", "4.1.9")
USER = PASSWORD = "cassandra"  # the default superuser PasswordAuthenticator creates
START_TIMEOUT = 180.0
ROW_DELAY_MS = 5
STOP_TIMEOUT = 60.0

# Cassandra's conf/jvm17-server.options (JPMS section) plus the two Java 11 exports 4.x still uses.
JPMS = [
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports=java.sql/java.sql=ALL-UNNAMED",
    "--add-exports=java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports=jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
]
# 4.1 is not supported on Java 17 upstream: its jamm 0.3 measures objects by reflection into these.
JPMS_41 = [
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in (
        "java.util.concurrent",
        "java.util.concurrent.atomic",
        "java.util.concurrent.locks",
        "java.net",
        "java.math",
        "java.time",
        "java.security",
        "java.lang.invoke",
        "java.lang.ref",
        "sun.nio.fs",
        "jdk.internal.misc",
    )
]

JVM = [
    "-Xms512m",
    "-Xmx1g",
    "-Xss512k",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=300",
    "-XX:MaxDirectMemorySize=256m",
    "-XX:+UseStringDeduplication",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.net.preferIPv4Stack=true",
    "-Djdk.attach.allowAttachSelf=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dcassandra-foreground=yes",
    # single node, nothing to wait for: no gossip settling, the superuser at once, no JMX server
    "-Dcassandra.skip_wait_for_gossip_to_settle=0",
    "-Dcassandra.superuser_setup_delay_ms=0",
    "-Dcassandra.ring_delay_ms=1000",
    "-Dcassandra.load_ring_state=false",
    # Cassandra's own test hook (cassandra-dtest uses it for read timeouts): sleep this long per row
    # iterated in keyspaces not named system*; see YAML's read_request_timeout
    f"-Dcassandra.test.read_iteration_delay_ms={ROW_DELAY_MS}",
]

# Settings with the names Cassandra 4.1 and 5.0 both accept. Small caches and segments: a test node.
YAML = """\
cluster_name: wirelog-test
num_tokens: 1
allocate_tokens_for_local_replication_factor: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{seed}"
listen_address: {host}
rpc_address: {host}
storage_port: {storage_port}
native_transport_port: {native_port}
start_native_transport: true
native_transport_allow_older_protocols: true
auto_bootstrap: false
authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
data_file_directories:
  - {root}/data
commitlog_directory: {root}/commitlog
hints_directory: {root}/hints
saved_caches_directory: {root}/saved_caches
cdc_raw_directory: {root}/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 8MiB
hinted_handoff_enabled: false
auto_snapshot: false
snapshot_on_duplicate_row_detection: false
incremental_backups: false
memtable_allocation_type: heap_buffers
key_cache_size: 8MiB
counter_cache_size: 1MiB
file_cache_size: 32MiB
concurrent_reads: 4
concurrent_writes: 4
concurrent_counter_writes: 4
concurrent_compactors: 1
# server errors to provoke: a read over more tombstones than this fails with READ_FAILURE (0x1300);
# a read iterating more than read_request_timeout / read_iteration_delay_ms rows with READ_TIMEOUT (0x1200)
tombstone_warn_threshold: 20
tombstone_failure_threshold: 50
read_request_timeout: 1000ms
"""

LOGBACK = """\
<configuration scan="false">
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


@dataclass
class CassandraServer:
    """A running node: where to reach it and what it cost to start."""

    version: str
    host: str
    port: int
    storage_port: int
    proc: subprocess.Popen[bytes]
    log: Path
    startup_seconds: float

    def rss_kib(self, field: str = "VmRSS") -> int:
        """Resident memory of the JVM from /proc (VmHWM: the peak so far)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise LookupError(field)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def lib_dir(version: str) -> Path:
    return CACHE / version / "lib"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def command(version: str, root: Path) -> list[str]:
    lib = lib_dir(version)
    jars = sorted(lib.glob("*.jar"))
    # Cassandra sizes objects with jamm; as a Java agent it measures instead of guessing.
    agent = [f"-javaagent:{j}" for j in jars if j.name.startswith("jamm-")][:1]
    return [
        "java",
        *JVM,
        *JPMS,
        *(JPMS_41 if version.startswith("4.") else []),
        *agent,
        f"-Dcassandra.config=file://{root}/cassandra.yaml",
        f"-Dcassandra.storagedir={root}",
        f"-Dcassandra.logdir={root}/logs",
        f"-Dlogback.configurationFile={root}/logback.xml",
        "-cp",
        os.pathsep.join(str(j) for j in jars),
        "org.apache.cassandra.service.CassandraDaemon",
    ]


def _can_log_in(host: str, port: int) -> bool:
    """The native port is open and the default superuser exists (it is created just after start)."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import Cluster

    cluster = Cluster(
        [host],
        port=port,
        auth_provider=PlainTextAuthProvider(USER, PASSWORD),
        connect_timeout=5,
        control_connection_timeout=5,
    )
    try:
        cluster.connect().execute("SELECT release_version FROM system.local")
        return True
    except Exception:  # any driver error while the node is still starting: ask again
        return False
    finally:
        cluster.shutdown()


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


def start(
    version: str,
    root: Path,
    host: str = "127.0.0.1",
    seed: str | None = None,
    login: bool = True,
    timeout: float = START_TIMEOUT,
) -> CassandraServer:
    """Start a node on `host` in `root` (its own seed unless `seed`, "ip:storage_port", names one),
    ready when its native port is open and (with `login`) the default superuser can log in; a node that
    dies because a port was taken is retried on new ports."""
    for _attempt in range(3):
        started = time.monotonic()
        server = _launch(version, root, host, seed)
        try:
            while time.monotonic() < started + timeout:
                if server.proc.poll() is not None:
                    break
                if _port_open(host, server.port) and (not login or _can_log_in(host, server.port)):
                    server.startup_seconds = time.monotonic() - started
                    return server
                time.sleep(1)
        except BaseException:  # an interrupt or a bug here must not leave the JVM running
            stop(server)
            raise
        else:
            tail = server.log_tail()
            stop(server)
            pytest.fail(f"Cassandra {version} not ready after {timeout:.0f} s; log tail:\n{tail}")
        tail = server.log_tail()
        if "Address already in use" not in tail:
            pytest.fail(f"Cassandra {version} exited with {server.proc.returncode}; log tail:\n{tail}")
    pytest.fail(f"Cassandra {version}: no free ports after 3 attempts")


def _launch(version: str, root: Path, host: str, seed: str | None) -> CassandraServer:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    native_port, storage_port = free_port(host), free_port(host)
    (root / "cassandra.yaml").write_text(
        YAML.format(
            root=root,
            host=host,
            seed=seed or f"{host}:{storage_port}",
            native_port=native_port,
            storage_port=storage_port,
        )
    )
    (root / "logback.xml").write_text(LOGBACK)
    log = root / "cassandra.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command(version, root),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=root,
            preexec_fn=_die_with_parent,
        )
    return CassandraServer(version, host, native_port, storage_port, proc, log, 0.0)


def _die_with_parent() -> None:
    """In the child before exec: a killed pytest must not leave a 1 GB JVM behind (Linux prctl)."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def stop(server: CassandraServer) -> None:
    """SIGTERM (Cassandra drains and exits), then SIGKILL if it hangs."""
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(timeout=10)


def skip_reason(version: str) -> str | None:
    """Why a node of `version` cannot be started here, or None."""
    if shutil.which("java") is None:
        return "java not found (install a JDK 17, then run `make peers`)"
    if not list(lib_dir(version).glob("cassandra-all-*.jar")):
        return f"Cassandra {version} jars not in {lib_dir(version)} (run `make peers`; needs java and mvn)"
    return None


@pytest.fixture(scope="session", params=VERSIONS, ids=[f"cassandra-{v}" for v in VERSIONS])
def cassandra_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CassandraServer]:
    version: str = request.param
    reason = skip_reason(version)
    if reason:
        pytest.skip(reason)
    server = start(version, tmp_path_factory.mktemp(f"cassandra-{version}"))
    try:
        yield server
    finally:
        stop(server)
