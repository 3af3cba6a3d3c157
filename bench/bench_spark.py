"""`wirelog convert --to parquet` on 40 captures (~1 GB): the local engine against Spark local[2].

The captures are Lumberjack v2 (Beats windows, zlib-compressed JSON events, ACKs) and CQL v4
(QUERY → RESULT rows) traffic from gen_capture.generate(); a few distinct ones are generated and
copied to make up the set (the work per byte is what is measured, not the variety). Then
    local:  wirelog convert FILES... --to parquet -o DIR/     (one process, one capture after the other)
    spark:  convert_spark(FILES, "parquet", DIR, ...)          (local[2]: two Python workers)
each in a fresh process. With `--one`, the input is one Lumberjack capture of `--mb` MB instead (the
split engine: byte-range splits routed by several tasks, each group of hosts read back and decoded by one; issue target
>= 1.6x on 2 cores for a >= 1 GB capture). Spark's time is split into start-up (JVM + SparkSession), a
first tiny job (planning and Python worker start-up) and the conversion itself; the ratio is printed
both with and without the start-up, and per core (efficiency, goal >= 0.8). Each conversion's
phases (the engine describes its Spark jobs: plan, read + shuffle + decode, write) are printed with
their wall time and the time their tasks ran, from Spark's REST API. Both outputs must hold the same
number of rows. With `--one`, the routing, its shuffle and the reading back alone (no decoding) are measured in the same
session: a floor no split conversion can go below; and the floor of the events themselves (Python zlib + orjson of
every event of the capture, bench_lumberjack.floor), which the local engine's CPU and wall time are printed against.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds

sys.path.insert(0, str(Path(__file__).parent))
from bench_lumberjack import floor, inflate_only
from gen_capture import generate

ROOT = Path(__file__).resolve().parents[1]
BYTES_PER_PACKET = {"lumberjack": 305, "cql": 191}  # what generate() writes on average

SPARK_RUN = """
import json, sys, time, urllib.request
from datetime import datetime
t0 = time.perf_counter()
from wirelog.engine.local import Options
from wirelog.engine.spark import convert_spark, session
master, repeat, tiny, out, *files = sys.argv[1:]
spark = session(master)
sc = spark.sparkContext
t1 = time.perf_counter()
convert_spark([tiny], "parquet", out + "-tiny", Options(), master)
t2 = time.perf_counter()
jobs = []
for i in range(int(repeat)):
    sc.setJobGroup(f"conversion-{i}", f"conversion {i}")
    start = time.perf_counter()
    rows = convert_spark(files, "parquet", out, Options(), master)
    jobs.append(time.perf_counter() - start)
sc.setJobGroup("floor", "floor")
floors = {}
if len(files) == 1:  # one capture read in splits: what Spark alone costs, without decoding
    from wirelog.engine.spark import SPLIT_SIZE, TASKS_PER_CORE
    from wirelog.engine.spark_split import routed, spark_plan
    from wirelog.engine.splits import routed_segments
    tasks = TASKS_PER_CORE * sc.defaultParallelism
    start = time.perf_counter()
    splits = spark_plan(spark, files[0], SPLIT_SIZE)
    path = files[0]
    def read_back(pairs):  # a group's records read back into segments, nothing reassembled
        import pyarrow as pa
        blobs = (b for _, (_, b) in pairs if b)
        yield sum(pa.table(s).num_rows for s in routed_segments(path, path, blobs))  # Arrow C streams
    routed(spark, path, "x", splits, tasks).mapPartitions(read_back).collect()
    floors["shuffle"] = time.perf_counter() - start
# per phase of the first conversion (the engine describes its jobs): wall time from Spark's own
# accounting (its REST API), and the time its tasks ran (summed over cores)
api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
def get(path):
    with urllib.request.urlopen(api + path) as r:
        return json.load(r)
def seconds(when):  # e.g. 2026-11-27T11:10:05.123GMT
    return datetime.strptime(when, "%Y-%m-%dT%H:%M:%S.%f%Z").timestamp()
stages = {s["stageId"]: s for s in get("/stages?status=complete")}
phases = [[] for _ in jobs]  # per conversion
for job in sorted(get("/jobs"), key=lambda j: j["jobId"]):
    if not job.get("jobGroup", "").startswith("conversion-"):
        continue
    busy = sum(stages[i]["executorRunTime"] for i in job["stageIds"] if i in stages) / 1e3
    phases[int(job["jobGroup"].split("-")[1])].append(
        [job.get("description", job["name"]), seconds(job["completionTime"]) - seconds(job["submissionTime"]), busy])
print(json.dumps({"startup": t1 - t0, "first_job": t2 - t1, "jobs": jobs, "rows": rows, "floors": floors,
                  "phases": phases, "cores": sc.defaultParallelism}))
"""


def make_captures(directory: Path, count: int, total_mb: float, distinct: int) -> list[Path]:
    """`count` captures of about total_mb / count MB each, half Lumberjack and half CQL."""
    per_capture = total_mb * 1e6 / count
    originals = []
    for i in range(distinct):
        payload = ("lumberjack", "cql")[i % 2]
        path = directory / f"orig-{i:02d}-{payload}.pcap"
        generate(str(path), int(per_capture / BYTES_PER_PACKET[payload]), seed=i + 1, payload=payload)
        originals.append(path)
    paths = []
    for i in range(count):
        src = originals[i % distinct]
        dst = directory / f"capture-{i:02d}-{src.name.split('-')[-1]}"
        shutil.copyfile(src, dst)
        paths.append(dst)
    for src in originals:
        src.unlink()
    return paths


def lumberjack_bodies(pcap: Path) -> list[bytes]:
    """The compressed bodies (`2C` frames) of a Lumberjack capture's client streams, in order: what
    the floor inflates and parses. For a capture as gen_capture writes it (classic pcap, Ethernet,
    IPv4, no bytes missing; segments swapped or sent twice are put in order); ValueError for anything
    else."""
    data = pcap.read_bytes()
    if data[:4] not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") or data[20:24] != b"\x01\x00\x00\x00":
        raise ValueError("not a little-endian classic pcap of Ethernet frames")
    segments: dict[tuple[bytes, int], list[tuple[int, bytes]]] = {}
    starts: dict[tuple[bytes, int], int] = {}
    at = 24
    while at + 16 <= len(data):
        length = int.from_bytes(data[at + 8 : at + 12], "little")
        frame = data[at + 16 : at + 16 + length]
        at += 16 + length
        ip = frame[14:]
        if frame[12:14] != b"\x08\x00" or ip[9] != 6:
            raise ValueError("not the Ethernet/IPv4/TCP capture gen_capture writes")
        tcp = ip[(ip[0] & 15) * 4 : int.from_bytes(ip[2:4], "big")]
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if int.from_bytes(tcp[2:4], "big") == 5044:  # client → server
            key, seq = (ip[12:16], int.from_bytes(tcp[0:2], "big")), int.from_bytes(tcp[4:8], "big")
            if tcp[13] & 0x02:  # SYN: the stream's first byte is the next
                starts[key] = seq + 1
            elif payload:
                segments.setdefault(key, []).append((seq, payload))
    bodies = []
    for key, pieces in segments.items():
        first = starts.get(key)
        if first is None:
            raise ValueError("a client stream without its SYN")
        stream = bytearray()
        for rel, payload in sorted(((seq - first) % (1 << 32), payload) for seq, payload in pieces):
            if rel > len(stream):
                raise ValueError("a client stream with bytes missing")
            stream += payload[len(stream) - rel :]  # a copy sent again adds only what is new
        p = 0
        while p + 6 <= len(stream):
            kind, value = stream[p : p + 2], int.from_bytes(stream[p + 2 : p + 6], "big")
            if kind == b"2W":
                p += 6
            elif kind == b"2C":
                bodies.append(bytes(stream[p + 6 : p + 6 + value]))
                p += 6 + value
            else:
                raise ValueError(f"a client frame {kind!r} the floor does not read")
    if not bodies:
        raise ValueError("no compressed Lumberjack window on port 5044")
    return bodies


def print_floor(pcap: Path, wall: float, cpu: float) -> None:
    """The least a conversion of the capture's events can cost, measured on the same file in the same
    run, and the local engine's `wall` and `cpu` seconds against it."""
    try:
        bodies = lumberjack_bodies(pcap)
    except (ValueError, IndexError) as e:  # IndexError: a frame cut short
        print(f"floor             : not measured ({pcap}: {e})")
        return
    low, inflating = floor("lumberjack", bodies), inflate_only(bodies)
    print(
        f"floor             : {low:7.1f} s  {pcap.stat().st_size / 1e6 / low:6.1f} MB/s  (Python zlib + orjson of"
        f" every event, CPU; inflating alone {inflating:.1f} s); local engine {cpu / low:.2f}x it in CPU,"
        f" {wall / low:.2f}x in wall time"
    )


def run_local(files: list[Path], out: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and rows of the local engine."""
    start = time.perf_counter()
    convert = ["convert", *map(str, files), "--to", "parquet", "-o", f"{out}/"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "wirelog.cli", *convert], cwd=ROOT, stdout=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("the local conversion failed")
    return wall, usage.ru_utime + usage.ru_stime, ds.dataset(out, format="parquet").count_rows()


def run_spark(
    files: list[Path], tiny: Path, out: Path, master: str, repeat: int, python: str | None
) -> tuple[float, dict]:
    """A Spark session converting `files` `repeat` times; `python`: the executors' interpreter."""
    start = time.perf_counter()
    cmd = [sys.executable, "-c", SPARK_RUN, master, str(repeat), str(tiny), str(out), *map(str, files)]
    env = {**os.environ, **({"PYSPARK_PYTHON": python} if python else {})}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if proc.returncode:
        causes = [line for line in proc.stderr.splitlines() if "Error" in line or "Exception" in line]
        raise SystemExit("the Spark conversion failed:\n" + "\n".join(causes[:12]))
    wall = time.perf_counter() - start
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def print_spark(master: str, wall: float, s: dict, local: float, size: int) -> None:
    """One Spark run's figures against the local engine's."""
    first, *again = s["jobs"]
    total = wall - sum(again) - sum(s["floors"].values())  # until the first conversion was done
    print(
        f"spark {master:<11} : {total:7.1f} s  {size / 1e6 / total:6.1f} MB/s  {s['rows']:,} rows"
        f"  (start-up {s['startup']:.1f} s, first tiny job {s['first_job']:.1f} s, conversion {first:.1f} s)"
    )
    print(f"conversion alone  : {first:7.1f} s  {size / 1e6 / first:6.1f} MB/s  (JVM compiling as it goes)")
    for i, job in enumerate(again, 2):
        print(f"conversion #{i}     : {job:7.1f} s  {size / 1e6 / job:6.1f} MB/s  (same session, JIT warm)")
    print(
        f"speed-up          : {local / first:.2f}x once started, {local / total:.2f}x including start-up"
        + (f", {local / min(again):.2f}x warm" if again else "")
    )
    cores = s["cores"]
    print(f"efficiency        : {local / first / cores:.2f}  (speed-up per core of {master}; goal >= 0.8)")
    for i, phases in enumerate(s["phases"], 1):
        print(f"phases of conversion #{i} (wall time of its Spark jobs; time its tasks ran):")
        for name, seconds, task_time in phases:
            print(f"  {seconds:7.1f} s  {task_time:7.1f} s in tasks  {name}")
    if s["floors"]:
        shuffle = s["floors"]["shuffle"]
        print(
            f"floor: routes     : {shuffle:7.1f} s  (splits routed, routes shuffled by group, each group's"
            " records read back into segments; no reassembly, no decoding)"
        )


@contextlib.contextmanager
def standalone(tmp: Path) -> Iterator[tuple[str, str]]:
    """A standalone master and two one-core workers on loopback (tests/spark_cluster.py), executors
    whose Python has no wirelog (the engine ships it, as `make wheel` built it): its URL and that
    Python."""
    sys.path.insert(0, str(ROOT / "tests"))
    from spark_cluster import Cluster, executor_python

    subprocess.run(["make", "-s", "wheel"], cwd=ROOT, check=True)
    tmp.mkdir()
    lean = executor_python()
    cluster = Cluster(tmp).start(2)
    try:
        yield cluster.url, lean
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--captures", type=int, default=40)
    ap.add_argument("--mb", type=float, default=1000, help="total size of the captures")
    ap.add_argument("--distinct", type=int, default=8, help="distinct captures generated (then copied)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--one", action="store_true", help="one capture of --mb MB, read in splits by Spark")
    ap.add_argument(
        "--repeat", type=int, default=2, help="conversions in the one Spark session (the first warms the JIT)"
    )
    ap.add_argument("--capture", type=Path, help="with --one: this capture instead of a generated one")
    ap.add_argument(
        "--cluster", action="store_true", help="also on a standalone master with two one-core workers"
    )
    args = ap.parse_args()
    print(f"cpus: {os.cpu_count()}")
    with tempfile.TemporaryDirectory(prefix="wirelog-bench-spark-") as tmp:
        work = Path(tmp)
        (work / "in").mkdir()
        if args.one and args.capture:
            files = [args.capture.resolve()]
        elif args.one:
            files = [work / "in" / "one-lumberjack.pcap"]
            packets = int(args.mb * 1e6 / BYTES_PER_PACKET["lumberjack"])
            generate(str(files[0]), packets, connections=2000, payload="lumberjack")
        else:
            files = make_captures(work / "in", args.captures, args.mb, args.distinct)
        size = sum(f.stat().st_size for f in files)
        tiny = work / "tiny.pcap"
        generate(str(tiny), 200, connections=4, payload="lumberjack")
        print(f"input: {len(files)} captures, {size / 1e6:,.0f} MB (Lumberjack v2 and CQL v4)")

        print(f"load average before: {os.getloadavg()[0]:.1f} (other work on the machine slows both runs)")
        local, cpu, local_rows = run_local(files, work / "local")
        print(
            f"local engine      : {local:7.1f} s  {size / 1e6 / local:6.1f} MB/s  {local_rows:,} rows  ({cpu:.0f} s CPU)"
        )
        if args.one:
            print_floor(files[0], local, cpu)
        print(f"load average before: {os.getloadavg()[0]:.1f}")

        runs = [(args.master, None)]
        with contextlib.ExitStack() as stack:
            if args.cluster:
                runs.append(stack.enter_context(standalone(work / "cluster")))
            for master, python in runs:
                wall, s = run_spark(files, tiny, work / "spark", master, args.repeat, python)
                print_spark(master, wall, s, local, size)
                if s["rows"] != local_rows:
                    raise SystemExit(f"row counts differ: local {local_rows}, spark {s['rows']}")


if __name__ == "__main__":
    main()
