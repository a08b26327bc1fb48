"""``spark-pipelines run`` as the protocol's launcher: a Spark Declarative Pipelines run per job.

:class:`PipelinesLauncher` is what :class:`~airflow_jrs.operators.spark_pipelines.JrsSparkPipelinesOperator`
hands to the Airflow-free protocol (:class:`airflow_jrs.protocol.JobAttempt`). ``spark-pipelines``
(shipped in pyspark's distribution) is a CLI driver like spark-submit: its bash launcher
``exec``s ``SparkSubmit`` (``org.apache.spark.deploy.SparkPipelines``), a JVM that starts a
local Spark Connect server in itself and runs ``pyspark/pipelines/cli.py`` as its Python child,
a Connect client that registers the pipeline's graph and streams its events. So it gets the
same fencing as spark-submit: it runs under the supervisor
(:mod:`airflow_jrs.launch.supervisor`, unchanged: heartbeat for its fence, the first beat
refused when the lease is lost, self-fencing when Redis is unreachable, ``PR_SET_PDEATHSIG``,
stop and cancel requests relayed). The CLI's Python starts the pipeline's Connect server as a
JVM of its own, so the tree is supervisor -> JVM -> CLI's Python -> server JVM, and each link
dies with the one above it (:func:`cli_python_shim`): whatever ends the supervisor or its JVM
(a kill, self-fencing, a stop request) ends the whole pipeline. :meth:`PipelinesLauncher.stop`
(``on_kill``, a lost lease) also kills the tree itself and sweeps what names the attempt's
folder, so a killed task leaves no process behind.

Where the pipeline writes (the fence): each attempt runs a copy of the spec whose ``storage``
(checkpoints, pipeline metadata) is ``<fenced folder>/storage``, with ``spark.sql.warehouse.dir``
at ``<fenced folder>/warehouse`` on the JVM's command line (a static conf: it must be set when
the server starts). Materialized views and tables of the session catalog land there
(``warehouse/<table>``, ``warehouse/<db>.db/<table>``): another attempt has another folder,
and the result names the winner's. The copy of the spec lives in a temporary folder with the
pipeline's project (the CLI resolves library globs against the spec's folder), removed when
the run ends; the definitions run are the ones the fingerprint covered.

The CLI runs in the attempt's temporary folder (``Popen(cwd=...)``), never in the task's working
directory: whatever Spark puts in its working directory (a ``spark-warehouse`` when a setting
slipped through, a Derby ``metastore_db``) is the attempt's own and removed with it, never a
folder every attempt shares.

Only the session catalog in the fence's warehouse is accepted (:func:`.pipelines_fence.unfenced_setting`: the
operator refuses another catalog, a metastore's conf, a ``hive-site.xml``), and only the CLI's
own local Connect server (the operator refuses the rest): a
``--master`` is refused by Spark itself ("Remote cannot be specified with master and/or deploy
mode"), ``--remote local[N]`` makes the CLI start a *second* JVM without our conf (its
warehouse would be the working directory: unfenced), and a remote ``sc://`` server has one
warehouse for everyone.

After the CLI exited 0 (and only if the attempt was not stopped) the launcher checks that the
run landed under the fence (at least one dataset in the warehouse, every ``outputs`` path
present: :meth:`PipelinesLauncher.check_landed`), then writes the commit marker, LAST, naming
the job and fence, with the datasets it found under the warehouse as the result's metrics; a
successor adopts a predecessor's folder only with that marker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from airflow_jrs.domain.pipeline_spec import fenced_spec, load_spec
from airflow_jrs.exceptions import JrsConfigError, JrsError
from airflow_jrs.launch.attempt_sweep import ATTEMPT_ENV, sweep_attempt
from airflow_jrs.launch.pipelines_fence import datasets_under, spark_conf_dir
from airflow_jrs.launch.submission import OutputTail, Supervision
from airflow_jrs.launch.supervisor import LOST_BEFORE_START, SETTINGS_ENV, SUPERVISOR_ENV, supervised_command
from airflow_jrs.protocol.launcher import Failure, Launch, Launcher
from airflow_jrs.protocol.stopping import cancel_on_kill
from airflow_jrs.spark.commit import MARKER_VERSION, marker_path
from airflow_jrs.spark.conf import job_conf

if TYPE_CHECKING:
    from airflow_jrs.protocol.run import JobRun
    from airflow_jrs.store.namespace import JobNamespace

#: The folders of the fenced output folder the pipeline writes.
WAREHOUSE, STORAGE = "warehouse", "storage"
#: The prefix of an attempt's temporary folder (the project copy with the fenced spec).
TEMP_PREFIX = "jrs-pipeline-"

#: A Java stack frame or its elision (``at org...``, ``... 12 more``).
_JAVA_FRAME = re.compile(r"^\s+(at |\.\.\. \d+ more)")
#: The line a Python traceback ends with: pyspark's errors, or a builtin one (a definition's
#: ``SyntaxError``); Java's (``org.apache...Exception``) are the server's, logged around it.
_PYTHON_ERROR = re.compile(r"^(pyspark\.[\w.]+|[A-Z]\w*(?:Error|Exception)):(\s|$)")
#: The CLI's lines about a failed flow (its events), and the error lines it prints under them.
_FLOW_PROBLEM = re.compile(r"Failed to resolve flow|Flow \S+ has FAILED|^Error: ")
#: The timestamp the CLI puts before its event lines.
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?: ")


class PipelineRunError(JrsError):
    """``spark-pipelines run`` failed, or ended well without its datasets under the fence: the
    message says what it printed, or what is missing and where to look."""


def pipelines_binary(env: Mapping[str, str]) -> str:
    """``spark-pipelines`` on the task's ``PATH``, else the one pyspark installed beside this
    interpreter (a virtualenv's ``bin``); raises when neither exists."""
    found = shutil.which("spark-pipelines", path=env.get("PATH"))
    if found:
        return found
    beside = Path(sys.executable).parent / "spark-pipelines"
    if beside.is_file():
        return str(beside)
    raise JrsConfigError(
        "spark-pipelines was not found on PATH nor beside this Python. It ships with pyspark 4.1+ "
        "(pip install 'pyspark>=4.1'); put its bin folder on the worker's PATH."
    )


def write_marker(staging: str, *, job_id: str, fence: int, application_id: str | None, metrics: dict[str, Any]) -> None:
    """The commit marker of a finished run (same document as :mod:`airflow_jrs.spark.commit`),
    written through fsspec like its reader; a local one appears atomically (rename)."""
    import fsspec

    doc = {
        "v": MARKER_VERSION, "application_id": application_id, "job_id": job_id, "fence": int(fence),
        "metrics": metrics, "written_at": datetime.now(UTC).isoformat(),
    }  # fmt: skip
    payload = json.dumps(doc, sort_keys=True).encode("utf-8")
    url = marker_path(staging)
    fs, path = fsspec.core.url_to_fs(url)
    tmp = f"{path}.tmp-{os.getpid()}"
    with fs.open(tmp, "wb") as out:
        out.write(payload)
    fs.mv(tmp, path)


_SHIM = """\
import ctypes, os, signal, sys
args = sys.argv[1:]
if any(arg.endswith("pipelines/cli.py") for arg in args[:2]):
    parent = os.getppid()
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(70)  # the JVM died before the prctl: the signal would never come
os.execv({python!r}, [{python!r}, *args])
"""


def cli_python_shim(folder: str, python: str) -> str:
    """An executable for ``PYSPARK_DRIVER_PYTHON`` that runs ``python``; when it is started as the CLI
    (``.../pipelines/cli.py``), it first asks the kernel to SIGKILL it when its parent, the
    ``spark-pipelines`` JVM, dies.

    Why: the CLI's Python and the Connect server JVM it starts are not children of the
    supervisor; when the supervisor ends the JVM it started (self-fencing when Redis is
    unreachable, a stop or cancel request, a predecessor stopped by its successor) or is itself
    killed, they would go on running beside the next attempt. With the shim the chain holds
    link by link: the supervisor's death kills the JVM (its ``PR_SET_PDEATHSIG``), the JVM's
    kills the CLI's Python (this one), and the Python's ends the Connect server (pyspark's
    gateway JVM exits when its stdin from the Python closes). The Pythons Spark starts with
    ``PYSPARK_PYTHON`` (workers, started from threads that may end first) are not shimmed."""
    shim = Path(folder) / "python"
    shim.write_text(f"#!{sys.executable} -S\n" + _SHIM.format(python=python), encoding="utf-8")
    shim.chmod(0o755)
    return str(shim)


class PipelinesLauncher(Launcher):
    """One attempt's ``spark-pipelines run``, under the supervisor."""

    name = "spark-pipelines"

    def __init__(
        self,
        *,
        spec_path: str,
        conf: Mapping[str, Any],
        cli_args: Sequence[str],
        env: Mapping[str, str],
        jobs: JobNamespace,
        log: Any,
    ) -> None:
        self.spec_path, self.user_conf, self.cli_args = spec_path, dict(conf), list(cli_args)
        #: the attempt's namespace: its supervisor connects with the namespace's connection and settings
        self.env, self.jobs, self.log = dict(env), jobs, log
        self.tail = OutputTail()
        #: the CLI's last Python exception line (``pyspark.errors...: [ERROR_CLASS] ...``)
        self.error_line: str | None = None
        #: the flows' failures as the CLI printed them (``Failed to resolve flow``, ``Error: ...``)
        self.problems: deque[str] = deque(maxlen=6)
        self._lock = threading.RLock()  # stop() runs from on_kill, a signal handler
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped = False
        self._command: list[str] = []
        self._folder: str | None = None

    # -- the launch ----------------------------------------------------------------------------
    def conf_for(self, launch: Launch) -> dict[str, str]:
        """The JVM's conf: the user's, then the fence's warehouse and the job's ``spark.jrs.*``
        (also the command-line marks a successor finds a predecessor's JVM by)."""
        return {
            **{str(k): str(v) for k, v in self.user_conf.items()},
            "spark.app.name": launch.app_name,
            "spark.sql.warehouse.dir": f"{launch.staging}/{WAREHOUSE}",
            **job_conf(job_id=launch.job_id, namespace=launch.namespace, fence=launch.fence, output_dir=launch.staging),
        }

    def prepare(self, launch: Launch) -> dict[str, Any]:
        conf = self.conf_for(launch)
        args = [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
        self._command = [pipelines_binary(self.env), "run", "--spec", "<copy of pipeline_spec>", *args, *self.cli_args]
        return {
            "launcher": "spark-pipelines",
            "pipeline_spec": self.spec_path,
            "storage": f"{launch.staging}/{STORAGE}",
            "warehouse": conf["spark.sql.warehouse.dir"],
            "command": self._command,
        }

    def _project_copy(self, launch: Launch, folder: str) -> str:
        """Copy the spec's folder (the pipeline's project) into ``folder`` and write the fenced
        spec there; returns the spec's path."""
        source = Path(self.spec_path).resolve()
        project = Path(folder) / "project"
        shutil.copytree(source.parent, project, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        import yaml

        spec = fenced_spec(load_spec(self.spec_path), f"{launch.staging}/{STORAGE}")
        target = project / source.name
        target.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
        return str(target)

    def run(self, launch: Launch) -> None:
        try:  # what the supervisor is handed; spark-pipelines never runs without one (unlike spark-submit)
            self.jobs.connection_kwargs()
        except JrsConfigError as exc:
            raise JrsConfigError(
                f"job {launch.job_id}: spark-pipelines runs only under the supervisor (a killed task must not leave "
                f"it running beside its successor), and the store's connection cannot be handed to it: {exc}"
            ) from None
        supervision = Supervision.for_attempt(self.jobs, launch.job_id, launch.fence, self.log)
        if supervision is None:  # only when connection_kwargs() raises: it did not, and it keeps what it found
            raise JrsConfigError(f"job {launch.job_id}: the store's connection could not be handed to the supervisor")
        folder = self._folder = tempfile.mkdtemp(prefix=TEMP_PREFIX)
        try:
            command = list(self._command)
            command[3] = self._project_copy(launch, folder)
            supervised = supervised_command(
                command, namespace=supervision.namespace, job_id=launch.job_id, fence=launch.fence, ttl=supervision.ttl
            )
            env = {**os.environ, **self.env, SUPERVISOR_ENV: json.dumps(supervision.connection), ATTEMPT_ENV: folder}
            env["SPARK_CONF_DIR"] = spark_conf_dir(folder, env.get("SPARK_CONF_DIR"), self.conf_for(launch))
            # the CLI's Python needs pyspark, as this one has; it dies with the JVM that starts it
            env.setdefault("PYSPARK_PYTHON", sys.executable)
            env["PYSPARK_DRIVER_PYTHON"] = cli_python_shim(
                folder, env.get("PYSPARK_DRIVER_PYTHON") or env["PYSPARK_PYTHON"]
            )
            if supervision.settings is not None:
                env[SETTINGS_ENV] = json.dumps(supervision.settings)
            with self._lock:
                if self._stopped:
                    raise RuntimeError(f"job {launch.job_id}: stopped before spark-pipelines started")
                self._process = subprocess.Popen(  # in the attempt's folder: a stray write is its own
                    supervised, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                    cwd=folder,
                )  # fmt: skip
            self._follow(self._process)
            code = self._process.wait()
            if code:
                raise PipelineRunError(self._exit_message(launch, code))
            with self._lock:
                if self._stopped:
                    raise RuntimeError(f"job {launch.job_id}: stopped before its commit marker was written")
                datasets = datasets_under(f"{launch.staging}/{WAREHOUSE}")
                self.check_landed(launch, datasets)
                metrics = {"datasets": datasets}
                # LAST: the marker vouches for every dataset the run wrote.
                write_marker(launch.staging, job_id=launch.job_id, fence=launch.fence,
                             application_id=self.tail.application_id, metrics=metrics)  # fmt: skip
        finally:
            self._sweep()
            shutil.rmtree(folder, ignore_errors=True)

    def check_landed(self, launch: Launch, datasets: Sequence[str]) -> None:
        """Raise :class:`PipelineRunError` unless the run left a dataset in the fence's warehouse
        and every ``outputs`` path exists: a run that exited 0 with nothing there wrote its
        datasets elsewhere (a catalog or metastore the checks did not see) or defines none, and
        must record no SUCCEEDED result pointing at an empty folder."""
        import fsspec

        warehouse = f"{launch.staging}/{WAREHOUSE}"
        if not datasets:
            raise PipelineRunError(
                f"job {launch.job_id}: spark-pipelines exited 0 but left no dataset under the attempt's fenced "
                f"warehouse {warehouse}; nothing recorded. Either the pipeline defines no materialized view or "
                "table (only temporary views), or its datasets went elsewhere: look for a catalog or metastore "
                "setting on this worker (spark.sql.catalog*, hive-site.xml, spark-defaults.conf, HADOOP_CONF_DIR) "
                "or a database with a LOCATION of its own (docs/how-to/spark-pipelines.md)."
            )
        missing = []
        for name, sub in launch.run.outputs.items():
            path = f"{launch.staging}/{sub}".rstrip("/") if sub else launch.staging
            fs, root = fsspec.core.url_to_fs(path)
            if not fs.exists(root):
                missing.append(f"{name!r} ({path})")
        if missing:
            raise PipelineRunError(
                f"job {launch.job_id}: spark-pipelines exited 0 but the output(s) {', '.join(missing)} are missing "
                f"under the fenced folder; nothing recorded. The run left the datasets {list(datasets)} in "
                f"{warehouse}: make `outputs` name them (warehouse/<table>, warehouse/<db>.db/<table>)."
            )

    def _follow(self, process: subprocess.Popen[bytes]) -> None:
        """Log what the CLI prints, as the provider's hook does, keeping for a failure the tail
        without Java stack frames (the server's shutdown noise follows the error and would push
        it out) and the CLI's own last exception line (what went wrong, in the pipeline's terms)."""
        assert process.stdout is not None
        continues = False
        for raw in iter(process.stdout.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            if line:
                self.log.info("%s", line)
            if _JAVA_FRAME.match(line):
                continue
            self.tail.add(line)
            if continues and line.strip() and self.error_line is not None:
                self.error_line = f"{self.error_line} {line.strip()}"[:1500]
            continues = False
            if _PYTHON_ERROR.match(line):
                self.error_line = line.strip()[:1500]
                continues = line.rstrip().endswith(":")  # pyspark puts the message on the next line
            elif _FLOW_PROBLEM.search(line):
                self.problems.append(_TIMESTAMP.sub("", line.strip())[:1000])

    def _exit_message(self, launch: Launch, code: int) -> str:
        if code == LOST_BEFORE_START:
            return (
                f"job {launch.job_id}: spark-pipelines was not started: the attempt lost its lease or Redis did not "
                "answer before the launch (see the [jrs-supervisor] line above). Airflow retries."
            )
        head = f"spark-pipelines exited with code {code}" + (f": {self.error_line}" if self.error_line else "")
        if self.problems:
            head += "\nWhat the pipeline reported:\n" + "\n".join(self.problems)
        tail = self.tail.text()
        return head + (f"\nLast lines of its output:\n{tail}" if tail else "")

    def submission(self) -> tuple[int | None, str | None]:
        process = self._process
        return (process.pid if process is not None else None), self.tail.application_id

    # -- ending it -----------------------------------------------------------------------------
    def alive(self) -> bool:
        process = self._process
        return process is not None and process.poll() is None

    def stop(self) -> None:
        """Kill the supervisor and everything it started (the JVM, the CLI's Python). Never raises."""
        with self._lock:
            self._stopped = True
            process = self._process
        if process is not None and process.poll() is None:
            try:
                tree = psutil.Process(process.pid).children(recursive=True)
            except psutil.Error:
                tree = []
            with contextlib.suppress(OSError):
                process.kill()
            for child in tree:
                with contextlib.suppress(psutil.Error):
                    child.kill()
        self._sweep()

    def _sweep(self) -> None:
        """Kill what is left of this attempt once its supervisor ended, and wait for it to end
        (:func:`~airflow_jrs.launch.attempt_sweep.sweep_attempt`). Never raises."""
        if self._folder is not None:
            sweep_attempt(self._folder, self.log)

    def kill(self, run: JobRun | None, fence: int | None, *, by: str = "on_kill") -> None:
        cancel_on_kill(run, fence, self.alive, self.log)  # the one stop path: the request says who asked
        self.stop()

    def failure(self, error: BaseException) -> Failure:
        process = None if isinstance(error, PipelineRunError) else "spark-pipelines"  # its message says it all
        return Failure(error, process=process, application_id=self.tail.application_id)
