"""The in-process driver JVM's stderr, logged at the level each line deserves.

Airflow 3's supervisor logs every line a task process writes to its stderr as an ERROR
(``task.stderr``). pyspark starts the driver JVM of a local or ``spark://`` session as a child
that inherits that stderr, so a healthy ``@task.jrs_pyspark`` compute used to put about eight
ERROR lines in the task log: the JVM's "Using incubator modules", log4j's profile banner, Spark's
"Setting default log level", NativeCodeLoader's warning that no native Hadoop library is there,
the loopback-hostname warning and the stage progress bars. A person reading that log on call
cannot tell them from a failure.

:func:`launch_gateway` starts the JVM as pyspark would (``pyspark.java_gateway.launch_gateway``,
its documented ``popen_kwargs``) but with its stderr on a pipe, and a daemon thread reads that
pipe and logs each line through :data:`LOG` at the level :func:`level_of` gives it: a log4j line
at its own level (``WARN`` as WARNING, ``ERROR`` as ERROR), the known start-up chatter of a
healthy JVM at DEBUG or INFO, and anything else (a stack trace, the JVM's own fatal words) at
WARNING, or at the level of the log4j line it continues. Errors stay errors; only what is known
to be harmless goes quieter. The progress bars are turned off where the session is configured
(``spark.ui.showConsoleProgress``, :data:`QUIET_CONF`).
"""

from __future__ import annotations

import logging
import re
import subprocess
import threading
from typing import IO, Any

#: The logger the driver JVM's lines go to (the task log, as every logger of a task process).
LOG = logging.getLogger("airflow_jrs.spark.driver")

#: Session conf that keeps a healthy session's console quiet; a task's own conf overrides it.
QUIET_CONF = {"spark.ui.showConsoleProgress": "false"}

#: ``26/11/28 21:47:26 WARN Utils: ...``: Spark's default log4j2 console layout.
_LOG4J = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}

#: What a healthy driver JVM says while it starts, and the level it deserves, with why.
_HARMLESS: tuple[tuple[re.Pattern[str], int], ...] = (
    # The JVM itself: Spark 4's launcher always adds jdk.incubator.vector (a fast path for ML).
    (re.compile(r"^WARNING: Using incubator modules: "), logging.DEBUG),
    # log4j and Spark announcing their defaults.
    (re.compile(r"^Using Spark's default log4j profile: "), logging.DEBUG),
    (re.compile(r'^Setting default log level to "\w+"\.$'), logging.DEBUG),
    (re.compile(r"^To adjust logging level use sc\.setLogLevel\(newLevel\)\."), logging.DEBUG),
    # No native Hadoop library on this host: Hadoop uses its Java code, which is what local jobs need.
    (re.compile(_LOG4J.pattern + r"NativeCodeLoader: Unable to load native-hadoop library"), logging.INFO),
    # The host name resolves to a loopback address and Spark picked another interface: a note
    # about the host's network, true of every task on it, not of this job.
    (re.compile(_LOG4J.pattern + r"Utils: Your hostname, .* resolves to a loopback address"), logging.INFO),
    (re.compile(_LOG4J.pattern + r"Utils: Set SPARK_LOCAL_IP if you need to bind to another address"), logging.INFO),
)


def level_of(line: str, previous: int | None) -> int:
    """The level ``line`` of the driver JVM's stderr deserves; ``previous`` is the level of the
    log4j line before it (a stack trace's lines continue it), ``None`` when there was none."""
    for pattern, level in _HARMLESS:
        if pattern.search(line):
            return level
    found = _LOG4J.match(line)
    if found:
        return _LEVELS[found.group(1)]
    if line.startswith((" ", "\t", "Caused by:", "...")) and previous is not None:
        return previous
    return logging.WARNING


def relay(stream: IO[bytes], log: logging.Logger = LOG) -> None:
    """Log each line of ``stream`` at :func:`level_of` until it ends (the JVM exited)."""
    previous: int | None = None
    for raw in iter(stream.readline, b""):
        # A progress bar redraws itself with carriage returns: each redraw is a line of its own.
        for line in raw.decode("utf-8", errors="replace").replace("\r", "\n").split("\n"):
            if not line.strip():
                continue
            level = level_of(line, previous)
            if _LOG4J.match(line):
                previous = level
            log.log(level, "driver JVM: %s", line)


def launch_gateway(conf: Any) -> Any:
    """pyspark's gateway to a new driver JVM started with ``conf``, its stderr relayed by
    :func:`relay` on a daemon thread (the JVM lives as long as this process: so does the thread)."""
    from pyspark.java_gateway import launch_gateway as pyspark_launch_gateway

    gateway = pyspark_launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    stderr = gateway.proc.stderr
    threading.Thread(target=relay, args=(stderr,), name="jrs-driver-stderr", daemon=True).start()
    return gateway
