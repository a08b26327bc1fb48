"""What a refused result write raises: one exception per reply code, for every write.

The result scripts (:mod:`.scripts`) answer with the codes of :mod:`~airflow_jrs.store.redis.lua`; create,
clean and forget share most of them (a stale fence, an entry changed since it was read, no
entry, a quarantined one). Each code is turned into its exception here, once, so that the
three writes cannot drift apart in what they tell the caller to do next.
"""

from __future__ import annotations

from airflow_jrs.exceptions import (
    JobResultEntryAlreadyExistsError,
    JobResultEntryChangedError,
    LeaseLostError,
    NoSuchJobResultError,
)
from airflow_jrs.store.redis import lua
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.read_rules import quarantined_error

#: The writes, by what is said of them when they are refused: (what was not done, what to do).
_NOT_DONE = {
    "create": ("the result was not written", "a job's result is written once"),
    "clean": ("it was not marked clean", "clean up for what is there now"),
    "forget": ("nothing was forgotten", "forget what is there now if that is still wanted"),
}


def refusal(code: int, keys: KeySpace, job_id: str, write: str, fence: int | None = None) -> Exception:
    """The exception for ``code``, the reply of the ``write`` (``create``, ``clean``, ``forget``)
    of ``job_id``; raises ``ValueError`` for a code that is not a refusal."""
    namespace = keys.namespace
    not_done, next_step = _NOT_DONE[write]
    if code == lua.STALE_FENCE:
        return LeaseLostError(
            f"job {job_id!r}: fencing token {fence} no longer holds the lease; {not_done} (another "
            "attempt owns the job now, and may have written a newer result).",
            job_id=job_id,
            fence=fence or 0,
        )
    if code == lua.CHANGED:
        return JobResultEntryChangedError(
            f"job {job_id!r}: its result changed since it was read (a newer result was written, or "
            f"its cleanup committed it); {not_done} in namespace {namespace!r}. Read the entry again "
            f"(`airflow-jrs show {job_id}`) and {next_step}.",
            job_id=job_id,
            namespace=namespace,
        )
    if code == lua.NOOP and write == "create":
        return JobResultEntryAlreadyExistsError(
            f"job {job_id!r} already has a result in namespace {namespace!r}; {next_step}. "
            "Use forget_result() (or `airflow-jrs forget`) to run it again.",
            job_id=job_id,
            namespace=namespace,
        )
    if code == lua.NOOP:
        return NoSuchJobResultError(
            f"job {job_id!r} has no result in namespace {namespace!r}; {not_done}. Check the job id "
            "(and the namespace of the jrs connection).",
            job_id=job_id,
            namespace=namespace,
        )
    if code == lua.QUARANTINED:
        return quarantined_error(keys, job_id)
    raise ValueError(f"reply {code!r} to the {write} of job {job_id!r} is not a refusal")
