/**
 * The "Job result" tab of a task instance. It answers first the question people open it with,
 * "did this task run Spark?": computed by this task, or reused (it found the job done and did
 * not run Spark). Then the job's detail.
 */
import { Box, Stack, Text } from "@chakra-ui/react";

import { api, type HolderState, type JobDetail, type TaskInstanceDetail, taskInstanceQuery } from "../api";
import { ErrorAlert, Loading, Notice, Raw } from "../components/common";
import { JobDetailView } from "../components/JobDetail";
import { useLoad } from "../useApi";

export interface HostProps {
  dagId?: string;
  runId?: string;
  taskId?: string;
  mapIndex?: string;
}

function Mark({ t, now }: { t: TaskInstanceDetail["task"]; now?: HolderState | null }) {
  if (t.running && now && now.state !== "running")
    // the try's task process is gone: Airflow says "Up For Retry" while its lease (and Spark) lives on
    return (
      <Notice status="warning">
        <Text data-mark={now.state}>
          <b>This try's task process is gone</b>, while the job's lease
          {now.state === "task_gone" ? " and its Spark application live" : " lives"} on: below, what still runs and what
          the task's retry will do.
        </Text>
      </Notice>
    );
  if (t.running)
    return (
      <Notice status="info">
        <Text data-mark="running">Running: this task holds the job's lease now.</Text>
      </Notice>
    );
  if (t.reused)
    return (
      <Notice status="success">
        <Text data-mark="reused">
          <b>Reused</b>: this task did not run Spark. It found the job's result already committed and passed it on.
        </Text>
      </Notice>
    );
  if (t.produced_entry)
    return (
      <Notice status="success">
        <Text data-mark="computed">
          <b>Computed by this task</b>: this try ran Spark and recorded the result below.
        </Text>
      </Notice>
    );
  return (
    <Notice status="warning">
      <Text data-mark="other">
        The job's current result was recorded by another task or run (this task's own result was forgotten, recomputed
        or superseded since; see the history).
      </Text>
    </Notice>
  );
}

export function TaskInstanceTab({ dagId, runId, taskId, mapIndex }: HostProps) {
  const query = taskInstanceQuery({ dagId, runId, taskId, mapIndex });
  const { data, error, reload } = useLoad(dagId && runId && taskId ? query : null, (signal) =>
    api<TaskInstanceDetail>(`api/task-instance?${query}`, { signal }),
  );
  return (
    <Box p={2} data-testid="jrs-task-instance">
      <ErrorAlert title="Could not load this task's job" error={error} />
      {!data && !error && <Loading />}
      {data && !data.job_id && (
        <Notice status="info">
          <Text data-mark="none">
            This task has no job in the store: it does not run a guarded Spark job, or it has not started yet.
          </Text>
        </Notice>
      )}
      {data && data.job_id && (
        <Stack gap={4}>
          <JobDetailView
            d={data as JobDetail}
            onChanged={reload}
            lead={<Mark t={data.task} now={data.holder_state} />}
          />
          {data.task.payload && <Raw label="What this task returned (XCom)" value={data.task.payload} />}
        </Stack>
      )}
    </Box>
  );
}
