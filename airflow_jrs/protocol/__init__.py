"""The protocol: one Airflow-free unit every way into Spark goes through.

Decide, lease, recover or adopt, record the intent, launch, record the result, release
(:class:`JobAttempt`); commit after cleanup (:mod:`.cleanup`); recompute and stop on request.
The Airflow operators call it with a launcher for spark-submit; the fault trials call it with
a stand-in launcher, in real processes, so what they prove holds for this code.

    jobs = RedisJobNamespace.from_url("redis://127.0.0.1:6379/0", settings_for("prod", output_root=..., spec_root=...))

The attempt takes any :class:`~airflow_jrs.store.namespace.JobNamespace` (the store's services
contract, re-exported here with ``settings_for``); on Redis it is
:class:`airflow_jrs.store.redis.namespace.RedisJobNamespace`.
    outcome = JobAttempt(jobs, JobSpec("daily.2024-01-01", fingerprint), attempt, launcher).run()
"""

from airflow_jrs.protocol.attempt import JobAttempt
from airflow_jrs.protocol.cleanup import LOCAL_OR_FSSPEC, Files, RetryPolicy, commit_job
from airflow_jrs.protocol.launcher import COMMITTED, ENDED, RUNS, Ended, Failure, Launch, Launcher, Predecessor
from airflow_jrs.protocol.terms import ADOPTED, COMPUTED, SKIPPED, AttemptPolicy, JobSpec, Outcome
from airflow_jrs.settings import settings_for
from airflow_jrs.store.namespace import JobNamespace

__all__ = [
    "ADOPTED",
    "COMMITTED",
    "COMPUTED",
    "ENDED",
    "LOCAL_OR_FSSPEC",
    "RUNS",
    "SKIPPED",
    "AttemptPolicy",
    "Ended",
    "Failure",
    "Files",
    "JobAttempt",
    "JobNamespace",
    "JobSpec",
    "Launch",
    "Launcher",
    "Outcome",
    "Predecessor",
    "RetryPolicy",
    "commit_job",
    "settings_for",
]
