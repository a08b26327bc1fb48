"""The Spark conf keys through which the operator tells an application who it is.

The operator sets them on every submission; the application reads them (``job_context``);
recovery finds a predecessor's spark-submit by them on its command line. One definition
for the three of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CONF_JOB_ID = "spark.jrs.job_id"
CONF_FENCE = "spark.jrs.fence"
#: The owner nonce of the attempt's lease (absent for a fence without one): with the token, the
#: fence identity that names the stream's control files (spark/control.py).
CONF_FENCE_NONCE = "spark.jrs.fence_nonce"
CONF_OUTPUT_DIR = "spark.jrs.output_dir"
CONF_NAMESPACE = "spark.jrs.namespace"
#: Streaming jobs only: the stable checkpoint location and the stop/cancel request folder.
CONF_CHECKPOINT_DIR = "spark.jrs.checkpoint_dir"
CONF_CONTROL_DIR = "spark.jrs.control_dir"


def job_conf(*, job_id: str, namespace: str, fence: int, output_dir: str) -> dict[str, str]:
    """The ``spark.jrs.*`` conf of one attempt's submission."""
    conf = {
        CONF_JOB_ID: job_id,
        CONF_NAMESPACE: namespace,
        CONF_FENCE: str(int(fence)),
        CONF_OUTPUT_DIR: output_dir,
    }
    nonce = getattr(fence, "nonce", None)
    if nonce:
        conf[CONF_FENCE_NONCE] = nonce
    return conf


def command_line_marks(*, job_id: str, namespace: str) -> tuple[str, str]:
    """What a spark-submit of this job carries on its command line (``--conf key=value``)."""
    return f"{CONF_JOB_ID}={job_id}", f"{CONF_NAMESPACE}={namespace}"


def streaming_conf(*, checkpoint_dir: str, control_dir: str) -> dict[str, str]:
    """The extra ``spark.jrs.*`` conf of a streaming job's submission."""
    return {CONF_CHECKPOINT_DIR: checkpoint_dir, CONF_CONTROL_DIR: control_dir}


#: Placeholders the operator replaces in ``application_args`` (single braces survive Jinja).
PLACEHOLDERS = ("{jrs_output}", "{jrs_job_id}", "{jrs_fence}")


def fill_placeholders(args: Sequence[Any] | None, *, output: str, job_id: str, fence: int) -> list[Any]:
    """``application_args`` with ``{jrs_output}``, ``{jrs_job_id}`` and ``{jrs_fence}`` filled in."""
    values = dict(zip(PLACEHOLDERS, (output, job_id, str(fence)), strict=True))
    filled = []
    for arg in args or []:
        if isinstance(arg, str):
            for placeholder, value in values.items():
                arg = arg.replace(placeholder, value)
        filled.append(arg)
    return filled
