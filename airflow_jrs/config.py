"""The ``[jrs]`` config section: one table, read by get_provider_info and by JrsHook.

No Airflow imports here: Airflow calls get_provider_info while it loads its own config.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CONN_ID = "jrs_default"
#: Seconds a lease lives without renewal, unless ``[jrs] lease_ttl`` says otherwise.
DEFAULT_LEASE_TTL = 60.0

#: name -> (type, default, description); the single source for get_provider_info's [jrs] section.
CONFIG_OPTIONS: dict[str, tuple[str, str, str]] = {
    "conn_id": ("string", DEFAULT_CONN_ID, "Connection id of the job result store (a Redis URL)."),
    "namespace": (
        "string",
        "default",
        "Namespace of the store; one per Airflow deployment or environment. Entries of two "
        "namespaces never see each other. The connection extra `namespace` overrides it.",
    ),
    "lease_ttl": (
        "float",
        str(DEFAULT_LEASE_TTL),
        "Seconds a job's lease lives without renewal; holders renew every ttl/3. A killed "
        "worker's job can be taken over after this long.",
    ),
    "clean_ttl": (
        "float",
        "",
        "Seconds to keep clean results; empty keeps them forever (the default: they are what "
        "lets backfills skip finished jobs).",
    ),
    "delete_on_commit": (
        "boolean",
        "False",
        "Delete results when marked clean, as Flink does. Then a re-run recomputes: leave off.",
    ),
    "history_limit": ("integer", "20", "Superseded or forgotten entries kept per job."),
    "index_limit": (
        "integer",
        "10000",
        "Most recent creations the store's index keeps for listings (`airflow-jrs list`, the UI); "
        "older entries stay readable by job id. 0 keeps every job in the index (~148 B per job).",
    ),
    "durability": (
        "string",
        "none",
        "When a result write (dirty or clean) counts as done: `none` (in Redis's memory), `aof` "
        "(fsynced to the append-only file: WAITAOF, Redis 7.2+) or `replicas:N` (received by N "
        "replicas: WAIT). See docs/store-lifecycle.md.",
    ),
    "durability_timeout": (
        "float",
        "3",
        "Seconds a write waits for the acknowledgement `durability` asks for before the task fails; "
        "keep it at least 1 s below `read_timeout`.",
    ),
    "result_documents": (
        "string",
        "",
        "Where the full results of clean jobs live (a folder path or file:// URL), so that Redis keeps "
        "a ~40-B reference per clean job instead of its JSON (about 190 B of memory per job instead "
        "of 470 B). Empty (the default) keeps full results in Redis. Every host that reads results "
        "(workers, the UI, the CLI) must reach it; it must exist (it is never created, so that a failed "
        "mount fails the cleanup). Upgrade every host before setting it. See docs/operations/sizing.md.",
    ),
    "output_root": (
        "string",
        "",
        "Where Spark jobs write their outputs (local path or fsspec URL); empty means $AIRFLOW_HOME/jrs/output.",
    ),
    "spec_root": (
        "string",
        "",
        "State backend for submission specs (local path or fsspec URL); empty means $AIRFLOW_HOME/jrs/specs.",
    ),
    # -- when Redis is down or slow (docs/operations-store-errors.md) ----------------------------
    "connect_timeout": ("float", "5", "Seconds to wait for a connection to Redis before the attempt counts as failed."),
    "read_timeout": (
        "float",
        "10",
        "Seconds to wait for Redis to answer one command (a paused or overloaded server). Keep it "
        "below lease_ttl: a lease renewal that waits longer than the lease lives is useless.",
    ),
    "retries": (
        "integer",
        "3",
        "Times a command is retried after a lost connection or a timeout, with exponential backoff; "
        "0 disables. Then the task fails and Airflow's own retries take over.",
    ),
    "retry_backoff": ("float", "0.2", "Seconds before the first retry; doubles on each retry."),
    "retry_backoff_max": ("float", "2", "Longest pause between two retries, in seconds."),
    "on_store_unavailable": (
        "string",
        "fail",
        "What a submit task does when it cannot read the store or take the job's lease: `fail` "
        "(the default: fail closed, Airflow retries) or `run` (run Spark without the store's "
        "guarantee, log it loudly and record nothing; the job may then run twice).",
    ),
}
#: Values of ``on_store_unavailable``.
ON_STORE_UNAVAILABLE = ("fail", "run")
#: Options whose value may be 0 although they are integers (Airflow's config has no such type).
ZERO_ALLOWED = ("retries", "index_limit")


@dataclass(frozen=True)
class JrsSettings:
    """Resolved ``[jrs]`` settings (built once per hook, or by hand for the Airflow-free protocol:
    :class:`airflow_jrs.protocol.JobNamespace`)."""

    conn_id: str
    namespace: str
    lease_ttl: float
    clean_ttl: float | None
    delete_on_commit: bool
    history_limit: int
    output_root: str
    spec_root: str
    # When Redis is down or slow: see airflow_jrs.hooks.store_failures.
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    retries: int = 3
    retry_backoff: float = 0.2
    retry_backoff_max: float = 2.0
    on_store_unavailable: str = "fail"
    # The store's size and durability: see docs/store-lifecycle.md.
    index_limit: int = 10_000
    durability: str = "none"
    durability_timeout: float = 3.0
    # Full results of clean jobs outside Redis (docs/operations/sizing.md); "" keeps them in Redis.
    result_documents: str = ""
