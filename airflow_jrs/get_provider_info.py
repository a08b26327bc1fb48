"""Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point.

Kept declarative and import-light: Airflow calls this in every process at start-up.
"""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    from airflow_jrs import __version__
    from airflow_jrs.settings import SETTINGS

    options = {
        s.name: {
            "description": s.doc,
            "version_added": "0.1.0",
            "type": s.kind,
            "example": None,
            "default": s.config_default or None,
        }
        for s in SETTINGS
    }
    return {
        "package-name": "airflow-jrs",
        "name": "Job Result Store",
        "description": "Spark jobs from Airflow, computed once: a Redis job result store (FLIP-194) "
        "behind Spark submit operators, sensors and triggers.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Job Result Store",
                "external-doc-url": "https://pypi.org/project/airflow-jrs/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Job Result Store",
                "python-modules": [
                    "airflow_jrs.operators.spark",
                    "airflow_jrs.operators.cleanup",
                    "airflow_jrs.operators.start_in_triggerer",
                    "airflow_jrs.operators.pyspark",
                    "airflow_jrs.operators.spark_sql",
                    "airflow_jrs.operators.spark_pipelines",
                    "airflow_jrs.operators.spark_jdbc",
                ],
            }
        ],
        "sensors": [{"integration-name": "Job Result Store", "python-modules": ["airflow_jrs.sensors.job_result"]}],
        "hooks": [{"integration-name": "Job Result Store", "python-modules": ["airflow_jrs.hooks.jrs"]}],
        "triggers": [
            {
                "integration-name": "Job Result Store",
                "python-modules": ["airflow_jrs.triggers.job_result", "airflow_jrs.triggers.start_in_triggerer"],
            }
        ],
        "task-decorators": [
            {"class-name": "airflow_jrs.decorators.pyspark.jrs_pyspark_task", "name": "jrs_pyspark"},
        ],
        "extra-links": [
            "airflow_jrs.operators.links.JobResultLink",
            "airflow_jrs.operators.links.SparkApplicationLink",
        ],
        # The UI plugin is registered through the ``airflow.plugins`` entry point, not a
        # ``plugins`` key here: Airflow reads a provider's plugins only with
        # ``[core] lazy_discover_providers = False`` (off by default), and with both the plugin
        # would load twice and show up as an import error.
        "connection-types": [
            {
                "hook-class-name": "airflow_jrs.hooks.jrs.JrsHook",
                "connection-type": "jrs",
                "hook-name": "Job Result Store (Redis)",
                "conn-fields": {
                    "namespace": {
                        "label": "Namespace",
                        "schema": {"type": ["string", "null"], "default": "default"},
                    },
                    "db": {"label": "Database", "schema": {"type": ["integer", "null"], "default": 0}},
                    "ssl": {"label": "TLS", "schema": {"type": ["boolean", "null"], "default": False}},
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema"],
                    "relabeling": {"login": "ACL user", "host": "Redis host"},
                    "placeholders": {"port": "6379"},
                },
            }
        ],
        "config": {
            "jrs": {
                "description": "airflow-jrs: the job result store and its operators. Settings here are "
                "overridden by the jrs connection's extra and by operator arguments.",
                "options": options,
            }
        },
    }
