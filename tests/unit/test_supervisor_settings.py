"""The supervisor records a result with the task's [jrs] settings, handed in by the launcher.

A result the supervisor records for a task that is gone (a stop or cancel, see
test_stop_path.py) must wait for the configured durability like every other write; the launcher
hands the settings in the environment, and what it hands must be the supervised task's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.supervisor import SETTINGS_ENV, SUPERVISOR_ENV, supervisor_settings
from airflow_jrs.settings import JrsSettings, field_names, settings_for


def test_the_settings_the_launcher_hands_in_are_the_supervisors():
    task = settings_for("prod", output_root="/o", spec_root="/s", durability="aof", history_limit=7)
    handed = json.dumps(dataclasses.asdict(task))  # what launch/submission.py puts in the environment
    assert supervisor_settings(handed, "prod", ttl=30.0) == task


def test_without_settings_the_supervisor_uses_the_defaults():
    settings = supervisor_settings(None, "prod", ttl=30.0)
    assert (settings.namespace, settings.durability, settings.lease_ttl) == ("prod", "none", 30.0)


def test_settings_of_another_namespace_are_refused():
    other = json.dumps(dataclasses.asdict(settings_for("other", output_root="", spec_root="")))
    with pytest.raises(ValueError, match="'other'"):
        supervisor_settings(other, "prod", ttl=30.0)


def test_every_setting_away_from_its_default_comes_through_as_the_task_resolved_it():
    # the launcher hands in what resolve() gave the task; resolving it again changes nothing
    task = settings_for(
        "prod", output_root="/o", spec_root="/s", conn_id="jrs_prod", lease_ttl=45, clean_ttl=3600,
        delete_on_commit=True, history_limit=7, index_limit=0, durability="replicas:2", durability_timeout=1.5,
        connect_timeout=2, read_timeout=8, retries=0, retry_backoff=0.5, retry_backoff_max=4,
        on_store_unavailable="run", connect_unseen_tasks_wait=30, result_documents="/documents",
    )  # fmt: skip
    default = JrsSettings()
    assert {name for name in field_names() if getattr(task, name) != getattr(default, name)} == set(field_names())
    assert supervisor_settings(json.dumps(dataclasses.asdict(task)), "prod", ttl=45.0) == task


@pytest.mark.parametrize(
    ("handed", "named"),
    [
        ({"lease_ttl": -1}, "jrs setting 'lease_ttl' has invalid value -1 (must be positive)"),
        ({"history_limit": "many"}, "jrs setting 'history_limit' has invalid value 'many'"),
        ({"durability": "fsync"}, "jrs setting 'durability'"),
        ({"on_store_unavailable": "guess"}, "jrs setting 'on_store_unavailable' has invalid value 'guess'"),
        ({"colour": "blue"}, "unknown jrs settings ['colour']"),
    ],
)
def test_an_invalid_value_handed_in_is_refused_naming_the_setting(handed, named):
    # once taken as it came (JrsSettings(**json)): a negative lease TTL reached the store unchecked
    with pytest.raises(JrsConfigError) as refused:
        supervisor_settings(json.dumps({"namespace": "prod", **handed}), "prod", ttl=30.0)
    assert named in str(refused.value)


@pytest.mark.parametrize("raw", ["[1, 2]", "{not json"])
def test_what_is_not_a_json_object_of_settings_is_refused(raw):
    with pytest.raises(JrsConfigError, match="JSON"):
        supervisor_settings(raw, "prod", ttl=30.0)


def test_the_supervisor_started_with_invalid_settings_starts_nothing_and_says_which(tmp_path):
    marker = tmp_path / "started"
    env = {
        **os.environ,
        SUPERVISOR_ENV: json.dumps({"host": "127.0.0.1", "port": 1}),
        SETTINGS_ENV: json.dumps({"namespace": "prod", "lease_ttl": 0}),
    }
    command = [sys.executable, "-m", "airflow_jrs.launch.supervisor", "--namespace", "prod", "--job-id", "j",
               "--fence", "3", "--ttl", "30", "--", "touch", str(marker)]  # fmt: skip
    done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2  # argparse's usage error: nothing to retry until the settings are fixed
    said = f"{SETTINGS_ENV} is not the task's [jrs] settings (jrs setting 'lease_ttl' has invalid value 0"
    assert said in done.stderr
    assert not marker.exists()
