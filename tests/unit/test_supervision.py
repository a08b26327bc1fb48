"""The launchers hand their supervisor the attempt's namespace: its connection and its settings.

``launch/`` is given the :class:`~airflow_jrs.protocol.JobNamespace` the attempt runs on, never
the Airflow hook: what the supervisor beside spark-submit (or spark-pipelines) needs is the
namespace's connection kwargs and ``[jrs]`` settings, and a connection that cannot be handed to
another process (a Unix socket) is said in the words of the connection it came from.
"""

from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace

import pytest
import redis

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.pipelines_launcher import PipelinesLauncher
from airflow_jrs.launch.submission import Supervision
from airflow_jrs.protocol import settings_for
from airflow_jrs.store.redis.namespace import RedisJobNamespace

SOURCE = "jrs connection 'jrs_default'"


@pytest.fixture
def settings(namespace, tmp_path):
    return settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path), lease_ttl=12.0,
                        durability="aof", history_limit=4)  # fmt: skip


@pytest.fixture
def socket_jobs(settings, tmp_path):
    jobs = RedisJobNamespace(redis.Redis(unix_socket_path=str(tmp_path / "redis.sock")), settings, source=SOURCE)
    yield jobs
    jobs.close()


def test_the_supervisor_gets_the_namespaces_connection_and_settings(redis_url, settings, caplog):
    jobs = RedisJobNamespace(redis.Redis.from_url(redis_url), settings, source=SOURCE)  # as the hook builds it
    try:
        supervision = Supervision.for_attempt(jobs, "j.1", 5, logging.getLogger("jrs-test"))
        assert supervision is not None
        assert supervision.connection == jobs.connection_kwargs()
        assert f"{supervision.connection['host']}:{supervision.connection['port']}" in redis_url
        assert (supervision.namespace, supervision.job_id, supervision.fence) == (settings.namespace, "j.1", 5)
        assert supervision.ttl == 12.0  # the lease's TTL: its heartbeat lives as long
        assert supervision.settings == dataclasses.asdict(settings)  # durability and limits for what it records
        assert not caplog.records
    finally:
        jobs.close()


def test_a_connection_that_cannot_be_handed_on_runs_spark_submit_bare_saying_why(socket_jobs, caplog):
    with caplog.at_level(logging.WARNING, logger="jrs-test"):
        assert Supervision.for_attempt(socket_jobs, "j.1", 5, logging.getLogger("jrs-test")) is None
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith(
        f"Job j.1: spark-submit runs without a supervisor ({SOURCE} uses a Unix socket; a client in another process"
    )
    assert warning.endswith("a successor on another host cannot see it.")


def test_spark_pipelines_refuses_to_start_without_a_supervisor_naming_the_connection(socket_jobs, tmp_path):
    launcher = PipelinesLauncher(
        spec_path=str(tmp_path / "spark-pipeline.yml"), conf={}, cli_args=[], env={}, jobs=socket_jobs,
        log=logging.getLogger("jrs-test"),
    )  # fmt: skip
    launch = SimpleNamespace(job_id="j.1", fence=5)
    with pytest.raises(JrsConfigError) as refused:
        launcher.run(launch)
    message = str(refused.value)
    assert message.startswith("job j.1: spark-pipelines runs only under the supervisor")
    assert f"{SOURCE} uses a Unix socket" in message
