"""Links to the page before the React app still lead to the job."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from airflow_jrs.plugins.routes.pages import router


def test_the_old_page_link_redirects_to_the_job_on_the_react_page() -> None:
    app = FastAPI()
    app.include_router(router)
    client = TestClient(app, base_url="http://airflow.example")
    r = client.get("/?job_id=etl.submit.2024-01-01/part a", follow_redirects=False)
    assert r.status_code == 307
    assert r.headers["location"] == "../plugin/job-results?job=etl.submit.2024-01-01%2Fpart%20a"
    assert client.get("/", follow_redirects=False).headers["location"] == "../plugin/job-results"
