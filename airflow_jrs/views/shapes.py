"""The JSON shape of one job as TypedDicts: the one definition Python and the page's TypeScript share.

:mod:`airflow_jrs.views.json` builds these documents (mypy checks its members against these
classes), and the page's types are generated from them: ``scripts/ui_shapes.py`` writes
``ui/src/shapes.gen.ts`` (committed; ``scripts/build_ui --check`` and the shapes' test fail when
it differs from what these classes generate). A new
field of the job detail is a member here, its value in ``views/json.py``, then
``scripts/ui_shapes.py`` (or ``scripts/build_ui``) for the page.

A member is ``NotRequired`` when some documents lack it (a result's optional members, an item
only history has); the page reads the same. The classes in :data:`OPEN` carry more members than
they name (a dataclass's fields, a lease owner's record): the page gets them as
``Record<string, unknown>`` beside the ones it reads. Only types the generator knows appear here:
``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``Literal``, ``list``, ``dict[str, ...]``,
unions and these classes.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

EntryStateName = Literal["dirty", "clean"]
StatusName = Literal["SUCCEEDED", "FAILED", "CANCELED", "STOPPED"]


class AttemptJson(TypedDict):
    """The Airflow task attempt that wrote a result."""

    dag_id: str
    task_id: str
    run_id: str
    try_number: int
    map_index: NotRequired[int]


class ActorJson(TypedDict):
    """Who moved an entry into history (a person through the CLI or the page, or a task)."""

    via: NotRequired[str]
    user: NotRequired[str]
    host: NotRequired[str]
    attempt: NotRequired[AttemptJson | None]
    text: str


class MovedJson(TypedDict):
    reason: str
    moved_at: str | None
    by: ActorJson | None


class EntryJson(TypedDict):
    """An entry or a history item: the result's members beside how the store holds it."""

    job_id: str
    status: StatusName
    state: EntryStateName
    application_id: NotRequired[str]
    outputs: NotRequired[dict[str, str]]
    metrics: NotRequired[dict[str, Any]]
    checkpoint_location: NotRequired[str]
    fingerprint: NotRequired[str]
    start_time: NotRequired[str]
    end_time: NotRequired[str]
    attempt: NotRequired[AttemptJson]
    fence: NotRequired[int]
    error: NotRequired[str]
    created_at: str | None
    spark_url: str | None
    moved: NotRequired[MovedJson]
    summary: NotRequired[bool]


class LeaseOwnerJson(TypedDict):
    """Who holds the lease, as it recorded itself (open: the whole owner record)."""

    host: NotRequired[str]
    pid: NotRequired[int]
    dag_id: NotRequired[str]
    task_id: NotRequired[str]
    run_id: NotRequired[str]


class LeaseHolderJson(TypedDict):
    token: int
    ttl_ms: int
    lease_ttl_ms: NotRequired[int | None]
    owner: LeaseOwnerJson


class RecoveryJson(TypedDict):
    """What a successor did about a dead attempt (:mod:`airflow_jrs.store.recoveries`)."""

    at: str | None
    event: str
    fence: int | None
    predecessor: int | None
    text: str
    facts: NotRequired[dict[str, Any]]


class HolderStateJson(TypedDict):
    """What the lease's holder is doing now (:mod:`airflow_jrs.views.holder`)."""

    state: Literal["running", "task_gone", "gone"]
    text: str
    next: str
    holder: str
    host: str | None
    task_pid: int | None
    seen_gone: bool
    silent_s: float | None
    expires_in_s: float
    supervisor_pid: int | None
    supervisor_host: str | None
    submit_pid: int | None


class IntentJson(TypedDict):
    """The intent's members (open), or only ``error`` for one that cannot be read."""

    application_id: NotRequired[str]
    app_name: NotRequired[str]
    error: NotRequired[str]


class StopRequestJson(TypedDict):
    """The last stop or cancel asked (open: the request's members)."""

    pending: bool
    kind: NotRequired[str]


class ProblemJson(TypedDict):
    error: str
    detail: str


class RunLinkJson(TypedDict):
    dag_id: NotRequired[str]
    run_id: str
    url: str


class LinksJson(TypedDict):
    runs: list[RunLinkJson]
    spark_ui: str | None


class JobJson(TypedDict):
    """Everything known about one job (:func:`~airflow_jrs.views.json.job_json`)."""

    job_id: str
    namespace: str
    summary: str | None
    state: EntryStateName | None
    running: bool
    entry: EntryJson | None
    problem: ProblemJson | None
    quarantined: bool
    history: list[EntryJson]
    lease: LeaseHolderJson | None
    holder_state: NotRequired[HolderStateJson | None]
    intent: IntentJson | None
    #: the attempt in flight is a stream (null: no intent)
    streaming: NotRequired[bool | None]
    heartbeat: dict[str, Any] | None
    stop_request: StopRequestJson | None
    recoveries: list[RecoveryJson]
    recovery_story: NotRequired[list[str]]
    links: NotRequired[LinksJson]


#: Shapes whose documents carry more members than they name.
OPEN = frozenset({"LeaseOwnerJson", "IntentJson", "StopRequestJson"})
#: What the page's types are generated from, in the order the generated file declares them.
SHAPES: tuple[type, ...] = (
    AttemptJson,
    ActorJson,
    MovedJson,
    EntryJson,
    LeaseOwnerJson,
    LeaseHolderJson,
    RecoveryJson,
    HolderStateJson,
    IntentJson,
    StopRequestJson,
    ProblemJson,
    RunLinkJson,
    LinksJson,
    JobJson,
)
