"""The supervisor records a result with the task's [jrs] settings, handed in by the launcher.

A result the supervisor records for a task that is gone (a stop or cancel, see
test_stop_path.py) must wait for the configured durability like every other write; the launcher
hands the settings in the environment, and what it hands must be the supervised task's.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from airflow_jrs.launch.supervisor import supervisor_settings
from airflow_jrs.protocol.jobs import settings_for


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
