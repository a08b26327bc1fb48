"""YARN (master ``yarn``): in cluster mode the driver runs in the cluster, found by its application tag.

==================  ===============================  ==========================================
deploy mode         tag on the submission            a predecessor is found as
==================  ===============================  ==========================================
YARN cluster        ``spark.yarn.tags=jrs-<tag>``     a live application with the tag (the
                                                     ResourceManager REST API the provider uses)
YARN client         as :mod:`.local`                 as :mod:`.local`
==================  ===============================  ==========================================

Stopped through the ResourceManager the provider's hook knows. Refused (see docs/recovery.md,
"Deploy modes"): cluster mode with ``spark.yarn.submit.waitAppCompletion=false`` unless
``yarn_track_via_rm_api=True`` (spark-submit returns when YARN accepts the application and
nothing would wait for its end), and cluster mode with ``durable`` without
``yarn_track_via_rm_api`` (the provider asks the ResourceManager for the state on a retry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import requests

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.launch.deploy_modes.base import ClusterUnreachableError, DeployMode, IdShape, SparkTarget
from airflow_jrs.launch.deploy_modes.local import LocalMode
from airflow_jrs.protocol.launcher import Predecessor

_YARN_LIVE_STATES = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"
#: A YARN application id counts as a cluster driver even in client mode: waiting is the safe side.
APPLICATION_ID = IdShape(r"application_\d+_\d+", cluster_driver=True)


def _false(value: object) -> bool:
    return str(value).strip().lower() == "false"


class YarnClusterMode(DeployMode):
    """YARN cluster mode: the driver runs in the cluster, found by its application tag."""

    name = "yarn-cluster"
    kind = "yarn"
    cluster = True
    master_prefixes = ("yarn",)
    ids = (APPLICATION_ID,)

    @classmethod
    def for_target(cls, target: SparkTarget) -> DeployMode:
        return cls() if target.cluster else LocalMode()

    @classmethod
    def refuse_unsafe(
        cls, target: SparkTarget, conf: Mapping[str, Any], *, task_id: str, options: Mapping[str, Any]
    ) -> None:
        if not target.cluster or options.get("yarn_track_via_rm_api"):
            return
        if _false(conf.get("spark.yarn.submit.waitAppCompletion", "true")):
            raise JrsConfigError(
                f"{task_id}: spark.yarn.submit.waitAppCompletion=false makes spark-submit return when YARN "
                "accepts the application, before it ran; nothing would wait for its end. Remove the conf "
                "entry, or set yarn_track_via_rm_api=True (the provider then polls the ResourceManager)."
            )
        if options.get("durable"):
            raise JrsConfigError(  # the parent raises it too, but only inside the launch (after the intent)
                f"{task_id}: YARN cluster mode with durable=True (the default from Airflow 3.3) needs "
                "yarn_track_via_rm_api=True: the provider asks the ResourceManager for the application's state on "
                "a retry. Set yarn_track_via_rm_api=True, or durable=False (the job's intent still makes a retry "
                "wait for and adopt a running application)."
            )

    def submission_conf(self, tag: str, fence: int, user_conf: dict[str, Any]) -> dict[str, str]:
        user_tags = user_conf.get("spark.yarn.tags")
        return {"spark.yarn.tags": ",".join(filter(None, [user_tags, f"jrs-{tag}", f"jrs-fence-{fence}"]))}

    def cluster_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        try:
            base = provider.yarn_rm_url(spark_hook)
            auth = provider.yarn_rm_auth(spark_hook)
            resp = requests.get(
                f"{base}/ws/v1/cluster/apps",
                params={"applicationTags": f"jrs-{tag}", "states": _YARN_LIVE_STATES},
                auth=auth,
                timeout=(5, 30),
            )
            resp.raise_for_status()
            apps = ((resp.json() or {}).get("apps") or {}).get("app") or []
        except (requests.RequestException, ValueError, RuntimeError) as exc:
            raise ClusterUnreachableError(
                f"cannot ask the YARN ResourceManager which applications tagged jrs-{tag} (job {job_id}) still run "
                f"({type(exc).__name__}: {exc}); an earlier attempt's application may still run, so nothing is "
                "submitted. Set the Spark connection's extra yarn_resourcemanager_webapp_address to the "
                "ResourceManager's web address (and its credentials), or make sure it answers, then retry the task; "
                "`airflow-jrs intents` shows the application id the earlier attempt recorded."
            ) from exc
        found: list[Predecessor] = []
        for app in apps:
            app_id = app["id"]

            def alive(app_id: str = app_id) -> bool:
                r = requests.get(f"{base}/ws/v1/cluster/apps/{app_id}", auth=auth, timeout=(5, 30))
                r.raise_for_status()
                return r.json()["app"]["state"] in _YARN_LIVE_STATES.split(",")

            found.append(
                Predecessor(
                    description=f"YARN application {app_id}",
                    alive=alive,
                    stop=partial(provider.kill_yarn_application, spark_hook, app_id),
                )
            )
        return found
