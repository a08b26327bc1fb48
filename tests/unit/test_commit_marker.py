"""read_commit_marker: the Airflow side of the commit marker (no Spark, no JVM)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from airflow_jrs.spark import MARKER_NAME, job_context, read_commit_marker


def test_missing_folder_means_no_marker(tmp_path: Path) -> None:
    assert read_commit_marker(str(tmp_path / "never-written")) is None


def test_folder_without_marker_means_no_marker(tmp_path: Path) -> None:
    (tmp_path / "part-00000.parquet").write_bytes(b"data")
    assert read_commit_marker(str(tmp_path)) is None


@pytest.mark.parametrize("content", [b'{"v": 1, "applicat', b"\xff\xfe garbage", b"[1, 2]"])
def test_unreadable_marker_raises_naming_the_path(tmp_path: Path, content: bytes) -> None:
    (tmp_path / MARKER_NAME).write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / MARKER_NAME))):
        read_commit_marker(str(tmp_path))


@pytest.mark.parametrize("suffix", ["", "/"])
def test_round_trip_of_a_hand_written_marker(tmp_path: Path, suffix: str) -> None:
    doc = {
        "v": 1,
        "application_id": "local-1700000000000",
        "job_id": "flights-2013-01-01",
        "fence": 3,
        "metrics": {"rows": 842, "date": "2013-01-01"},
        "written_at": "2013-01-02T00:00:00+00:00",
    }
    (tmp_path / MARKER_NAME).write_text(json.dumps(doc))
    assert read_commit_marker(str(tmp_path) + suffix) == doc


def test_file_url_is_read_through_fsspec(tmp_path: Path) -> None:
    (tmp_path / MARKER_NAME).write_text('{"v": 1, "metrics": {}}')
    assert read_commit_marker(f"file://{tmp_path}") == {"v": 1, "metrics": {}}


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


class _Spark:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


def test_job_context_reads_conf_and_tolerates_absence() -> None:
    ctx = job_context(_Spark({"spark.jrs.job_id": "j", "spark.jrs.fence": "7", "spark.jrs.output_dir": "/o"}))
    assert ctx == {"job_id": "j", "fence": 7, "output_dir": "/o", "namespace": None}
    assert job_context(_Spark({})) == {"job_id": None, "fence": None, "output_dir": None, "namespace": None}
