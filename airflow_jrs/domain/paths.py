"""Where a job's files live and what its Spark application is called: one rule, every reader.

The operator writes an attempt's output to its staging folder and its spec to the state
backend; recovery looks for a predecessor's application by name and tag; cleanup removes
every staging folder and spec but the winner's and a live attempt's. All of them must
compute the same paths and names, so they all call these functions::

    <output_root>/<namespace>/<job dir>/fence-<token>-<nonce>/       staging of one attempt
    <spec_root>/<namespace>/<job dir>/fence-<token>-<nonce>.json     spec of one attempt
    <output_root>/<namespace>/<job dir>/stream/{checkpoint,output,control}/   a streaming job
    jrs-<namespace>-<job id>-f<token>                          Spark application name

``<job dir>`` is the job id with ``/`` replaced by ``_`` (a job id may hold ``/``; a path
segment may not). ``<nonce>`` is the owner nonce of the attempt's lease
(:mod:`airflow_jrs.spark.fence`): two attempts handed the same token after a failover that lost
the counter's ``INCR`` still get folders of their own. Folders named ``fence-<token>`` (no
nonce) are from versions before it, and are read alike (:func:`fence_token_of`). The
application name keeps the bare token: it is what people search for in the Spark UI.
Airflow-free: the PySpark side and the CLI may import it.
"""

from __future__ import annotations

import hashlib

from airflow_jrs.domain.model import validate_job_id

# Defined beside the driver's helpers (a PySpark driver names its control files by them), and
# read from here by everyone else.
from airflow_jrs.spark.fence import FENCE_PREFIX as FENCE_PREFIX
from airflow_jrs.spark.fence import fence_name as fence_name

#: The folder of a streaming job beside its attempts' ``fence-N`` folders (see :func:`stream_root`).
STREAM_DIR = "stream"


def job_dir(job_id: str) -> str:
    """The job's folder name under a root: its id with ``/`` replaced by ``_``."""
    return validate_job_id(job_id).replace("/", "_")


def fence_token_of(name: str) -> int | None:
    """The token in a ``fence-<token>[-<nonce>]`` name (a ``.json`` suffix allowed), or ``None``
    when ``name`` is not one: what cleanup compares with a result's integer ``fence``."""
    stem = name.removesuffix(".json")
    if not stem.startswith(FENCE_PREFIX):
        return None
    token = stem[len(FENCE_PREFIX) :].split("-", 1)[0]
    return int(token) if token.isdigit() else None


def staging_root(output_root: str, namespace: str, job_id: str) -> str:
    """The folder holding every attempt's staging folder of the job."""
    return f"{output_root.rstrip('/')}/{namespace}/{job_dir(job_id)}"


def staging_path(output_root: str, namespace: str, job_id: str, fence: int) -> str:
    """The staging folder of the attempt holding fencing token ``fence``."""
    return f"{staging_root(output_root, namespace, job_id)}/{fence_name(fence)}"


def stream_root(output_root: str, namespace: str, job_id: str) -> str:
    """The folder of a streaming job, stable across its attempts and runs (never per fence):
    ``checkpoint/`` (Spark's), ``output/`` (the stream's sink) and ``control/`` (stop and cancel
    requests, see :mod:`airflow_jrs.spark.control`). Cleanup only removes ``fence-N`` folders, so
    a stopped or canceled stream keeps its checkpoint for the run that resumes it."""
    return f"{staging_root(output_root, namespace, job_id)}/{STREAM_DIR}"


def checkpoint_path(output_root: str, namespace: str, job_id: str) -> str:
    """The stream's Spark checkpoint location: every attempt resumes from it."""
    return f"{stream_root(output_root, namespace, job_id)}/checkpoint"


def stream_output_path(output_root: str, namespace: str, job_id: str) -> str:
    """The stream's output folder: stable, because the file sink's exactly-once log lives in it."""
    return f"{stream_root(output_root, namespace, job_id)}/output"


def control_path(output_root: str, namespace: str, job_id: str) -> str:
    """Where stop and cancel requests for the stream's running attempt are written."""
    return f"{stream_root(output_root, namespace, job_id)}/control"


def control_path_of_output(output: str) -> str | None:
    """The control folder of a stream, from its output folder (what an intent records as its
    staging); None when ``output`` is not a stream's output folder."""
    parent, _, name = output.rstrip("/").rpartition("/")
    if name != "output" or parent.rpartition("/")[2] != STREAM_DIR:
        return None
    return f"{parent}/control"


def spec_dir(spec_root: str, namespace: str, job_id: str) -> str:
    """The folder holding every spec of the job in the state backend."""
    return f"{spec_root.rstrip('/')}/{namespace}/{job_dir(job_id)}"


def spec_path(spec_root: str, namespace: str, job_id: str, fence: int) -> str:
    """The spec of the attempt holding fencing token ``fence``."""
    return f"{spec_dir(spec_root, namespace, job_id)}/{fence_name(fence)}.json"


def app_name_prefix(namespace: str, job_id: str) -> str:
    """What every attempt's application name of the job starts with (the fence follows)."""
    return f"jrs-{namespace}-{job_id}-f"


def app_name(namespace: str, job_id: str, fence: int) -> str:
    """The Spark application name of an attempt: deterministic, so a successor can find it."""
    return f"{app_name_prefix(namespace, job_id)}{int(fence)}"


def job_tag(namespace: str, job_id: str) -> str:
    """A short tag of the job, valid as a YARN tag and a Kubernetes label value."""
    return hashlib.sha1(f"{namespace}/{job_id}".encode()).hexdigest()[:16]
