"""Which jobs' entries changed since a moment: the namespace's notifications, kept as epochs.

A reader that keeps what it read between requests (the Job calendar's rows in the API server,
:mod:`airflow_jrs.plugins.calendar`) must learn when an entry it kept changed, without reading
every entry again. Every write of an entry publishes one message on the namespace's events
channel in its own script (create, clean, forget, purge, quarantine, release,
rewrite; :mod:`.scripts`), so a subscriber sees each write after it is done.

The watcher counts time in **epochs**: each notification it handles is a new epoch, and it
remembers the last epoch that changed each job. A reader takes :attr:`ResultChanges.epoch`
*before* it reads; what it read stays good while :meth:`ResultChanges.unchanged_since` says no
job of it changed after that epoch. The timeline that makes this safe::

    reader: epoch() = 7 ... reads job A (old bytes) ......................... keeps A at 7
    writer:                     writes A (new bytes), publishes
    watcher:                                           handles "A" -> epoch 8, A changed at 8
    reader, next request: unchanged_since({A}, 7)? A changed at 8 > 7: read A again

A notification handled before the read began (changed at 6 <= 7) was for a write the read saw.

Pub/sub is fire-and-forget: a message published while the watcher was not subscribed (before it
started, over a dropped connection, across a failover) is gone. So every (re)subscription Redis
confirms raises the **floor**: what was read before it is stale, whatever the messages said.
A connection that went quiet without closing is found by a ``PING`` every
:data:`PING_EVERY` seconds (its answer comes through the subscription); no answer within
:data:`PING_EVERY` more seconds counts as lost. Until the first confirmation, and while the
connection is lost, :attr:`ResultChanges.active` is ``False``: readers keep nothing.

Store-only: redis-py and the standard library.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.results.serde import event_job_id

log = logging.getLogger(__name__)

#: Epochs count for the whole process, not per watcher: a row kept under a watcher that was
#: replaced (the page reconnected with new settings) is older than the new watcher's floor.
_EPOCHS = itertools.count(1)
#: Seconds between two checks that the subscription still answers.
PING_EVERY = 5.0
#: Seconds to wait before subscribing again after the connection was lost.
RETRY_AFTER = 1.0
#: Jobs whose last change the watcher remembers; past it, everything read before counts as stale.
KEEP_CHANGES = 200_000


class ResultChanges:
    """The namespace's entry changes as epochs, from a daemon thread subscribed to its events.

    :param client: a redis-py client (``Redis`` or ``RedisCluster``) of the namespace's server;
        the watcher opens its own pub/sub connection from it
    :param namespace: the store's namespace
    """

    def __init__(self, client: Any, namespace: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._keys = KeySpace(namespace)
        self._clock = clock
        self._lock = threading.Lock()  # held only to update or read the counters, never across I/O
        self._epoch = next(_EPOCHS)
        self._floor = 0
        self._active = False
        self._changed: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def namespace(self) -> str:
        return self._keys.namespace

    @property
    def active(self) -> bool:
        """Is the subscription confirmed and answering? While not, a reader keeps nothing."""
        return self._active

    @property
    def epoch(self) -> int:
        """Now, in epochs: take it before a read whose answers are kept."""
        return self._epoch

    def unchanged_since(self, job_ids: Iterable[str], epoch: int) -> bool:
        """Did no entry of ``job_ids`` change after ``epoch`` (and no subscription begin since)?

        Under the lock: a subscription begun mid-check (the old floor, then the emptied changes)
        would pass a job whose notification had already arrived."""
        with self._lock:
            if not self._active or epoch < self._floor:
                return False
            if epoch >= self._epoch:  # nothing at all happened since
                return True
            changed = self._changed
            return all(changed.get(job_id, 0) <= epoch for job_id in job_ids)

    def start(self) -> ResultChanges:
        """Subscribe in a daemon thread (once); returns at once: :attr:`active` turns ``True``
        when Redis confirms the subscription."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"jrs-result-changes-{self.namespace}", daemon=True
                )
                self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # --- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        said = False
        while not self._stop.is_set():
            try:
                self._listen()
                said = False
            except Exception as exc:  # any failure: readers keep nothing until we are back
                self._lose()
                if self._stop.is_set():  # stopped: its client may be closed under it
                    break
                if not said:  # once per outage, not once per retry
                    log.warning(
                        "Job results: lost the notifications of namespace %r (%s: %s); pages read the store "
                        "afresh until they are back", self.namespace, type(exc).__name__, exc,
                    )  # fmt: skip
                    said = True
                self._stop.wait(RETRY_AFTER)
        self._lose()

    def _listen(self) -> None:
        pubsub = self._client.pubsub()
        try:
            pubsub.subscribe(self._keys.events)
            pinged_at = self._clock()
            answered = True
            while not self._stop.is_set():
                now = self._clock()
                if now - pinged_at >= PING_EVERY:
                    if not answered:
                        raise ConnectionError(f"no answer to a PING within {PING_EVERY:.0f} s")
                    pubsub.ping()
                    pinged_at, answered = now, False
                msg = pubsub.get_message(timeout=1.0)
                if msg is None:
                    continue
                kind = msg.get("type")
                kind = kind.decode() if isinstance(kind, bytes) else kind
                if kind == "pong":  # redis-py gives a PING's answer this type, on RESP2 and RESP3
                    answered = True
                elif kind == "subscribe":  # the first one, or redis-py's re-subscription after a reconnect
                    self._begin()
                    answered = True
                elif kind == "message":
                    self._note(event_job_id(msg.get("data")))
        finally:
            try:
                pubsub.close()
            except Exception:  # closing a broken connection: nothing left to keep
                pass

    def _begin(self) -> None:
        with self._lock:
            self._epoch = next(_EPOCHS)
            self._floor = self._epoch
            self._changed.clear()  # everything before the floor is stale anyway
            self._active = True

    def _note(self, job_id: str | None) -> None:
        with self._lock:
            self._epoch = next(_EPOCHS)
            if job_id is None:  # unreadable: every job may have changed
                self._floor = self._epoch
                self._changed.clear()
            else:
                self._changed[job_id] = self._epoch
                if len(self._changed) > KEEP_CHANGES:  # bounded memory: forget all, read afresh
                    self._floor = self._epoch
                    self._changed.clear()

    def _lose(self) -> None:
        with self._lock:
            self._active = False
            self._epoch = next(_EPOCHS)
            self._floor = self._epoch


#: One watcher per namespace in this process (the API server's threads share it).
_watchers: dict[str, ResultChanges] = {}
_watchers_lock = threading.Lock()


def result_changes(client: Any, namespace: str) -> ResultChanges:
    """The started watcher of ``namespace`` through ``client``. A new client for the namespace
    (the plugin reconnected with new settings) stops the old client's watcher."""
    with _watchers_lock:
        found = _watchers.get(namespace)
        if found is not None and found._client is not client:
            found.stop(timeout=0)
            found = None
        if found is None:
            found = _watchers[namespace] = ResultChanges(client, namespace)
    return found.start()


def _forget_watchers_after_fork() -> None:
    """A forked child has none of its parent's threads: a watcher it inherited would say
    ``active`` with nobody listening, and rows kept on its word would never go stale. The child
    starts its own watcher on first use; what the inherited ones vouched for is stale."""
    global _watchers_lock
    _watchers_lock = threading.Lock()  # the parent may have held it while forking
    for watcher in _watchers.values():
        watcher._lock = threading.Lock()
        watcher._lose()
        watcher._thread = None
    _watchers.clear()


os.register_at_fork(after_in_child=_forget_watchers_after_fork)
