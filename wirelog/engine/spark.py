"""The Spark engine: the local pipeline run as Spark tasks, one whole capture per task, via PySpark.

`convert_spark()` is `wirelog convert --engine spark`: it gets a SparkSession (the one spark-submit
made, or a new one), reads the inputs through the `wirelog` data source (wirelog/engine/spark_source.py)
and writes a Parquet dataset partitioned by protocol, NDJSON part files, or Hercules event part files.

pyspark is imported inside the functions only, so importing this module (the CLI does) costs nothing
and works without pyspark installed. See docs/spark.md.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
import tempfile
from typing import TYPE_CHECKING

from wirelog.engine import spark_output, spark_ship
from wirelog.engine.local import Options
from wirelog.inputs import remote
from wirelog.inputs.errors import CaptureError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from wirelog.engine.spark_source import Capture, SourceOptions

FORMATS = ("parquet", "json", "hercules")
log = logging.getLogger(__name__)  # the CLI shows its INFO lines on stderr
SPLIT_SIZE = 128 * 1024 * 1024  # a larger uncompressed capture is read by several tasks (--split-size)
TASKS_PER_CORE = 3  # Spark's tuning guide: 2-3 tasks per core, so a slow capture does not idle the rest

# Quiet by default: errors only. The org.apache.spark logger is named with the root's level because
# Spark prints "Setting default log level" when its shell logger's level differs from the root's.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
"""

# Settings every wirelog session gets; `conf` given by the user wins.
SESSION_CONF = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.compression.codec": "zstd",
    # several protocols per task: write them side by side instead of sorting the task's rows first
    "spark.sql.maxConcurrentOutputFileWriters": "32",
}


def parquet_conf() -> dict[str, str]:
    """The local Parquet writer's encoding choices (export/parquet.py) for Spark's writer: ~8 % less
    JVM time per row than dictionaries and statistics on every column."""
    from wirelog.export import parquet  # imports pyarrow: only when a session is made

    return {
        "spark.hadoop.parquet.enable.dictionary": "false",
        **{f"spark.hadoop.parquet.enable.dictionary#{c}": "true" for c in parquet.DICTIONARY_COLUMNS},
        **{f"spark.hadoop.parquet.column.statistics.enabled#{c}": "false" for c in parquet.TEXT_COLUMNS},
    }


class SparkEngineError(Exception):
    """The Spark engine cannot run as asked (pyspark missing, output in the way); one line for the user."""


class NothingRead(SparkEngineError):
    """No input was a capture: the output holds only their `capture.unreadable` rows (status 2, as
    the local engine's when no input could be read)."""


def under_spark_submit() -> bool:
    """True when this Python was started by spark-submit (which then owns master and JVM options)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _log_config() -> str:
    fd, path = tempfile.mkstemp(prefix="wirelog-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_LOG4J2)
    return path


def session(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """The active SparkSession or a new quiet one, with the wirelog data sources registered.

    `master` is applied only when not running under spark-submit. For a local master the workers use
    this Python (PYSPARK_PYTHON, unless set); any other master gets wirelog shipped to its executors
    (engine/spark_ship.py). Spark binds to loopback (SPARK_LOCAL_IP, unless set).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkEngineError(
            "the Spark engine needs pyspark: pip install 'wirelog[spark]' (and Java 17+)"
        ) from None
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName("wirelog")
    log_file = None
    if not under_spark_submit():
        if master:
            builder = builder.master(master)
        if (master or "local").startswith("local"):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        elif (conf or {}).get(spark_ship.SHIP_CONF, "true") != "false":
            conf = {**(conf or {}), **_shipping(conf or {})}
        log_file = _log_config()
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log_file}")
    for key, value in {**SESSION_CONF, **parquet_conf(), **(conf or {})}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    finally:
        if log_file:  # read once by the JVM at start-up
            os.unlink(log_file)
    if not (conf and "spark.log.level" in conf):
        spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _shipping(conf: dict[str, str]) -> dict[str, str]:
    """Settings that ship wirelog to a cluster's executors (engine/spark_ship.py); the driver's own
    Python workers get the same files through PYTHONPATH, read when the JVM starts."""
    try:
        wheel, here = spark_ship.prepare(conf.get(spark_ship.WHEEL_CONF))
    except spark_ship.ShipError as e:
        raise SparkEngineError(str(e)) from None
    log.info("executors get %s and its dependencies (spark.archives)", wheel)
    os.environ["PYTHONPATH"] = spark_ship.driver_pythonpath(here)
    return spark_ship.executor_conf(conf, here)


def register(spark: SparkSession) -> None:
    """Make `format("wirelog")` (captures → rows) and `format("wirelog-hercules")` (rows → events) known."""
    from wirelog.engine.spark_hercules import HerculesDataSource
    from wirelog.engine.spark_source import WirelogDataSource

    spark.dataSource.register(WirelogDataSource)
    spark.dataSource.register(HerculesDataSource)


def read(
    spark: SparkSession,
    inputs: list[str],
    options: Options | None = None,
    findings: str = "include",
    split_size: int | None = None,
) -> DataFrame:
    """The records of `inputs` (files, directories, globs) as a DataFrame of the Parquet schema.

    With `split_size`, an uncompressed local capture larger than it is read by several tasks
    (engine/spark_split.py); a compressed one cannot be split and goes to one task, as Spark does
    for gzip text."""
    strings, whole, split, tasks = _divide(spark, inputs, options, findings, split_size)
    names = [c.name for c in whole] or ([] if split else list(inputs))  # nothing found: an empty read
    parts = [spark.read.format("wirelog").options(**strings).load(names)] if names else []
    if split:
        from wirelog.engine.spark_split import read_split_capture

        for cap in split:
            parts.append(
                read_split_capture(spark, cap.path, cap.name, options or Options(), split_size, tasks)
            )
    df = parts[0]
    for part in parts[1:]:
        df = df.unionByName(part)
    return df


def _divide(
    spark: SparkSession,
    inputs: list[str],
    options: Options | None,
    findings: str,
    split_size: int | None,
) -> tuple[dict[str, str], list[Capture], list[Capture], int]:
    """The data source's options, the inputs read whole, the captures read in splits, and the number
    of tasks to spread the work over."""
    from wirelog.engine.spark_source import expand, option_strings

    tasks = TASKS_PER_CORE * spark.sparkContext.defaultParallelism
    strings = option_strings(options or Options(), findings, basedir=os.getcwd(), minPartitions=tasks)
    whole, split = expand(list(inputs), os.getcwd()), []
    # a stream filter is applied by the local engine's rules to findings outside streams too; the
    # split engine's driver-made verdict findings are not compared against them: read whole
    streams_named = bool(options and options.keep.streams)
    if split_size and findings == "include" and not streams_named:
        split = [c for c in whole if c.size > split_size and _splittable(c.path)]
        whole = [c for c in whole if c not in split]
        for cap in split:
            log.info("%s (%d bytes) is read in splits of %d bytes", cap.name, cap.size, split_size)
    return strings, whole, split, tasks


def _splittable(path: str) -> bool:
    """An uncompressed pcap or pcapng on a local file system (others are read whole, by one task)."""
    if remote.is_uri(path):
        return False
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic in (
        b"\xd4\xc3\xb2\xa1",
        b"\xa1\xb2\xc3\xd4",
        b"\x4d\x3c\xb2\xa1",
        b"\xa1\xb2\x3c\x4d",
        b"\x0a\x0d\x0d\x0a",
    ):
        return True
    log.info("%s is compressed (or not a capture): not splittable, read by one task", path)
    return False


def convert_spark(
    inputs: list[str],
    fmt: str,
    output: str,
    options: Options,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    split_size: int | None = SPLIT_SIZE,
    tables: bool = False,
) -> int:
    """Convert `inputs` on Spark into the directory `output`; returns the number of rows written.

    With `tables` (parquet only): the typed tables, `OUT/<table>/part-*.zstd.parquet` (docs/schema.md),
    every capture read whole.

    parquet: a dataset partitioned by protocol (`protocol=cql/part-*.parquet`, zstd); json: NDJSON part
    files (`part-*.json`), the local engine's lines; both written by the tasks (engine/spark_output.py).
    hercules: Hercules event part files. An earlier output in
    `output` is replaced. Rows written: records for parquet/json, events (messages) for hercules.
    Raises NothingRead, once the output is written, when no input was a capture.
    """
    if fmt not in FORMATS:
        raise SparkEngineError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    from wirelog.engine.spark_source import expand

    captures = len(expand(list(inputs), os.getcwd()))
    if not captures:  # a typo fails here, before a JVM starts
        raise CaptureError(f"{', '.join(inputs)}: no capture files found")
    if remote.is_uri(output) and fmt == "hercules":
        raise SparkEngineError(f"{output}: Hercules output needs a local or mounted directory")
    if not remote.is_uri(output):
        output = os.path.abspath(remote.local_path(output))
    if fmt != "hercules" or not remote.is_uri(output):
        try:
            spark_output.check(output)
        except spark_output.OutputError as e:
            raise SparkEngineError(str(e)) from None
    spark = session(master, conf)
    try:
        if tables:
            rows, unreadable = _write_by_tasks(spark, "tables", inputs, options, output, None)
        elif fmt in ("parquet", "json"):
            rows, unreadable = _write_by_tasks(spark, fmt, inputs, options, output, split_size)
        else:  # the events' order across captures is the writer's: captures are read whole
            rows, unreadable = _write(spark, read(spark, inputs, options), output)
    except Exception as e:
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        if not isinstance(e, PySparkException | Py4JJavaError):
            raise
        raise SparkEngineError(f"{output}: Spark could not write it: {java_reason(e)}") from e
    if unreadable >= captures:  # the local engine's status 2 (README, "Exit status")
        raise NothingRead(
            f"no input could be read: none of the {captures} inputs is a capture "
            f"(their capture.unreadable findings are in {output})"
        )
    return rows


def _write_by_tasks(
    spark: SparkSession, fmt: str, inputs: list[str], options: Options, output: str, split_size: int | None
) -> tuple[int, int]:
    """Parquet or NDJSON written by the tasks, committed by the driver (engine/spark_output.py); rows
    written and inputs that were not captures. Whole captures: one task per bin of captures; split
    captures: the tasks of their last stage."""
    from wirelog.engine.spark_source import pack, parse_options
    from wirelog.engine.spark_split import phase, write_split_capture

    strings, whole, split, tasks = _divide(spark, inputs, options, "include", split_size)
    try:
        job = spark_output.start(output)
    except spark_output.OutputError as e:
        raise SparkEngineError(str(e)) from None
    try:
        src = parse_options(strings)
        bins = pack(whole, src.max_partition_bytes, src.open_cost_bytes, src.min_partitions)
        write = {"parquet": write_bin, "json": write_bin_lines, "tables": write_bin_tables}[fmt]
        with phase(spark, f"wirelog: convert and write {len(whole)} whole captures"):
            written = spark_output.run_tasks(spark, job, bins, functools.partial(write, src))
        for k, cap in enumerate(split):
            written += write_split_capture(
                spark, cap.path, cap.name, options, split_size, tasks, job, f"s{k}", fmt
            )
        rows = spark_output.commit(job, written)
    except BaseException:
        spark_output.discard(job)
        raise
    from wirelog.engine.spark_source import UNREADABLE

    if fmt in ("json", "tables"):
        return rows, sum(w.unreadable for w in written)
    return rows, spark_output.codes(job, written, "capture").count(UNREADABLE)


def write_bin(
    src: SourceOptions, job: spark_output.Job, index: int, captures: list[Capture]
) -> list[spark_output.Written]:
    """A Spark task: its bin of whole captures converted and written (runs in a Python worker)."""
    from wirelog.engine.gc_tuning import tune_gc
    from wirelog.engine.spark_source import batches

    tune_gc()  # the CLI's settings do not reach a Python worker
    return spark_output.write_task(job, f"c{index:05d}", batches(captures, src))


def write_bin_lines(
    src: SourceOptions, job: spark_output.Job, index: int, captures: list[Capture]
) -> list[spark_output.Written]:
    """A Spark task: its bin of whole captures converted to NDJSON and written."""
    from wirelog.engine.gc_tuning import tune_gc
    from wirelog.engine.spark_source import capture_lines

    tune_gc()
    return spark_output.write_lines(job, f"c{index:05d}", capture_lines(captures, src))


def write_bin_tables(
    src: SourceOptions, job: spark_output.Job, index: int, captures: list[Capture]
) -> list[spark_output.Written]:
    """A Spark task: its bin of whole captures converted into the typed tables and written."""
    from wirelog.engine.gc_tuning import tune_gc
    from wirelog.engine.spark_source import table_items

    tune_gc()
    return spark_output.write_tables(job, f"c{index:05d}", table_items(captures, src))


def _write(spark: SparkSession, df: DataFrame, output: str) -> tuple[int, int]:
    """Hercules output through the `wirelog-hercules` writer; events written, and inputs that were
    not captures (counted as they are written: their finding rows)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from wirelog.engine.spark_source import UNREADABLE

    written = Observation("wirelog")
    counted = F.count_if(F.col("record") == "message")
    unreadable = F.count_if(F.col("code") == UNREADABLE).alias("unreadable")
    df = df.observe(written, counted.alias("rows"), unreadable)
    df.write.format("wirelog-hercules").mode("overwrite").save(output)
    return int(written.get["rows"]), int(written.get["unreadable"])


_FS_CLASS = re.compile(r"ClassNotFoundException: Class (\S+FileSystem) not found")


def java_reason(e: BaseException) -> str:
    """One line from a Spark/JVM error: its innermost cause, with what to do about a missing Hadoop
    file system connector (s3a:// without hadoop-aws, gs:// without the GCS connector, ...)."""
    text = str(e)
    missing = _FS_CLASS.search(text)
    if missing:
        return (
            f"Spark's Hadoop has no connector {missing.group(1)} for this scheme; add it to the "
            "session, e.g. --conf spark.jars.packages=org.apache.hadoop:hadoop-aws:HADOOP_VERSION for s3a://"
        )
    causes = [line for line in text.splitlines() if line.startswith("Caused by: ")]
    # py4j's own first line ("An error occurred while calling o221.parquet.") names no reason
    lines = (
        x for x in text.splitlines() if x.strip() and not x.startswith("An error occurred while calling")
    )
    line = causes[-1][len("Caused by: ") :] if causes else next(lines, "")
    return line.strip().lstrip(": ") or type(e).__name__
