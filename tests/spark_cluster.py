"""A Spark standalone cluster on loopback for the tests: a master and one-core workers, each its own
JVM started with pyspark's `bin/spark-class`, and executors whose Python has no wirelog.

Every JVM runs in a session of its own, so stopping a worker by its PID's process group also ends
the executors and Python workers it started (`kill_worker` kills the worker JVM alone, as a crash).
"""

from __future__ import annotations

import contextlib
import importlib.metadata as metadata
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXECUTOR_VENV = ROOT / ".cache" / "spark-executor"  # .cache/ is ignored by git: made once
# What PySpark's Python workers import for Arrow (mapInArrow, the Python data source): nothing else.
EXECUTOR_PACKAGES = ("pyarrow", "pandas")
START_TIMEOUT = 120.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def executor_python() -> str:
    """An interpreter with only pyarrow and pandas (the driver's versions), made once under .cache/."""
    pins = [f"{p}=={metadata.version(p)}" for p in EXECUTOR_PACKAGES]
    python = EXECUTOR_VENV / "bin" / "python"
    stamp = EXECUTOR_VENV / "wirelog-test-stamp"
    want = f"{sys.version}\n{' '.join(pins)}\n"
    if not (stamp.exists() and stamp.read_text() == want):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(EXECUTOR_VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pins]
        subprocess.run(pip, check=True)
        stamp.write_text(want)
    return str(python)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    """Master and workers; `url` is what `--master` takes."""

    tmp: Path
    port: int = field(default_factory=free_port)
    master: subprocess.Popen | None = None
    workers: dict[int, subprocess.Popen] = field(default_factory=dict)
    killed: list[int] = field(default_factory=list)  # process groups of killed workers (executors live on)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, cls: str, *args: str) -> subprocess.Popen:
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1"}
        env.pop("PYSPARK_GATEWAY_PORT", None)
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - the JVM writes it until stopped
        cmd = [str(spark_home() / "bin" / "spark-class"), cls, *args]
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def start(self, workers: int = 2) -> Cluster:
        props = self.tmp / "master.properties"
        props.write_text("spark.master.rest.enabled=false\nspark.ui.enabled=false\n")
        self.master = self._spawn(
            "master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(self.port), "--webui-port", str(free_port()), "--properties-file", str(props),
        )  # fmt: skip
        self._wait(lambda: "I have been elected leader" in self.log("master"), "the master to start")
        for i in range(workers):
            self.start_worker(i)
        return self

    def start_worker(self, i: int) -> None:
        before = self.log("master").count("Registering worker")
        work = self.tmp / f"worker{i}"
        work.mkdir(exist_ok=True)
        self.workers[i] = self._spawn(
            f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
            "--cores", "1", "--memory", "2g", "--work-dir", str(work), "--webui-port", str(free_port()),
            self.url,
        )  # fmt: skip
        self._wait(lambda: self.log("master").count("Registering worker") > before, f"worker {i} to register")

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def executor_logs(self, i: int) -> str:
        """What worker i's executors wrote on stderr (Spark logs their tasks there)."""
        return "".join(
            p.read_text(errors="replace") for p in (self.tmp / f"worker{i}").glob("app-*/*/stderr")
        )

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():
            dead = [p for p in (self.master, *self.workers.values()) if p and p.poll() is not None]
            if dead or time.monotonic() > deadline:
                names = ["master", *(f"worker{i}" for i in self.workers)]
                logs = "\n".join(f"--- {n}\n{self.log(n)[-3000:]}" for n in names)
                raise RuntimeError(f"timed out waiting for {what}\n{logs}")
            time.sleep(0.2)

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker i's JVM only, as a crash (its executor notices and ends on its own)."""
        proc = self.workers.pop(i)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        self.killed.append(proc.pid)

    def stop(self) -> None:
        """Workers first, then the master: SIGTERM to each JVM, SIGKILL to whatever its group left."""
        procs = [*self.workers.values(), *([self.master] if self.master else [])]
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        for group in [p.pid for p in procs] + self.killed:
            with contextlib.suppress(ProcessLookupError):  # its executors and their Python workers
                os.killpg(group, signal.SIGKILL)
