"""``on_store_unavailable = run``: compute without the store's guarantee, and say so loudly.

A team may prefer recomputing to waiting for Redis (docs/operations-store-errors.md). When
the submit task cannot read the store or take the job's lease, it then runs spark-submit
anyway, but:

* it holds no lease, so it has no fencing token: it **writes nothing** to the store (no
  intent, no result). A result that cannot be fenced could overwrite the result of an attempt
  that did hold the lease, or be written beside one that is still running;
* its output goes to a staging folder of its own, ``unguarded-<random>`` beside the fenced
  ``fence-N`` folders, so it can never be mistaken for (or clobber) a fenced attempt's output;
* it submits its own application, always: what an earlier try left in the task state store for
  the provider's ``durable`` (a driver id, a cached driver status) is forgotten first, or, when it
  cannot be, the launch runs with ``durable=False``. Otherwise the provider reattaches to that try's
  driver and the task reports, as this run's, an ``unguarded-*`` folder nobody wrote;
* ``on_kill`` kills its spark-submit (and in a cluster deploy mode its driver) through the
  provider's own kill on the launch's operator (:func:`kill_unguarded`), and a killed run fails;
* it logs at ERROR before and after, and returns a payload with ``"guarded": false`` and no
  ``state``, so downstream tasks and people can tell.

The price: the job may run twice (or more), later attempts do not know it ran, and a cleanup
task of the run finds no result to commit. Never used after the lease was taken: from there
on an attempt always fails closed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_jrs.domain.identity import job_id_for
from airflow_jrs.domain.paths import staging_root
from airflow_jrs.exceptions import JobKilledError, StoreUnavailableError
from airflow_jrs.hooks.jrs import JrsHook
from airflow_jrs.launch import durable
from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.spark.conf import fill_placeholders, job_conf

#: Prefix of an unguarded run's staging folder (fenced ones are ``fence-N``).
UNGUARDED_PREFIX = "unguarded-"
#: The attribute of the task's operator that holds its unguarded launch's operator (the
#: provider's per-launch copy) while it runs: what ``on_kill`` kills.
RUNNER_ATTR = "_jrs_unguarded_runner"
#: How long ``on_kill`` waits for the hook to hold the spark-submit process it is starting.
_PROCESS_WAIT = 10.0


def run_unguarded(op: Any, context: Any, hook: JrsHook, exc: StoreUnavailableError) -> dict[str, Any]:
    """Run ``op``'s Spark application without lease, intent or result; return its payload."""
    job_id = job_id_for(op.job_id, context)
    s = hook.settings
    op.log.error(
        "Job %s: RUNNING SPARK WITHOUT THE JOB RESULT STORE (on_store_unavailable=run): %s "
        "No lease, no fencing token: the job may run twice, and nothing is recorded.",
        job_id,
        exc,
    )
    op._spark_target()  # a missing Spark connection or an unsafe deploy mode fails here too
    staging = f"{staging_root(s.output_root, s.namespace, job_id)}/{UNGUARDED_PREFIX}{uuid.uuid4().hex[:12]}"
    args = fill_placeholders(op.application_args, output=staging, job_id=job_id, fence=0)
    conf = {**(op.conf or {}), **job_conf(job_id=job_id, namespace=s.namespace, fence=0, output_dir=staging)}
    # The provider's own execute on a copy with this run's conf and arguments: the task's operator
    # keeps what the user gave it (a retry that finds the store fills its placeholders anew).
    runner = provider.submit_runner(op, conf=conf, application_args=args, name=op.name)
    _submit_afresh(runner, context, op.log)

    def prepare(spark_hook: Any) -> None:  # the provider built its hook: spark-submit starts next
        _refuse_if_killed(op, job_id, "before spark-submit started")
        # A kill between this check and the start is seen as the provider reads spark-submit's output.
        provider.read_along(spark_hook, lambda lines: _kill_if_started_after_kill(op, lines))

    setattr(op, RUNNER_ATTR, runner)
    try:
        _refuse_if_killed(op, job_id, "while the job result store failed")
        provider.run_submit(runner, context, prepare)
    except JobKilledError:
        raise
    except Exception:
        _refuse_if_killed(op, job_id, "while spark-submit ran")  # its failure is the kill's
        raise
    finally:
        setattr(op, RUNNER_ATTR, None)
    _refuse_if_killed(op, job_id, "while spark-submit ran")  # whatever it returned: a killed run never succeeds
    named = op.outputs or {"output": ""}
    outputs = {name: (f"{staging}/{sub}".rstrip("/") if sub else staging) for name, sub in named.items()}
    op.log.error(
        "Job %s: Spark finished WITHOUT the job result store; output in %s is not recorded "
        "(no result, no cleanup, later attempts will compute it again).",
        job_id,
        staging,
    )
    return {"job_id": job_id, "status": "SUCCEEDED", "outputs": outputs, "skipped": False, "guarded": False}


def kill_unguarded(op: Any) -> None:
    """``on_kill`` of an unguarded run: the provider's own kill on the launch's operator (spark-submit,
    and a cluster driver it knows of). Never raises: it runs in a signal handler."""
    runner = getattr(op, RUNNER_ATTR, None)
    # The launch's copy while an unguarded run runs; else the operator itself when something gave
    # it a hook (the provider's own tests do): the provider's kill, as before the per-launch copy.
    target = runner if runner is not None and provider.submit_hook_of(runner) is not None else op
    hook = provider.submit_hook_of(target)
    if hook is None:  # nothing started (run_unguarded checks the kill before it starts)
        return
    # spark-submit may be running already while Popen has not returned its process to the hook
    # (a kill on a loaded machine lands there): wait for the hook to have it, briefly.
    deadline = time.monotonic() + _PROCESS_WAIT
    while target is runner and provider.submit_process(hook) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        SparkSubmitOperator.on_kill(target)
    except Exception as exc:
        op.log.warning("Could not stop the unguarded spark-submit: %s", exc)


def _submit_afresh(runner: Any, context: Any, log: Any) -> None:
    """Forget what an earlier try left for the provider's ``durable`` in the task state store, so that
    ``runner`` submits its own application (and persists its id, which a later guarded try checks
    before it submits beside it); when that cannot be done, run ``runner`` with ``durable=False``."""
    store = durable.state_store(context, bool(getattr(runner, "durable", False)))
    try:
        durable.forget_before_launch(store, provider.state_store_keys(runner))
    except durable.StateStoreNotClearedError as exc:
        runner.durable = False  # the launch's copy only: the task's operator keeps its setting
        log.error("%s Running this unguarded launch with durable=False instead.", exc)


def _kill_if_started_after_kill(op: Any, lines: Iterable[Any]) -> Iterator[Any]:
    """spark-submit's output on its way to the provider; first, once it runs: a kill that came
    before it started (and found nothing to kill) kills it now."""
    if getattr(op, "_kill_pending", False):
        kill_unguarded(op)
    yield from lines


def _refuse_if_killed(op: Any, job_id: str, when: str) -> None:
    if getattr(op, "_kill_pending", False):
        raise JobKilledError(
            f"job {job_id}: the task was killed {when} (unguarded run, on_store_unavailable=run); nothing "
            "recorded. Airflow retries it if it has retries left.",
            job_id=job_id,
        )
