"""start_in_triggerer wiring at DAG-parse time (the runtime path is proven in tests/e2e)."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_jrs.operators.triggerer_skip import (
    NEXT_METHOD,
    JrsTriggererCleanupOperator,
    JrsTriggererSparkSubmitOperator,
)


def test_submit_starts_in_the_triggerer_with_unrendered_template_fields():
    op = JrsTriggererSparkSubmitOperator(
        task_id="submit", application="/apps/a.py", application_args=["--date", "{{ ds }}"], job_id="j.{{ ds }}"
    )
    assert op.start_from_trigger is True
    args = op.start_trigger_args
    assert args.trigger_cls.endswith("CommittedResultTrigger") and args.next_method == NEXT_METHOD
    assert args.trigger_kwargs["job_id"] == "j.{{ ds }}"
    assert args.trigger_kwargs["application_args"] == ["--date", "{{ ds }}"]


def test_cleanup_starts_in_the_triggerer_with_its_jobs():
    with DAG("d", schedule=None):
        submit = JrsTriggererSparkSubmitOperator(task_id="submit", application="/apps/a.py")
        cleanup = JrsTriggererCleanupOperator(task_id="cleanup", jobs=[submit, "other.job"])
    assert cleanup.start_from_trigger is True
    kwargs = cleanup.start_trigger_args.trigger_kwargs
    assert kwargs["job_ids"] == ["other.job"] and kwargs["job_tasks"] == ["submit"]


def test_start_in_triggerer_false_is_the_plain_worker_path():
    op = JrsTriggererSparkSubmitOperator(task_id="submit", application="/apps/a.py", start_in_triggerer=False)
    assert not op.start_from_trigger
