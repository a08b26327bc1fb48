"""Intent before side effect (FLINK-2354): the spec goes to a state backend, a reference to Redis.

Before an attempt submits Spark it writes the full submission spec (application, rendered
arguments, conf, fingerprint) to the state backend (a local folder or any fsspec URL), then
records a small *intent* in Redis under its fence: which spec, which attempt (host, pid),
which staging folder, which Spark application name. The intent exists exactly while the job
may need recovery: the script that writes the job's result deletes it in the same step.

A later attempt that takes over the job's lease and finds an intent knows an earlier attempt
died mid-flight, and where to look: its staging folder (a commit marker there means the
application finished) and its spark-submit process (found by the deterministic app name).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

import fsspec
import redis as redis_lib

from airflow_jrs.domain.paths import fence_name, spec_path
from airflow_jrs.exceptions import CorruptIntentError, HeartbeatGone, LeaseLostError, StaleHeartbeat
from airflow_jrs.store import intent_scripts as scripts
from airflow_jrs.store import lua
from airflow_jrs.store.durability import DurableWrites
from airflow_jrs.store.errors import redis_errors
from airflow_jrs.store.fence import Fence, fence_arg, nonce_of
from airflow_jrs.store.keys import KeySpace
from airflow_jrs.store.read_rules import as_str

INTENT_VERSION = 1


@dataclass(frozen=True)
class Intent:
    """The running-job reference kept in Redis (small: the spec itself lives in the backend).

    ``fence`` is the attempt's :class:`~airflow_jrs.store.fence.Fence`: stored as the integer
    token plus a ``nonce`` member, so a successor that reads the intent addresses that attempt
    (its heartbeat, its staging folder) and not another one handed the same token."""

    job_id: str
    fence: int
    spec_uri: str
    staging: str
    app_name: str
    host: str
    pid: int
    started_at: float
    fingerprint: str | None = None
    #: Amended while Spark runs (:meth:`IntentStore.amend`): the spark-submit process on
    #: ``host`` and, in cluster deploy modes, the application (YARN) or driver id. A successor
    #: names them when it recovers; an operator can find the application by them.
    submit_pid: int | None = None
    application_id: str | None = None
    #: Recorded before the launch by a Spark Connect attempt: the session it opens on the server,
    #: which only a client of the same session can watch or interrupt (a successor reattaches).
    session_id: str | None = None

    def to_json(self) -> str:
        nonce = nonce_of(self.fence)
        extra = {"nonce": nonce} if nonce else {}
        return json.dumps({"v": INTENT_VERSION, **asdict(self), **extra}, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | str) -> Intent:
        doc = json.loads(raw)
        if doc.pop("v", None) != INTENT_VERSION:
            raise ValueError(f"unsupported intent version in {raw!r}")
        # Fields are only ever added, optional and informational within a version: a worker
        # that does not know one yet (a rolling upgrade) still recovers from the intent.
        known = {f.name for f in fields(cls)}
        nonce = doc.pop("nonce", None)
        if not isinstance(doc.get("fence"), int) or not (nonce is None or isinstance(nonce, str)):
            raise ValueError(f"intent fence must be an integer with an optional nonce, in {raw!r}")
        doc["fence"] = Fence(doc["fence"], nonce)
        return cls(**{k: v for k, v in doc.items() if k in known})


class IntentStore:
    """Writes specs to ``spec_root`` and intents to Redis, under the job's fence."""

    def __init__(
        self, client: redis_lib.Redis, namespace: str, spec_root: str, *, durable: DurableWrites | None = None
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.keys = KeySpace(namespace)
        self.spec_root = spec_root.rstrip("/")
        #: ``durability`` for recording the intent (``None``: acknowledged in memory)
        self.durable = durable
        self._record = client.register_script(scripts.RECORD_INTENT)
        self._clear = client.register_script(scripts.CLEAR_INTENT)
        self._amend = client.register_script(scripts.AMEND_INTENT)

    def spec_uri(self, job_id: str, fence: int) -> str:
        return spec_path(self.spec_root, self.namespace, job_id, fence)

    def record(self, intent: Intent, spec: dict[str, Any]) -> Intent:
        """Persist ``spec`` at ``intent.spec_uri``, then the intent (fenced). Order matters:
        a reference must never point at a spec that is not there yet."""
        fs, path = fsspec.core.url_to_fs(intent.spec_uri)
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(path, "w") as fh:
            json.dump({"v": 1, "job_id": intent.job_id, "fence": intent.fence, **spec}, fh, default=str)
        self.update(intent)
        return intent

    def update(self, intent: Intent) -> None:
        """Record ``intent`` (fenced). With ``durability`` set it returns only once the replicas (or
        the disk) have it: Spark is submitted after this, and a successor that took the lease
        after a failover must find what it has to recover."""
        keys = [self.keys.lease(intent.job_id), self.keys.intent(intent.job_id)]
        args = [fence_arg(intent.fence), intent.to_json()]
        with redis_errors(f"record the intent of job {intent.job_id!r}", self.namespace, intent.job_id):
            if self.durable is None:
                code = self._record(keys=keys, args=args)
            else:
                code = self.durable.run(
                    self.client, self._record, keys=keys, args=args, written=lambda code: code == lua.OK,
                    what=f"the intent of job {intent.job_id!r}", namespace=self.namespace, job_id=intent.job_id,
                    then="Spark was not submitted; the task's retry recovers from the intent (nothing ran) once "
                    "the store is healthy",
                )  # fmt: skip
        if code == lua.STALE_FENCE:
            raise LeaseLostError(
                f"job {intent.job_id!r}: fencing token {intent.fence} lost the lease before "
                "its intent was recorded; not submitting Spark.",
                job_id=intent.job_id,
                fence=intent.fence,
            )

    def get(self, job_id: str) -> Intent | None:
        """The job's intent, or ``None``; raises :class:`CorruptIntentError` when unreadable."""
        with redis_errors(f"read the intent of job {job_id!r}", self.namespace, job_id):
            raw = self.client.get(self.keys.intent(job_id))
        return self._parse(job_id, raw)

    def _parse(self, job_id: str, raw: Any) -> Intent | None:
        if raw is None:
            return None
        try:
            return Intent.from_json(raw)
        except (ValueError, TypeError) as exc:
            key = self.keys.intent(job_id)
            raise CorruptIntentError(
                f"intent {key!r} is unreadable ({exc}); inspect it, and delete it by hand once no "
                "attempt of the job runs (an intent is only a reference: the job's result is unaffected)",
                job_id=job_id,
                namespace=self.namespace,
                key=key,
            ) from None

    def list_intents(self) -> dict[str, Intent | CorruptIntentError]:
        """Every recorded intent of the namespace, by job id: the jobs that may need recovery.

        Intents have no index (one exists only while a job is in flight), so this SCANs, never
        KEYS. An unreadable intent is returned as its :class:`CorruptIntentError` rather than
        raised: one bad reference must not hide the others from the on-call engineer."""
        with redis_errors("list intents", self.namespace):
            found = sorted(as_str(k) for k in self.client.scan_iter(match=self.keys.job_pattern("intent"), count=1000))
            raws = [raw for start in range(0, len(found), 500) for raw in self.client.mget(found[start : start + 500])]
        out: dict[str, Intent | CorruptIntentError] = {}
        for key, raw in zip(found, raws, strict=True):
            job_id = self.keys.job_id_of("intent", key)
            try:
                intent = self._parse(job_id, raw)
            except CorruptIntentError as exc:
                out[job_id] = exc
                continue
            if intent is not None:  # cleared between the SCAN and the read
                out[job_id] = intent
        return out

    def live_fences(self, job_id: str) -> set[str]:
        """Is a live attempt working on this job? The ``fence-N`` names it owns, in one round trip.

        An attempt owns its fence's staging folder and spec while it holds the job's lease
        (it may be computing) or while its intent is recorded (it died mid-flight and its
        successor may adopt its output): cleanup must leave those alone.
        """
        with redis_errors(f"read the lease and intent of job {job_id!r}", self.namespace, job_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(self.keys.lease(job_id), ["token", "nonce"])
            pipe.get(self.keys.intent(job_id))
            (token, nonce), raw = pipe.execute()
        live = {fence_name(Fence(int(as_str(token)), as_str(nonce) if nonce else None))} if token is not None else set()
        intent = self._parse(job_id, raw)
        if intent is not None:
            live.add(fence_name(intent.fence))
        return live

    def amend(self, intent: Intent) -> bool:
        """Replace the recorded intent by ``intent`` (fenced); False when there is none any more."""
        with redis_errors(f"amend the intent of job {intent.job_id!r}", self.namespace, intent.job_id):
            code = self._amend(
                keys=[self.keys.lease(intent.job_id), self.keys.intent(intent.job_id)],
                args=[fence_arg(intent.fence), intent.to_json()],
            )
        if code == lua.STALE_FENCE:
            raise LeaseLostError(
                f"job {intent.job_id!r}: fencing token {intent.fence} no longer holds the lease; "
                "its intent is left to the holder",
                job_id=intent.job_id,
                fence=intent.fence,
            )
        return bool(code == lua.OK)

    def clear(self, job_id: str, fence: int) -> None:
        """Drop the intent of an attempt that ends without a result (fenced)."""
        with redis_errors(f"clear the intent of job {job_id!r}", self.namespace, job_id):
            code = self._clear(keys=[self.keys.lease(job_id), self.keys.intent(job_id)], args=[fence_arg(fence)])
        if code == lua.STALE_FENCE:
            raise LeaseLostError(
                f"job {job_id!r}: fencing token {fence} no longer holds the lease; intent left to the holder",
                job_id=job_id,
                fence=fence,
            )

    @staticmethod
    def read_spec(spec_uri: str) -> dict[str, Any]:
        fs, path = fsspec.core.url_to_fs(spec_uri)
        with fs.open(path, "r") as fh:
            return dict(json.load(fh))

    @staticmethod
    def delete_spec(spec_uri: str) -> None:
        fs, path = fsspec.core.url_to_fs(spec_uri)
        if fs.exists(path):
            fs.rm(path)


# -- the heartbeat of a running submission ------------------------------------------------------
#
# The intent says a job may need recovery; the heartbeat says whether the submission it refers
# to is still alive, wherever it runs.
#
# An attempt's task process can die (SIGKILL, a lost Celery worker) while its spark-submit
# lives on, on *that* host. A successor on another host cannot see that process; it can see
# this heartbeat, which the supervisor beside spark-submit (:mod:`airflow_jrs.launch.supervisor`)
# keeps in Redis while spark-submit lives::
#
#     jrs:{ns}:heartbeat:<job id>  hash {fence, host, pid, child, state=running|ended, exit_code, stop}
#
# with a TTL the supervisor renews every ``ttl/3``. A successor acts on it, not on a process
# list: it waits while the heartbeat is ``running`` (or asks for a stop), and proceeds once it
# is ``ended`` or gone. A supervisor that cannot renew for most of the TTL kills its
# spark-submit itself before the key can expire (self-fencing), so "the heartbeat expired"
# means "nothing of that attempt runs any more", across hosts and without comparing clocks
# (the TTL runs on the Redis server). Like the lease, a heartbeat belongs to one fence: an
# older supervisor that comes back after a successor's took over is refused and stops.

_FIELDS = ("fence", "host", "pid", "child", "state", "exit_code", "stop")
#: How long an ended heartbeat keeps its answer (exit code) for a successor to read.
ENDED_KEEP_MS = 3_600_000
#: The exit code an ended heartbeat reports when spark-submit was never started (the
#: supervisor's ``LOST_BEFORE_START``, :mod:`airflow_jrs.launch.supervisor`).
NOT_STARTED_EXIT_CODE = 70


@dataclass(frozen=True)
class Heartbeat:
    """What the supervisor of fence ``fence`` last said."""

    fence: int
    host: str
    pid: int
    child: int | None
    state: str
    exit_code: int | None
    stop_requested: bool
    ttl_ms: int

    @property
    def running(self) -> bool:
        return self.state == "running"


class Heartbeats:
    """Heartbeats of one namespace's running submissions."""

    def __init__(self, client: redis_lib.Redis, namespace: str, *, durable: DurableWrites | None = None) -> None:
        self.client = client
        self.namespace = namespace
        self.keys = KeySpace(namespace)
        #: ``durability`` for the first beat (``None``: acknowledged in memory)
        self.durable = durable
        self._beat = client.register_script(scripts.BEAT)
        self._end = client.register_script(scripts.END_HEARTBEAT)

    def beat(
        self, job_id: str, fence: int, ttl_ms: int, *, host: str, pid: int, child: int, first: bool = False
    ) -> str | None:
        """Renew; returns the request in force for ``fence`` (``"stop"``, ``"cancel"``) or ``None``.

        Raises :class:`StaleHeartbeat` when a newer fence owns the job's heartbeat (this
        supervisor's attempt lost the job), or, on the ``first`` beat (before spark-submit
        starts), when the fence no longer holds the lease; :class:`HeartbeatGone` when a later
        beat finds its heartbeat gone (it expired early: a successor may run). Only the first
        beat creates the heartbeat. With ``durability`` set the first beat returns only once the
        replicas (or the disk) have it: spark-submit starts after it, and a successor after a
        failover must see it running."""
        keys = [self.keys.heartbeat(job_id), self.keys.lease(job_id), self.keys.control(job_id)]
        with redis_errors(f"renew the heartbeat of job {job_id!r}", self.namespace, job_id):
            args: list[str | int] = [fence_arg(fence), ttl_ms, host, pid, child, "1" if first else "0"]
            if self.durable is None or not first:
                code, request = self._beat(keys=keys, args=args)
            else:
                code, request = self.durable.run(
                    self.client, self._beat, keys=keys, args=args, written=lambda reply: int(reply[0]) == lua.OK,
                    what=f"the first heartbeat of job {job_id!r}", namespace=self.namespace, job_id=job_id,
                    then="spark-submit was not started (the heartbeat now says so); the task's retry starts it once "
                    "the store is healthy",
                    undo=lambda _reply: self._end(
                        keys=[keys[0]], args=[fence_arg(fence), NOT_STARTED_EXIT_CODE, ENDED_KEEP_MS]
                    ),
                )  # fmt: skip
        if int(code) == lua.STALE_FENCE:
            raise StaleHeartbeat(job_id, fence)
        if int(code) == lua.HEARTBEAT_GONE:
            raise HeartbeatGone(job_id, fence)
        return as_str(request) or None

    def end(self, job_id: str, fence: int, exit_code: int) -> bool:
        """Record how spark-submit ended; ``False`` when another fence owns the heartbeat."""
        with redis_errors(f"record the end of job {job_id!r}'s submission", self.namespace, job_id):
            args: list[str | int] = [fence_arg(fence), exit_code, ENDED_KEEP_MS]
            return bool(self._end(keys=[self.keys.heartbeat(job_id)], args=args))

    def get(self, job_id: str) -> Heartbeat | None:
        """The job's heartbeat, or ``None`` (never started, or expired: nothing runs)."""
        key = self.keys.heartbeat(job_id)
        with redis_errors(f"read the heartbeat of job {job_id!r}", self.namespace, job_id):
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(key, _FIELDS)  # HMGET, not HGETALL: the documented ACL rule grants it
            pipe.pttl(key)
            values, ttl_ms = pipe.execute()
        doc: dict[str, Any] = {f: as_str(v) for f, v in zip(_FIELDS, values, strict=True) if v is not None}
        if not doc:
            return None
        return Heartbeat(
            fence=Fence.parse(doc.get("fence", "0")),
            host=doc.get("host", "?"),
            pid=int(doc.get("pid", 0)),
            child=int(doc["child"]) if doc.get("child") else None,
            state=doc.get("state", "running"),
            exit_code=int(doc["exit_code"]) if doc.get("exit_code") not in (None, "") else None,
            stop_requested=bool(doc.get("stop")),
            ttl_ms=int(ttl_ms),
        )
