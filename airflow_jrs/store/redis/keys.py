"""The only place where Redis key strings are built.

Every key carries its namespace as a Redis Cluster hash tag (``jrs:{<namespace>}:...``), so
all keys of a namespace, its jobs and its indexes alike, hash to one slot and one Lua
script may update them together. Tests pin these literals: change them only with a migration.

========================================  =====================================================
``jrs:{ns}:result:<job id>``              string: the entry (versioned JSON, see ``serde``), or a clean
                                          reference that expires (``clean_ttl``)
``jrs:{ns}:refs:<bucket>``                hash: job id -> clean reference (``result_documents``, no
                                          ``clean_ttl``), bucket ``crc32(job id) % 1024``
``jrs:{ns}:dirty``                        set: job ids whose SUCCEEDED entry is dirty (cleanup pending)
``jrs:{ns}:unsuccessful``                 set: job ids whose entry is FAILED, CANCELED or STOPPED
``jrs:{ns}:index``                        sorted set: job ids by creation time (ms), the most recent
                                          ``index_limit`` creations only (a create trims older ones)
``jrs:{ns}:history:<job id>``             list: earlier entries of the job, newest first
``jrs:{ns}:quarantine:<job id>``          string: raw bytes of a corrupt entry
``jrs:{ns}:quarantined``                  set: job ids in quarantine
``jrs:{ns}:lease:<job id>``               hash: holder of the job's lease (token, owner), with a TTL
``jrs:{ns}:fence``                        counter: last fencing token handed out in the namespace
``jrs:{ns}:intent:<job id>``              string: reference to the running job's spec (JSON)
``jrs:{ns}:heartbeat:<job id>``           hash: the supervisor beside spark-submit (fence, host, state), TTL
``jrs:{ns}:recompute:<job id>``           hash: request key (a DAG run) -> its first meeting with the job
                                          (fence counter, lease in flight, time; JSON), TTL (see ``requests``)
``jrs:{ns}:control:<job id>``             hash: the stop or cancel request for one fence (kind, by, at_ms,
                                          reason), TTL; the supervisor of that fence acts on it
``jrs:{ns}:recoveries:<job id>``          list: what successors did about dead attempts of the job (JSON,
                                          newest first, capped, TTL; see ``recoveries``)
``jrs:{ns}:events``                       pub/sub channel: one message per write of an entry (create,
                                          clean, forget, purge, quarantine, release)
========================================  =====================================================
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from airflow_jrs.domain.model import validate_job_id, validate_namespace

PREFIX = "jrs"
#: Hashes that keep the namespace's clean references (``refs:<n>``). A job's bucket is
#: ``crc32(job id) % REFERENCE_BUCKETS``: changing this number moves every job to another
#: bucket, so it changes only with a migration (the key layout's tests pin it). 1,024
#: buckets keep up to about 500,000 jobs in Redis's compact encoding (``listpack``, 512 fields
#: a hash by default); past that a bucket is a hash table, still smaller than a key per job
#: (docs/operations/sizing.md).
REFERENCE_BUCKETS = 1024


@dataclass(frozen=True)
class KeySpace:
    """Key names of one namespace."""

    namespace: str

    def __post_init__(self) -> None:
        validate_namespace(self.namespace)

    @property
    def base(self) -> str:
        return f"{PREFIX}:{{{self.namespace}}}"

    def _job(self, kind: str, job_id: str) -> str:
        return f"{self.base}:{kind}:{validate_job_id(job_id)}"

    def result(self, job_id: str) -> str:
        return self._job("result", job_id)

    def reference_bucket(self, job_id: str) -> str:
        """The hash that keeps the job's clean reference when it does not expire: a hash field
        costs about 90 B where a key of its own costs about 170 B (docs/operations/sizing.md)."""
        bucket = zlib.crc32(validate_job_id(job_id).encode()) % REFERENCE_BUCKETS
        return f"{self.base}:refs:{bucket}"

    def reference_buckets(self) -> list[str]:
        """Every bucket of the namespace, for the maintenance that walks all references (purge)."""
        return [f"{self.base}:refs:{n}" for n in range(REFERENCE_BUCKETS)]

    def history(self, job_id: str) -> str:
        return self._job("history", job_id)

    def quarantine(self, job_id: str) -> str:
        return self._job("quarantine", job_id)

    def lease(self, job_id: str) -> str:
        return self._job("lease", job_id)

    @property
    def fence_counter(self) -> str:
        return f"{self.base}:fence"

    def intent(self, job_id: str) -> str:
        return self._job("intent", job_id)

    def heartbeat(self, job_id: str) -> str:
        return self._job("heartbeat", job_id)

    def recompute_requests(self, job_id: str) -> str:
        return self._job("recompute", job_id)

    def control(self, job_id: str) -> str:
        return self._job("control", job_id)

    def recoveries(self, job_id: str) -> str:
        return self._job("recoveries", job_id)

    def job_pattern(self, kind: str) -> str:
        """SCAN pattern matching every ``kind`` key of the namespace (``lease``, ``intent``, ...):
        for listings that have no index of their own. Namespaces hold no glob characters."""
        return f"{self.base}:{kind}:*"

    def job_id_of(self, kind: str, key: bytes | str) -> str:
        """The job id in a ``kind`` key that :meth:`job_pattern` matched."""
        text = key.decode() if isinstance(key, bytes) else key
        return text.removeprefix(f"{self.base}:{kind}:")

    @property
    def dirty(self) -> str:
        return f"{self.base}:dirty"

    @property
    def unsuccessful(self) -> str:
        return f"{self.base}:unsuccessful"

    @property
    def index(self) -> str:
        return f"{self.base}:index"

    @property
    def quarantined(self) -> str:
        return f"{self.base}:quarantined"

    @property
    def events(self) -> str:
        return f"{self.base}:events"
