"""What a FAILED result and the task log say about a failed spark-submit: bounded, to the point.

The output is fed through a real SparkSubmitHook's own line processing (its
``_process_spark_submit_log``), as spark-submit's output reaches it through the supervisor.
"""

from __future__ import annotations

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_jrs.launch.submission import TAIL_CHARS, TAIL_LINES, OutputTail
from airflow_jrs.protocol.endings import failure_summary

TRACEBACK = [
    "26/11/23 16:16:24 INFO DAGScheduler: Job 0 finished: count at tiny_app.py:38, took 1260.004159 ms\n",
    "26/11/23 16:16:24 INFO RollingEventLogFilesWriter: Logging events to /tmp/eventlog_v2_local-1795450562508\n",
    "Traceback (most recent call last):\n",
    '  File "/apps/tiny_app.py", line 39, in <module>\n',
    "    raise ValueError(args.raise_message)\n",
    "ValueError: input partition 2013-01-01 is empty\n",
    "26/11/23 16:16:25 INFO SparkContext: Invoking stop() from shutdown hook\n",
    *[f"26/11/23 16:16:25 INFO BlockManager: shutdown step {i}\n" for i in range(50)],
    "2026-11-23T16:16:25.591Z DEBUG ShutdownHookManager: Deleting directory /tmp/spark-1\n",
]


def run_through_hook(lines: list[str]) -> OutputTail:
    hook = SparkSubmitHook(conn_id="spark_default")
    tail = OutputTail()
    tail.wrap(hook)
    hook._process_spark_submit_log(iter(lines))
    return tail


def test_the_tail_keeps_the_applications_exception_and_drops_sparks_shutdown_chatter():
    tail = run_through_hook(TRACEBACK)
    assert tail.application_id == "local-1795450562508"
    assert tail.text().splitlines() == [
        "Traceback (most recent call last):",
        '  File "/apps/tiny_app.py", line 39, in <module>',
        "    raise ValueError(args.raise_message)",
        "ValueError: input partition 2013-01-01 is empty",
    ]
    summary = failure_summary(1, tail.application_id, tail.text(), RuntimeError("Cannot execute"))
    assert summary.splitlines()[0] == (
        "spark-submit exited with code 1; application local-1795450562508; last lines of its output:"
    )
    assert summary.endswith("ValueError: input partition 2013-01-01 is empty")


def test_the_tail_is_bounded_in_lines_and_characters_and_keeps_the_end():
    tail = run_through_hook([f"error line {i} " + "x" * 400 + "\n" for i in range(1000)])
    text = tail.text()
    assert len(text) <= TAIL_CHARS and len(text.splitlines()) <= TAIL_LINES
    assert text.startswith("...") and text.endswith("error line 999 " + "x" * 400)


def test_secrets_in_the_output_are_masked_as_the_provider_masks_its_log():
    tail = run_through_hook(["ValueError: cannot connect with password=hunter2\n"])
    assert "hunter2" not in tail.text()


def test_without_an_exit_code_the_summary_says_what_failed():
    summary = failure_summary(None, None, "", RuntimeError("No driver id is known: something went wrong\nmore"))
    assert summary == (
        "spark-submit failed: No driver id is known: something went wrong; it printed nothing besides "
        "Spark's INFO logging"
    )
