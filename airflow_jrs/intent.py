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
import time
from dataclasses import asdict, dataclass, fields
from typing import Any

import fsspec
import redis as redis_lib

from airflow_jrs.exceptions import LeaseLostError
from airflow_jrs.store import scripts
from airflow_jrs.store.keys import KeySpace
from airflow_jrs.store.model import validate_job_id
from airflow_jrs.store.redis import redis_errors

INTENT_VERSION = 1


@dataclass(frozen=True)
class Intent:
    """The running-job reference kept in Redis (small: the spec itself lives in the backend)."""

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

    def to_json(self) -> str:
        return json.dumps({"v": INTENT_VERSION, **asdict(self)}, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | str) -> Intent:
        doc = json.loads(raw)
        if doc.pop("v", None) != INTENT_VERSION:
            raise ValueError(f"unsupported intent version in {raw!r}")
        # Fields are only ever added, optional and informational within a version: a worker
        # that does not know one yet (a rolling upgrade) still recovers from the intent.
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in known})


class IntentStore:
    """Writes specs to ``spec_root`` and intents to Redis, under the job's fence."""

    def __init__(self, client: redis_lib.Redis, namespace: str, spec_root: str) -> None:
        self.client = client
        self.namespace = namespace
        self.keys = KeySpace(namespace)
        self.spec_root = spec_root.rstrip("/")
        self._record = client.register_script(scripts.RECORD_INTENT)
        self._clear = client.register_script(scripts.CLEAR_INTENT)
        self._amend = client.register_script(scripts.AMEND_INTENT)

    def spec_uri(self, job_id: str, fence: int) -> str:
        return f"{self.spec_root}/{self.namespace}/{validate_job_id(job_id).replace('/', '_')}/fence-{fence}.json"

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
        with redis_errors(f"record the intent of job {intent.job_id!r}", self.namespace):
            code = self._record(
                keys=[self.keys.lease(intent.job_id), self.keys.intent(intent.job_id)],
                args=[intent.fence, intent.to_json()],
            )
        if code == scripts.STALE_FENCE:
            raise LeaseLostError(
                f"job {intent.job_id!r}: fencing token {intent.fence} lost the lease before "
                "its intent was recorded; not submitting Spark.",
                job_id=intent.job_id,
                fence=intent.fence,
            )

    def get(self, job_id: str) -> Intent | None:
        with redis_errors(f"read the intent of job {job_id!r}", self.namespace):
            raw = self.client.get(self.keys.intent(job_id))
        if raw is None:
            return None
        try:
            return Intent.from_json(raw)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"intent {self.keys.intent(job_id)!r} is unreadable ({exc}); inspect and delete it "
                "by hand once no attempt of the job runs"
            ) from None

    def amend(self, intent: Intent) -> bool:
        """Replace the recorded intent by ``intent`` (fenced); False when there is none any more."""
        with redis_errors(f"amend the intent of job {intent.job_id!r}", self.namespace):
            code = self._amend(
                keys=[self.keys.lease(intent.job_id), self.keys.intent(intent.job_id)],
                args=[intent.fence, intent.to_json()],
            )
        if code == scripts.STALE_FENCE:
            raise LeaseLostError(
                f"job {intent.job_id!r}: fencing token {intent.fence} no longer holds the lease; "
                "its intent is left to the holder",
                job_id=intent.job_id,
                fence=intent.fence,
            )
        return bool(code == 1)

    def clear(self, job_id: str, fence: int) -> None:
        """Drop the intent of an attempt that ends without a result (fenced)."""
        with redis_errors(f"clear the intent of job {job_id!r}", self.namespace):
            code = self._clear(keys=[self.keys.lease(job_id), self.keys.intent(job_id)], args=[fence])
        if code == scripts.STALE_FENCE:
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


def now() -> float:
    return time.time()
