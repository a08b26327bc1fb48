"""The Spark Connect launcher's names: the session URL a retry reattaches with, the tag, redaction."""

from __future__ import annotations

from airflow_jrs.launch.connect_launcher import job_tag, redacted, session_url

SID = "5f0c2a9e-1111-4222-8333-444455556666"


def test_the_session_id_joins_the_urls_parameters_whatever_the_provider_made_of_them():
    assert session_url("sc://h:15002", SID) == f"sc://h:15002/;session_id={SID}"
    assert session_url("sc://h:15002/", SID) == f"sc://h:15002/;session_id={SID}"  # SparkConnectHook's shape
    assert session_url("sc://h:15002/;user_id=airflow;use_ssl=True", SID) == (
        f"sc://h:15002/;user_id=airflow;use_ssl=True;session_id={SID}"
    )


def test_the_token_never_reaches_the_spec_or_the_log():
    assert redacted("sc://h/;user_id=a;token=s3cret;use_ssl=True") == "sc://h/;user_id=a;token=***;use_ssl=True"
    assert redacted("sc://h/;token=s3cret") == "sc://h/;token=***"


def test_the_tag_names_namespace_job_and_fence_and_has_no_comma():
    assert job_tag("prod", "d.t.2013-01-01", 7) == "jrs-prod-d.t.2013-01-01-f7"
    assert "," not in job_tag("prod", "a,b", 1)
