"""Every ``[jrs]`` setting in one table, and the one function that resolves them.

A setting is declared once, in :data:`SETTINGS` (name, type, default, doc). From that table come
the ``[jrs]`` section Airflow shows (:func:`airflow_jrs.get_provider_info.get_provider_info`,
and with it the generated configuration reference), the defaults of :class:`JrsSettings`, and
:func:`resolve`, the single precedence rule every caller uses::

    operator argument  >  connection extra  >  [jrs] config  >  default

The hook (workers, the UI, the CLI with ``--conn-id``), the CLI with ``--redis-url``, the
supervisor beside spark-submit and the triggers all call :func:`resolve`; none keeps defaults
of its own. Adding a setting is one row here and one field on :class:`JrsSettings` (a test
keeps the two equal). Invalid values raise :class:`JrsConfigError` naming the setting and the
places to fix it: nothing silently falls back to a default.

No Airflow imports here: Airflow reads the table while it loads its own configuration, and the
Airflow-free protocol (and a PySpark driver) resolves settings without Airflow.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from airflow_jrs.domain.model import validate_namespace
from airflow_jrs.exceptions import InvalidJobIdError, JrsConfigError

DEFAULT_CONN_ID = "jrs_default"
#: Seconds a lease lives without renewal, unless ``[jrs] lease_ttl`` says otherwise.
DEFAULT_LEASE_TTL = 60.0
#: Values of ``on_store_unavailable``.
ON_STORE_UNAVAILABLE = ("fail", "run")


@dataclass(frozen=True)
class Setting:
    """One ``[jrs]`` option.

    :param kind: Airflow's config type (``string``, ``float``, ``integer``, ``boolean``).
    :param default: the typed default (``None`` only where empty means "not set").
    :param minimum: the smallest integer accepted (floats must be positive).
    :param choices: the accepted values of a string option, if it has a fixed set.
    """

    name: str
    kind: str
    default: Any
    doc: str
    minimum: int = 1
    choices: tuple[str, ...] = ()

    @property
    def env(self) -> str:
        return f"AIRFLOW__JRS__{self.name.upper()}"

    @property
    def config_default(self) -> str:
        """The default as Airflow's config writes it (empty for "not set")."""
        return "" if self.default is None else str(self.default)


SETTINGS: tuple[Setting, ...] = (
    Setting("conn_id", "string", DEFAULT_CONN_ID, "Connection id of the job result store (a Redis URL)."),
    Setting(
        "namespace",
        "string",
        "default",
        "Namespace of the store; one per Airflow deployment or environment. Entries of two "
        "namespaces never see each other. The connection extra `namespace` overrides it.",
    ),
    Setting(
        "lease_ttl",
        "float",
        DEFAULT_LEASE_TTL,
        "Seconds a job's lease lives without renewal; holders renew every ttl/3. A killed "
        "worker's job can be taken over after this long.",
    ),
    Setting(
        "clean_ttl",
        "float",
        None,
        "Seconds to keep clean results; empty keeps them forever (the default: they are what "
        "lets backfills skip finished jobs).",
    ),
    Setting(
        "delete_on_commit",
        "boolean",
        False,
        "Delete results when marked clean, as Flink does. Then a re-run recomputes: leave off.",
    ),
    Setting("history_limit", "integer", 20, "Superseded or forgotten entries kept per job."),
    Setting(
        "index_limit",
        "integer",
        10_000,
        "Most recent creations the store's index keeps for listings (`airflow-jrs list`, the UI); "
        "older entries stay readable by job id. 0 keeps every job in the index (~148 B per job).",
        minimum=0,
    ),
    Setting(
        "durability",
        "string",
        "none",
        "When a result write (dirty or clean) counts as done: `none` (in Redis's memory), `aof` "
        "(fsynced to the append-only file: WAITAOF, Redis 7.2+) or `replicas:N` (received by N "
        "replicas: WAIT). See docs/store-lifecycle.md.",
    ),
    Setting(
        "durability_timeout",
        "float",
        3.0,
        "Seconds a write waits for the acknowledgement `durability` asks for before the task fails; "
        "keep it at least 1 s below `read_timeout`.",
    ),
    Setting(
        "result_documents",
        "string",
        "",
        "Where the full results of clean jobs live (a folder path or file:// URL), so that Redis keeps "
        "a ~40-B reference per clean job instead of its JSON (about 190 B of memory per job instead "
        "of 470 B). Empty (the default) keeps full results in Redis. Every host that reads results "
        "(workers, the UI, the CLI) must reach it; it must exist (it is never created, so that a failed "
        "mount fails the cleanup). Upgrade every host before setting it. See docs/operations/sizing.md.",
    ),
    Setting(
        "output_root",
        "string",
        "",
        "Where Spark jobs write their outputs (local path or fsspec URL); empty means $AIRFLOW_HOME/jrs/output.",
    ),
    Setting(
        "spec_root",
        "string",
        "",
        "State backend for submission specs (local path or fsspec URL); empty means $AIRFLOW_HOME/jrs/specs.",
    ),
    # -- when Redis is down or slow (docs/operations-store-errors.md) ----------------------------
    Setting(
        "connect_timeout",
        "float",
        5.0,
        "Seconds to wait for a connection to Redis before the attempt counts as failed.",
    ),
    Setting(
        "read_timeout",
        "float",
        10.0,
        "Seconds to wait for Redis to answer one command (a paused or overloaded server). Keep it "
        "below lease_ttl: a lease renewal that waits longer than the lease lives is useless.",
    ),
    Setting(
        "retries",
        "integer",
        3,
        "Times a command is retried after a lost connection or a timeout, with exponential backoff; "
        "0 disables. Then the task fails and Airflow's own retries take over.",
        minimum=0,
    ),
    Setting("retry_backoff", "float", 0.2, "Seconds before the first retry; doubles on each retry."),
    Setting("retry_backoff_max", "float", 2.0, "Longest pause between two retries, in seconds."),
    Setting(
        "on_store_unavailable",
        "string",
        "fail",
        "What a submit task does when it cannot read the store or take the job's lease: `fail` "
        "(the default: fail closed, Airflow retries) or `run` (run Spark without the store's "
        "guarantee, log it loudly and record nothing; the job may then run twice).",
        choices=ON_STORE_UNAVAILABLE,
    ),
    # -- Spark Connect (docs/how-to/spark-connect.md) ----------------------------------------------
    Setting(
        "connect_unseen_tasks_wait",
        "float",
        120.0,
        "Seconds a retry of a Spark Connect job waits for Spark tasks of the failed attempt's cancelled "
        "work that the server's UI cannot show (spark.ui.enabled=false, a UI the worker cannot reach), "
        "once the server reports that attempt's session gone; then it goes ahead, saying so in its log. "
        "The default is the bound a retry waits for tasks the UI does show.",
    ),
)
#: The table by name.
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def _default(name: str) -> Any:
    return BY_NAME[name].default


@dataclass(frozen=True)
class JrsSettings:
    """Resolved ``[jrs]`` settings: what :func:`resolve` returns (one field per row of
    :data:`SETTINGS`, the defaults taken from it)."""

    conn_id: str = _default("conn_id")
    namespace: str = _default("namespace")
    lease_ttl: float = _default("lease_ttl")
    clean_ttl: float | None = _default("clean_ttl")
    delete_on_commit: bool = _default("delete_on_commit")
    history_limit: int = _default("history_limit")
    output_root: str = _default("output_root")
    spec_root: str = _default("spec_root")
    # When Redis is down or slow: see airflow_jrs.hooks.store_failures.
    connect_timeout: float = _default("connect_timeout")
    read_timeout: float = _default("read_timeout")
    retries: int = _default("retries")
    retry_backoff: float = _default("retry_backoff")
    retry_backoff_max: float = _default("retry_backoff_max")
    on_store_unavailable: str = _default("on_store_unavailable")
    # The store's size and durability: see docs/store-lifecycle.md.
    index_limit: int = _default("index_limit")
    durability: str = _default("durability")
    durability_timeout: float = _default("durability_timeout")
    # Full results of clean jobs outside Redis (docs/operations/sizing.md); "" keeps them in Redis.
    result_documents: str = _default("result_documents")
    # Spark Connect: how long a retry waits for a gone session's unseen tasks (launch/connect_tasks.py).
    connect_unseen_tasks_wait: float = _default("connect_unseen_tasks_wait")


def durability_parts(value: str | None) -> tuple[str, int]:
    """``(mode, replicas)`` of a ``durability`` value: the one grammar of the setting
    (:class:`airflow_jrs.store.redis.durability.Durability` is built from it)."""
    text = (value or "none").strip().lower()
    if text in ("none", "aof"):
        return text, 0
    count = text.removeprefix("replicas:")
    if text.startswith("replicas:") and count.isdigit() and int(count) >= 1:
        return "replicas", int(count)
    raise JrsConfigError(
        f"durability {value!r} is not one of 'none', 'aof' or 'replicas:N' (N >= 1, e.g. 'replicas:1')"
    )


def parse_boolean(raw: Any) -> bool:
    """A boolean from a value or its text (``ValueError`` otherwise): ``"false"`` is false, where
    ``bool("false")`` would be true."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def _coerce(setting: Setting, raw: Any) -> Any:
    """``raw`` as a value of the setting's type; ``ValueError``/``TypeError`` says what is wrong."""
    if setting.default is None and (raw is None or str(raw).strip() == ""):
        return None
    if setting.kind == "float":
        number = float(raw)
        if not number > 0:
            raise ValueError("must be positive")
        return number
    if setting.kind == "integer":
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError("must be a whole number")
        count = int(raw)
        if count < setting.minimum:
            raise ValueError(f"must be at least {setting.minimum}")
        return count
    if setting.kind == "boolean":
        return parse_boolean(raw)
    value = str(raw)
    if setting.choices and value not in setting.choices:
        raise ValueError(f"use one of {list(setting.choices)}")
    if setting.name == "durability":
        mode, replicas = durability_parts(value)
        return f"replicas:{replicas}" if mode == "replicas" else mode
    return value


def resolve(
    *,
    conn_id: str = "url",
    arguments: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    section: Callable[[str], Any] | Mapping[str, Any] | None = None,
    home: str | None = None,
) -> JrsSettings:
    """The settings, by the one precedence rule: ``arguments`` > ``extra`` > ``section`` > default.

    :param conn_id: the connection the settings belong to (``url`` for a bare Redis URL).
    :param arguments: explicit values (an operator's or the CLI's); ``None`` values count as unset.
    :param extra: the jrs connection's extra (only names of :data:`SETTINGS` are read).
    :param section: the ``[jrs]`` config, as a mapping or a lookup returning ``None`` when unset
        (the hook passes Airflow's ``conf``; code without Airflow passes nothing).
    :param home: ``AIRFLOW_HOME``: when given, empty ``output_root``/``spec_root`` become
        ``<home>/jrs/output`` and ``<home>/jrs/specs``; without it they stay empty.
    :raises JrsConfigError: an unknown argument, or a value of the wrong type or out of range,
        named with the places to fix it.
    """
    given = {k: v for k, v in (arguments or {}).items() if v is not None}
    unknown = set(given) - set(BY_NAME)
    if unknown:
        raise JrsConfigError(f"unknown jrs settings {sorted(unknown)}; known: {sorted(BY_NAME)}")
    extra = extra or {}
    lookup: Callable[[str], Any]
    if section is None:
        lookup = lambda _name: None  # noqa: E731
    elif callable(section):
        lookup = section
    else:
        lookup = section.get
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        name = setting.name
        if name in given:
            raw, where = given[name], "the argument"
        elif name in extra:
            raw, where = extra[name], "the connection extra"
        else:
            raw, where = lookup(name), f"[jrs] {name}"
            if raw is None:
                values[name] = setting.default
                continue
        try:
            values[name] = _coerce(setting, raw)
        except (TypeError, ValueError) as exc:
            raise JrsConfigError(
                f"jrs setting {name!r} has invalid value {raw!r} ({exc}), from {where}; fix it in the operator "
                f"argument, the connection extra, or [jrs] {name} ({setting.env})."
            ) from None
        except JrsConfigError as exc:
            raise JrsConfigError(f"jrs setting {name!r} ({setting.env} or extra), from {where}: {exc}") from None
    try:
        validate_namespace(values["namespace"])
    except InvalidJobIdError as exc:
        raise JrsConfigError(str(exc)) from None
    values["conn_id"] = conn_id if "conn_id" not in given else values["conn_id"]
    if home is not None:
        values["output_root"] = values["output_root"] or os.path.join(home, "jrs", "output")
        values["spec_root"] = values["spec_root"] or os.path.join(home, "jrs", "specs")
    return JrsSettings(**values)


def environment(name: str) -> str | None:
    """The ``[jrs]`` section as the environment sets it (``AIRFLOW__JRS__<NAME>``), for code that
    reads settings without Airflow's config (the CLI given ``--redis-url``): a :func:`resolve`
    ``section``."""
    return os.environ.get(BY_NAME[name].env)


def field_names() -> list[str]:
    """The fields of :class:`JrsSettings` (a test keeps them equal to the table's names)."""
    return [f.name for f in fields(JrsSettings)]


def settings_for(namespace: str, *, output_root: str, spec_root: str, **overrides: Any) -> JrsSettings:
    """Settings for code that runs without Airflow's config: the table's defaults, then these
    values (:func:`airflow_jrs.settings.resolve` with arguments only)."""
    return resolve(arguments={"namespace": namespace, "output_root": output_root, "spec_root": spec_root, **overrides})
