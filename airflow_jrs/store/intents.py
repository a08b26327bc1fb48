"""The intent contract: what a job in flight leaves for its successor, on any backend.

Intent before side effect (FLINK-2354): the spec goes to a state backend, a reference to Redis.

Before an attempt submits Spark it writes the full submission spec (application, rendered
arguments, conf, fingerprint) to the state backend (a local folder or any fsspec URL), then
records a small *intent* in Redis under its fence: which spec, which attempt (host, pid),
which staging folder, which Spark application name. The intent exists exactly while the job
may need recovery: the script that writes the job's result deletes it in the same step.

A later attempt that takes over the job's lease and finds an intent knows an earlier attempt
died mid-flight, and where to look: its staging folder (a commit marker there means the
application finished) and its spark-submit process (found by the deterministic app name).

Whether that spark-submit still runs, wherever it runs, is its heartbeat's to say
(:mod:`.heartbeats`).
"""

from __future__ import annotations

import abc
import json
from dataclasses import asdict, dataclass, fields
from typing import Any

import fsspec

from airflow_jrs.domain.paths import spec_path
from airflow_jrs.exceptions import CorruptIntentError
from airflow_jrs.store.leases.fence import Fence, nonce_of

INTENT_VERSION = 1


@dataclass(frozen=True)
class Intent:
    """The running-job reference kept in Redis (small: the spec itself lives in the backend).

    ``fence`` is the attempt's :class:`~airflow_jrs.store.leases.fence.Fence`: stored as the integer
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


class IntentStore(abc.ABC):
    """Writes specs to ``spec_root`` and intents to Redis, under the job's fence.

    The contract: the spec goes to ``spec_root`` here, the reference is the backend's (on Redis
    :class:`airflow_jrs.store.redis.intents.RedisIntentStore`), always under the job's fence."""

    namespace: str
    #: where specs are written (a local folder or any fsspec URL), without a trailing slash
    spec_root: str

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

    @abc.abstractmethod
    def update(self, intent: Intent) -> None:
        """Record ``intent`` (fenced). With ``durability`` set it returns only once the replicas (or
        the disk) have it: Spark is submitted after this, and a successor that took the lease
        after a failover must find what it has to recover."""

    @abc.abstractmethod
    def get(self, job_id: str) -> Intent | None:
        """The job's intent, or ``None``; raises :class:`CorruptIntentError` when unreadable."""

    @abc.abstractmethod
    def list_intents(self) -> dict[str, Intent | CorruptIntentError]:
        """Every recorded intent of the namespace, by job id: the jobs that may need recovery.

        Intents have no index (one exists only while a job is in flight), so this SCANs, never
        KEYS. An unreadable intent is returned as its :class:`CorruptIntentError` rather than
        raised: one bad reference must not hide the others from the on-call engineer."""

    @abc.abstractmethod
    def live_fences(self, job_id: str) -> set[str]:
        """Is a live attempt working on this job? The ``fence-N`` names it owns, in one round trip.

        An attempt owns its fence's staging folder and spec while it holds the job's lease
        (it may be computing) or while its intent is recorded (it died mid-flight and its
        successor may adopt its output): cleanup must leave those alone.
        """

    @abc.abstractmethod
    def amend(self, intent: Intent) -> bool:
        """Replace the recorded intent by ``intent`` (fenced); False when there is none any more."""

    @abc.abstractmethod
    def clear(self, job_id: str, fence: int) -> None:
        """Drop the intent of an attempt that ends without a result (fenced)."""
