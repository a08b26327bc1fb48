"""start_in_triggerer wiring at DAG-parse time (the runtime path is proven in tests/e2e)."""

from __future__ import annotations

import pytest
from airflow.sdk import DAG

from airflow_jrs.compat import AIRFLOW_V_3_3_PLUS, AIRFLOW_VERSION_TEXT
from airflow_jrs.operators.start_in_triggerer import (
    NEXT_METHOD,
    JrsStartInTriggererCleanupOperator,
    JrsStartInTriggererSparkSubmitOperator,
)

#: Starting a task in the triggerer, the trigger's templating and ``XCom.aset`` arrived in Airflow 3.3.
needs_airflow_3_3 = pytest.mark.skipif(
    not AIRFLOW_V_3_3_PLUS,
    reason=f"starting in the triggerer needs Airflow 3.3 (this is {AIRFLOW_VERSION_TEXT})",
)


@needs_airflow_3_3
def test_submit_starts_in_the_triggerer_with_unrendered_template_fields():
    op = JrsStartInTriggererSparkSubmitOperator(
        task_id="submit", application="/apps/a.py", application_args=["--date", "{{ ds }}"], job_id="j.{{ ds }}"
    )
    assert op.start_from_trigger is True
    args = op.start_trigger_args
    assert args.trigger_cls.endswith("StartInTriggererSubmitTrigger") and args.next_method == NEXT_METHOD
    assert args.trigger_kwargs["job_id"] == "j.{{ ds }}"
    assert args.trigger_kwargs["application_args"] == ["--date", "{{ ds }}"]


@needs_airflow_3_3
def test_cleanup_starts_in_the_triggerer_with_its_jobs():
    with DAG("d", schedule=None):
        submit = JrsStartInTriggererSparkSubmitOperator(task_id="submit", application="/apps/a.py")
        cleanup = JrsStartInTriggererCleanupOperator(task_id="cleanup", jobs=[submit, "other.job"])
    assert cleanup.start_from_trigger is True
    kwargs = cleanup.start_trigger_args.trigger_kwargs
    assert kwargs["job_ids"] == ["other.job"] and kwargs["job_tasks"] == ["submit"]


@pytest.mark.skipif(AIRFLOW_V_3_3_PLUS, reason="Airflow 3.3 and later start tasks in the triggerer")
def test_below_airflow_3_3_start_in_triggerer_warns_naming_the_version_and_runs_on_a_worker():
    with pytest.warns(UserWarning, match=rf"needs Airflow 3\.3 or later, and this is Airflow {AIRFLOW_VERSION_TEXT}"):
        op = JrsStartInTriggererSparkSubmitOperator(task_id="submit", application="/apps/a.py")
    assert not op.start_from_trigger and op.start_trigger_args is None
    with pytest.warns(UserWarning, match="task 'cleanup' runs on a worker instead"):
        cleanup = JrsStartInTriggererCleanupOperator(task_id="cleanup", jobs=["a.job"])
    assert not cleanup.start_from_trigger


def test_start_in_triggerer_false_warns_about_nothing(recwarn):
    JrsStartInTriggererSparkSubmitOperator(task_id="submit", application="/apps/a.py", start_in_triggerer=False)
    assert not [w for w in recwarn if "triggerer" in str(w.message)]


def test_start_in_triggerer_false_is_the_plain_worker_path():
    op = JrsStartInTriggererSparkSubmitOperator(task_id="submit", application="/apps/a.py", start_in_triggerer=False)
    assert not op.start_from_trigger


def _round_trip(trigger):
    import json

    from airflow.providers.common.compat.module_loading import import_string

    try:  # Airflow 3.2+
        from airflow.sdk.serde import deserialize, serialize
    except ImportError:  # Airflow 3.1
        from airflow.serialization.serde import deserialize, serialize  # type: ignore[no-redef]

    classpath, kwargs = trigger.serialize()
    json.dumps(kwargs)  # plain JSON: nothing the triggerer could fail to load
    again = import_string(classpath)(**deserialize(serialize(kwargs)))
    assert again.serialize() == (classpath, kwargs)
    return classpath, kwargs


def test_submit_trigger_serialize_round_trip_re_instantiates_an_equal_trigger():
    from airflow_jrs.triggers.start_in_triggerer import StartInTriggererSubmitTrigger

    classpath, kwargs = _round_trip(
        StartInTriggererSubmitTrigger(
            jrs_conn_id="jrs_prod",
            jrs_namespace="prod",
            job_id="j.{{ ds }}",
            application="/apps/a.py",
            application_args=["--date", "{{ ds }}"],
            job_version="2",
            accept_changed_fingerprint=True,
            skip_when_done=True,
        )
    )
    assert classpath == "airflow_jrs.triggers.start_in_triggerer.StartInTriggererSubmitTrigger"
    assert kwargs["application_args"] == ["--date", "{{ ds }}"] and kwargs["skip_when_done"] is True


def test_cleanup_trigger_serialize_round_trip_re_instantiates_an_equal_trigger():
    from airflow_jrs.triggers.start_in_triggerer import StartInTriggererCleanupTrigger

    classpath, kwargs = _round_trip(
        StartInTriggererCleanupTrigger(jrs_namespace="prod", job_ids=["a.b.c"], job_tasks=["ingest.submit"])
    )
    assert classpath == "airflow_jrs.triggers.start_in_triggerer.StartInTriggererCleanupTrigger"
    assert kwargs["job_ids"] == ["a.b.c"] and kwargs["job_tasks"] == ["ingest.submit"]


@needs_airflow_3_3
def test_operator_and_trigger_agree_on_what_the_trigger_receives():
    # The operator's start_trigger_args must build the trigger it names, unchanged.
    from airflow.providers.common.compat.module_loading import import_string

    op = JrsStartInTriggererSparkSubmitOperator(task_id="submit", application="/apps/a.py", job_id="j.{{ ds }}")
    args = op.start_trigger_args
    trigger = import_string(args.trigger_cls)(**args.trigger_kwargs)
    assert trigger.serialize()[1] == args.trigger_kwargs
