"""A job's JSON shape is defined once (airflow_jrs/views/shapes.py) for Python and the page.

The page's TypeScript types were hand copies of ``views/json.py``; now they are generated from
the TypedDicts that ``views/json.py`` is typed with. These tests fail when the committed
``ui/src/shapes.gen.ts`` is not what the TypedDicts generate, and when a real job document
(from a real Redis) has a member its shape does not name or lacks one it requires: the casts
in ``views/json.py`` (members another module serializes) are where mypy cannot look.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from airflow_jrs.settings import settings_for
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobNamespace
from airflow_jrs.store.intents import Intent
from airflow_jrs.views import shapes
from airflow_jrs.views.job import inspect_job
from airflow_jrs.views.json import job_json

ROOT = Path(__file__).resolve().parents[2]
JOB = "s.t.2013-01-01"


def _generator() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import ui_shapes
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return ui_shapes


def test_the_committed_typescript_is_what_the_shapes_generate() -> None:
    ui_shapes = _generator()
    assert ui_shapes.TARGET.read_text() == ui_shapes.render(), (
        "ui/src/shapes.gen.ts is stale: run .venv/bin/python scripts/ui_shapes.py and commit it"
    )


def test_the_generator_refuses_a_type_it_cannot_write() -> None:
    with pytest.raises(TypeError, match="cannot write"):
        _generator().ts_type(set[int], {})


def _misfits(doc: Any, hint: Any, where: str) -> list[str]:
    """Where ``doc`` strays from ``hint``: a member not named (closed shapes), a required one missing."""
    if get_origin(hint) in (Union, type(int | None)):
        if doc is None:
            return []
        shaped = [a for a in get_args(hint) if is_typeddict(a) or get_origin(a) is list]
        return _misfits(doc, shaped[0], where) if shaped else []
    if get_origin(hint) is list:
        return [m for i, item in enumerate(doc) for m in _misfits(item, get_args(hint)[0], f"{where}[{i}]")]
    if not is_typeddict(hint):
        return []
    hints = get_type_hints(hint, include_extras=True)
    found = []
    if hint.__name__ not in shapes.OPEN:
        found += [f"{where}.{key}: not in {hint.__name__}" for key in doc if key not in hints]
    for key, member in hints.items():
        optional = get_origin(member) is NotRequired
        if key not in doc:
            found += [] if optional else [f"{where}.{key}: missing ({hint.__name__} requires it)"]
            continue
        found += _misfits(doc[key], get_args(member)[0] if optional else member, f"{where}.{key}")
    return found


@pytest.fixture
def jobs(redis_url, namespace, tmp_path):
    settings = settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path))
    jobs = RedisJobNamespace.from_url(redis_url, settings)
    yield jobs
    jobs.close()


def test_a_job_document_with_every_part_has_the_shape_the_page_is_typed_with(jobs) -> None:
    result = JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, attempt=Attempt("s", "t", "r0", 1))
    jobs.results.create_dirty_result(result)
    jobs.results.forget_result(JOB, expected=jobs.results.get_entry(JOB))  # a history item, moved
    jobs.results.create_dirty_result(result)
    lease = jobs.lease(JOB, ttl=60, dag_id="s", task_id="t", run_id="r1")
    fence = lease.acquire()  # the fence with its owner nonce, as the intent and the heartbeat take it
    jobs.intents.update(Intent(JOB, fence, "file:///spec", "/staging", "app", "h1", 42, 0.0))
    jobs.heartbeats.beat(JOB, fence, 60_000, host="h1", pid=43, child=44, first=True)
    jobs.stop_requests.ask(JOB, int(fence or 0), "stop", by="test")

    doc = json.loads(json.dumps(job_json(inspect_job(jobs, JOB))))

    assert all(doc[part] for part in ("entry", "history", "lease", "holder_state", "intent", "stop_request"))
    assert _misfits(doc, shapes.JobJson, "job") == []


def test_a_member_the_shape_does_not_name_is_found() -> None:
    """The check above can fail: a member added to a document but not to its shape."""
    stray = {"pending": True, "kind": "stop", "more": 1}  # an open shape takes it
    assert _misfits(stray, shapes.StopRequestJson, "stop") == []
    problem = {"error": "E", "detail": "d", "hint": "h"}
    assert _misfits(problem, shapes.ProblemJson, "p") == ["p.hint: not in ProblemJson"]
    assert _misfits({"runs": [{"url": "u"}], "spark_ui": None}, shapes.LinksJson, "l") == [
        "l.runs[0].run_id: missing (RunLinkJson requires it)"
    ]
