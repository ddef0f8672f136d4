"""Spark over a store: the same files and views, with the declared schemas (no partition-type inference).

``register(session, location)`` reads each kind with ``session.read.schema(...)`` (the month partition a
string, run ids strings), adds the file name from ``_metadata.file_path`` and creates the views of
:mod:`.views` as temporary views. Results go back as Arrow (``DataFrame.toArrow()``): PySpark's pandas
conversion does not yet support pandas 3. ``local_session()`` starts a small local session for a laptop or
CI, and says in one line what to install when there is no Java.

Every read checks the page checksums of what it reads with Spark's own Parquet reader (parquet-mr's
``parquet.page.verify-checksum.enabled``, given as an option of each read: a session passed in is never
changed): a data page failing its CRC-32 fails the Spark job, and :func:`readable` turns that failure into
popprof's one line naming the file (:func:`~.catalogue.damaged`, exit 2). Spark checks every page it reads on
every read, so it keeps no record (:mod:`.verified` is for the engines that check nothing).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from urllib.parse import unquote

import pyarrow as pa

from ..model.errors import InputError, UsageError
from .layout import Location, kind_dir
from .schemas import kinds, schema_of, view_name
from .views import LIVE, columns, live_sql, one_generation, raw_name, view_sql

JAVA_HINT = (
    "Spark needs Java 17 or newer and none was found: install a JRE "
    "(e.g. apt-get install -y default-jre-headless) or set JAVA_HOME"
)


def _pyspark():
    try:
        import pyspark.sql.types as types
    except ImportError:
        raise UsageError("Spark needs pyspark: pip install 'popprof[spark]'") from None
    return types


def spark_schema(kind: str):
    """The declared schema of ``kind`` as a Spark StructType, with the ``month`` partition as a string."""
    types = _pyspark()
    simple = {
        pa.string(): types.StringType(),
        pa.bool_(): types.BooleanType(),
        pa.int8(): types.ByteType(),
        pa.int16(): types.ShortType(),
        pa.int32(): types.IntegerType(),
        pa.int64(): types.LongType(),
        pa.float64(): types.DoubleType(),
    }
    fields = [
        types.StructField(f.name, types.TimestampType() if pa.types.is_timestamp(f.type) else simple[f.type])
        for f in schema_of(kind)
    ]
    return types.StructType([*fields, types.StructField("month", types.StringType())])


def has_java() -> bool:
    """Whether a Java runtime can be found (JAVA_HOME or ``java`` on PATH)."""
    home = os.environ.get("JAVA_HOME")
    return (
        bool(home and os.path.exists(os.path.join(home, "bin", "java"))) or shutil.which("java") is not None
    )


#: JVM options of :func:`local_session`: the client (C1) JIT only and the serial collector. A short local
#: session spends most of its CPU compiling and collecting; these halve the JVM's CPU time on 2 cores
#: (``benchmarks/bench_store.py --modes spark-jvm``). A user's own session is never changed.
SMALL_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1"


def local_session(app: str = "popprof", memory: str = "512m", cores: int = 1, java_options: str = SMALL_JVM):
    """A local SparkSession for one machine: ``local[cores]``, UI and console progress off, bound to 127.0.0.1,
    small memory, a small JVM (``java_options``, :data:`SMALL_JVM`)."""
    _pyspark()
    if not has_java():
        raise UsageError(JAVA_HINT)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", memory)
        .config("spark.sql.shuffle.partitions", str(max(cores, 1)))
        .config("spark.sql.session.timeZone", "UTC")
    )
    try:
        return builder.getOrCreate()
    except Exception as exc:  # the JVM did not start: PySpark raises its own runtime errors
        if "JAVA" in str(exc).upper():
            raise UsageError(JAVA_HINT) from None
        raise


def register(session, location: Location, verify: bool = True) -> list[str]:
    """Create the store's views (``runs``, ``metrics``, ``ranks``, ``findings``, ``account``, one per bundle
    table) in ``session``; with ``verify`` each read of them checks the page checksums of what it reads
    (:data:`VERIFY_CHECKSUMS`)."""
    types = _pyspark()
    from pyspark.sql import functions as F

    names = []
    for kind in ["runs", *[k for k in kinds() if k != "runs"]]:
        schema = spark_schema(kind)
        files = location.files(kind_dir(kind), "month=*/*.parquet")
        if files:
            frame = _read(session, schema, location, kind, files, verify)
            frame = frame.select(*columns(kind), F.col("_metadata.file_path").alias("_file"))
        else:
            schema = types.StructType([*schema.fields, types.StructField("_file", types.StringType())])
            frame = _empty(session, schema)
        frame.createOrReplaceTempView(raw_name(kind))
        if kind == "runs":
            session.sql(live_sql()).createOrReplaceTempView(LIVE)
        single = bool(files) and one_generation(files)
        session.sql(view_sql(kind, quote="`", single=single)).createOrReplaceTempView(view_name(kind))
        names.append(view_name(kind))
    return names


#: parquet-mr's switch (``ParquetInputFormat.PAGE_VERIFY_CHECKSUM_ENABLED``, off by default) for checking each
#: page's CRC-32 as it is read; Spark hands a read's options to the Hadoop configuration of that read.
VERIFY_CHECKSUMS = "parquet.page.verify-checksum.enabled"
#: parquet-mr's words for a page failing its checksum, and Spark's for the file it was reading.
_CRC = re.compile(
    r"(could not verify (?:dictionary )?page integrity, CRC checksum verification failed[^\n]*)"
)
_FILE = re.compile(r"while reading file (\S+?)\.?\s")


def damaged_file(location: Location, exc: BaseException) -> InputError | None:
    """The one line for a Spark failure that is a page failing its checksum (None for any other failure): the
    file Spark names, as a store file, and parquet-mr's reason."""
    from .catalogue import damaged

    text = str(exc)
    crc = _CRC.search(text)
    if crc is None:
        return None
    named = _FILE.search(text)
    url = unquote(named.group(1)) if named else location.root
    path = re.sub(r"^(file:/*|s3a?://)", "/" if location.local else "", url)
    root = re.sub(r"^s3a?://", "", location.root)
    if path.startswith(root.rstrip("/") + "/"):
        return damaged(location, path[len(root.rstrip("/")) + 1 :], ValueError(crc.group(1).strip()))
    return damaged(Location(url), "", ValueError(crc.group(1).strip()))


@contextlib.contextmanager
def readable(location: Location) -> Iterator[None]:
    """A Spark action over the store's views (``collect``, ``toArrow``) whose read met a page failing its
    checksum raises popprof's one line (InputError, exit 2) instead of Spark's job failure; other failures
    pass as they are."""
    try:
        yield
    except Exception as exc:  # Py4JJavaError locally, PySpark's own error types through Spark Connect
        line = damaged_file(location, exc)
        if line is None:
            raise
        raise line from None


#: Characters Hadoop's path globbing reads in a path Spark is given.
_HADOOP_GLOB = re.compile(r"([{}\[\]*?\\])")


def _read(session, schema, location: Location, kind: str, files: list[str], verify: bool = True):
    """The files of ``kind`` as a DataFrame of the declared schema. The kind's directory, as Spark lists it,
    unless the store's path holds a glob character (Hadoop would read ``a[b]`` as a pattern) or a file was
    left out as a symbolic link (:meth:`Location.files`): then the listed files, each escaped, with the
    directory as the partitions' base."""
    base = _spark_path(location, kind_dir(kind))
    reader = session.read.schema(schema)
    if verify:  # without, the session's own setting holds
        reader = reader.option(VERIFY_CHECKSUMS, "true")
    linked = any(rel.startswith(kind_dir(kind) + "/") for rel in location.skipped)
    if not linked and not _HADOOP_GLOB.search(location.root):
        return reader.parquet(base)
    paths = [_HADOOP_GLOB.sub(r"\\\1", _spark_path(location, rel)) for rel in files]
    return reader.option("basePath", base).parquet(*paths)


def _empty(session, schema):
    """An empty DataFrame of ``schema``: from an empty RDD (createDataFrame of an empty list costs a JVM-side
    conversion per call, 8x the CPU); Spark Connect, which has no SparkContext, takes the list."""
    try:
        rows = session.sparkContext.emptyRDD()
    except Exception:  # Spark Connect: no sparkContext (PySpark raises its own error types for it)
        rows = []
    return session.createDataFrame(rows, schema)


def _spark_path(location: Location, rel: str) -> str:
    """The path Spark reads: the directory itself locally; ``s3a://`` for S3 (the user's Hadoop config)."""
    path = location.path(rel)
    return "s3a://" + path[len("s3://") :] if path.startswith("s3://") else path


def to_arrow(frame, location: Location | None = None) -> pa.Table:
    """A Spark DataFrame's rows as an Arrow table; with the store's ``location``, a page failing its checksum
    is popprof's one line (:func:`readable`)."""
    if location is None:
        return frame.toArrow()
    with readable(location):
        return frame.toArrow()
