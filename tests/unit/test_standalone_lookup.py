"""A predecessor's driver on a standalone master list, asked of real HTTP servers that serve what a
master's web UI serves (jrs_testbench.fake_standalone: only the cluster is a stand-in).

Spark's master lists a cluster-mode driver in ``activedrivers`` while it is SUBMITTED (queued),
RUNNING, RELAUNCHING (``--supervise``) or UNKNOWN; a STANDBY master of an HA pair lists nothing.
"""

from __future__ import annotations

import pytest

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.deploy_modes.standalone import MastersUnreachableError, StandaloneMode, standalone_webuis
from jrs_testbench.fake_standalone import FakeStandaloneMaster

JOB = "standalone.job.2013-01-01"
DRIVER = "driver-20130101000000-0000"


@pytest.fixture
def ha_pair():
    with FakeStandaloneMaster(status="STANDBY") as standby, FakeStandaloneMaster() as alive:
        alive.submit({"spark.jrs.fence": "3"})
        yield standby, alive


def _mode(*masters: FakeStandaloneMaster) -> StandaloneMode:
    return StandaloneMode([m.url for m in masters], cluster=True)


@pytest.mark.parametrize("state", ["SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN"])
def test_a_live_driver_is_found_by_its_id_behind_a_standby_master(ha_pair, state):
    standby, alive = ha_pair
    alive.set_state(DRIVER, state)
    found = _mode(standby, alive).find_predecessors(None, "ns", JOB, "tag", [DRIVER])
    assert [DRIVER in p.description for p in found] == [True]
    assert found[0].alive()
    assert any(r.startswith("GET /json") for r in standby.requests)  # the first master was asked, too


def test_a_driver_that_ended_is_not_a_predecessor_and_stops_being_alive(ha_pair):
    standby, alive = ha_pair
    mode = _mode(standby, alive)
    found = mode.find_predecessors(None, "ns", JOB, "tag", [DRIVER])
    alive.set_state(DRIVER, "FINISHED")
    assert not found[0].alive()
    assert mode.find_predecessors(None, "ns", JOB, "tag", [DRIVER]) == []
    assert mode.find_predecessors(None, "ns", JOB, "tag", []) == []  # no id: nothing to look for


def test_the_master_kills_a_driver_through_its_web_ui(ha_pair):
    standby, alive = ha_pair
    (found,) = _mode(standby, alive).find_predecessors(None, "ns", JOB, "tag", [DRIVER])
    found.stop()
    assert alive.drivers[DRIVER]["state"] == "KILLED" and not found.alive()
    assert "POST /driver/kill/" in alive.requests


def test_no_alive_master_is_an_error_not_an_empty_list(ha_pair):
    standby, alive = ha_pair
    alive.status = "RECOVERING"  # the drivers are not known again yet
    with pytest.raises(MastersUnreachableError, match="no standalone master answered as ALIVE"):
        _mode(standby, alive).find_predecessors(None, "ns", JOB, "tag", [DRIVER])


def test_an_unreachable_master_is_skipped_for_the_next_one(ha_pair):
    _, alive = ha_pair
    mode = StandaloneMode(["http://127.0.0.1:9", alive.url], cluster=True)  # port 9: nothing listens
    assert len(mode.find_predecessors(None, "ns", JOB, "tag", [DRIVER])) == 1


def test_web_uis_follow_the_master_list():
    assert standalone_webuis(["h1:7077", "h2:7077"], {}) == ["http://h1:8080", "http://h2:8080"]
    assert standalone_webuis(["h1:7077", "h2:7077"], {"master_webui_url": "http://a:1, http://b:2"}) == [
        "http://a:1",
        "http://b:2",
    ]
    with pytest.raises(JrsConfigError, match="one per master"):
        standalone_webuis(["h1:7077", "h2:7077"], {"master_webui_url": "http://a:1"})
