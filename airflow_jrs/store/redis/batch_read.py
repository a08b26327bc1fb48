"""Many jobs' entries in one round trip per batch: what a missing-only backfill or a plan reads.

``store.get_entry`` is one round trip per job: right for a task deciding its own job, too slow
for ten years of a hundred jobs read from one CLI (36,500 round trips instead of 73). Here
each batch of at most :data:`~airflow_jrs.store.redis.read_rules.READ_CHUNK` jobs is one call of
the ``READ_ENTRIES`` script (``GET`` of each result, else its reference bucket's field, and
``EXISTS`` of each quarantine marker, as the task's own read asks them, and the result's
``PTTL``), not two commands per job in a pipeline: packing and parsing
36,600 replies cost more than Redis's work (the calendar's 18,300 jobs, docs/benchmarks.md).
Every key of a namespace hashes to one slot, so on Redis Cluster the script runs on one node
(redis-py refuses a multi-key ``MGET`` in a cluster pipeline).

The bytes are decoded by the store's own decoder (``store.entry_from``, by the rules of
:mod:`airflow_jrs.store.redis.read_rules`), so a job reads the same here as in the task, corrupt
entries are quarantined the same way; unlike ``get_entries`` of the async store, one bad
entry does not hide the others: its error is that job's answer, and the caller decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_jrs.domain.model import validate_job_id
from airflow_jrs.exceptions import JobResultEntryError
from airflow_jrs.store.redis.errors import redis_errors
from airflow_jrs.store.redis.read_rules import READ_CHUNK
from airflow_jrs.store.redis.result_scripts import READ_ENTRIES
from airflow_jrs.store.results.base import Answer

if TYPE_CHECKING:
    from airflow_jrs.store.redis.result_reads import RedisReads


def read_entries(
    store: RedisReads,
    job_ids: Sequence[str],
    *,
    batch: int = READ_CHUNK,
    expiries: dict[str, float] | None = None,
) -> dict[str, Answer]:
    """Each job's :data:`Answer`, ``batch`` jobs per round trip (in order).

    :param expiries: filled with the seconds left of each entry that expires (a clean entry
        under ``[jrs] retention``), read in the same script: what a reader that keeps the
        answers (the calendar's rows) needs to know when one goes without a notification.

    Raises :class:`~airflow_jrs.exceptions.StoreUnavailableError` when Redis cannot be read:
    a partial answer would call unread jobs missing (fail closed).
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    ids = [validate_job_id(j) for j in job_ids]
    keys = store.keys
    answers: dict[str, Answer] = {}
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        with redis_errors(f"read the results of {len(chunk)} jobs from {chunk[0]!r}", store.namespace):
            replies = store.client.register_script(READ_ENTRIES)(
                keys=[keys.result(job_id) for job_id in chunk]
                + [keys.quarantine(job_id) for job_id in chunk]
                + [keys.reference_bucket(job_id) for job_id in chunk],
                args=chunk,
            )
        for i, job_id in enumerate(chunk):
            raw, quarantined, ttl_ms = replies[3 * i], replies[3 * i + 1], replies[3 * i + 2]
            if expiries is not None and raw is not None and int(ttl_ms) >= 0:
                expiries[job_id] = int(ttl_ms) / 1000
            try:
                answers[job_id] = store.entry_from(job_id, raw, bool(quarantined))
            except JobResultEntryError as exc:  # quarantined, corrupt (now quarantined), newer schema
                answers[job_id] = exc
    return answers
