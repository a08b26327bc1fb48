/**
 * The "Job results" page (nav): every entry of the namespace with filters and paging, the
 * leases held now, and one job's detail when a job is chosen (``?job=<id>`` in the URL, so a
 * detail can be linked and the browser's Back returns to the list).
 */
import { Box, Button, Field, Heading, HStack, Input, Link, NativeSelect, Stack, Table, Text } from "@chakra-ui/react";
import { useState } from "react";
import { useSearchParams } from "react-router-dom";

import {
  api,
  type JobDetail,
  jobPath,
  type LeasesPage,
  type ResultsFilters,
  resultsQuery,
  type ResultsPage,
} from "../api";
import { AttemptLinks, ErrorAlert, Loading, SparkLink, StateBadge, STATE_WORDS, When } from "../components/common";
import { JobDetailView } from "../components/JobDetail";
import { useLoad } from "../useApi";

type Filters = ResultsFilters;

const EMPTY: Filters = { state: "", status: "", dag_id: "", job_id_prefix: "", since: "", limit: "50" };

function Select({
  label,
  value,
  onChange,
  options,
}: {
  label: string;
  value: string;
  onChange: (v: string) => void;
  options: [string, string][];
}) {
  return (
    <Field.Root w="auto">
      <Field.Label fontSize="xs">{label}</Field.Label>
      <NativeSelect.Root size="sm" w="40">
        <NativeSelect.Field name={label} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
          {options.map(([v, text]) => (
            <option key={v} value={v}>
              {text}
            </option>
          ))}
        </NativeSelect.Field>
        <NativeSelect.Indicator />
      </NativeSelect.Root>
    </Field.Root>
  );
}

function Leases() {
  const { data, error } = useLoad("leases", (signal) => api<LeasesPage>("api/leases", { signal }));
  const [, setParams] = useSearchParams();
  return (
    <Stack gap={2}>
      <Heading size="md">Leases held now</Heading>
      <ErrorAlert title="Could not load the leases" error={error} />
      {data && !data.leases.length && (
        <Text color="fg.muted" data-empty="leases">
          None: no attempt is computing a job now.
        </Text>
      )}
      {data && data.leases.length > 0 && (
        <Table.Root size="sm" variant="outline" data-testid="leases">
          <Table.Header>
            <Table.Row>
              <Table.ColumnHeader>Job</Table.ColumnHeader>
              <Table.ColumnHeader>Fence</Table.ColumnHeader>
              <Table.ColumnHeader>Held by</Table.ColumnHeader>
              <Table.ColumnHeader>Expires in</Table.ColumnHeader>
            </Table.Row>
          </Table.Header>
          <Table.Body>
            {data.leases.map((l) => (
              <Table.Row key={l.job_id} data-job-id={l.job_id}>
                <Table.Cell>
                  <Link as="button" color="fg.info" onClick={() => setParams({ job: l.job_id })}>
                    {l.job_id}
                  </Link>
                </Table.Cell>
                <Table.Cell>{l.lease.token}</Table.Cell>
                <Table.Cell>
                  {[l.lease.owner.dag_id, l.lease.owner.task_id].filter(Boolean).join(".")}
                  {l.lease.owner.host ? ` on ${l.lease.owner.host}` : ""}
                </Table.Cell>
                <Table.Cell>{Math.round(l.lease.ttl_ms / 1000)} s</Table.Cell>
              </Table.Row>
            ))}
          </Table.Body>
        </Table.Root>
      )}
    </Stack>
  );
}

function List({ onPick }: { onPick: (jobId: string) => void }) {
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [applied, setApplied] = useState<Filters>(EMPTY);
  const [offset, setOffset] = useState(0);

  const query = resultsQuery(applied, offset);
  const { data, error, loading, reload } = useLoad(query, (signal) =>
    api<ResultsPage>(`api/results?${query}`, { signal }),
  );
  const set = (k: keyof Filters) => (v: string) => setDraft((f) => ({ ...f, [k]: v }));
  const limit = Number(applied.limit);

  return (
    <Stack gap={4}>
      <HStack justify="space-between" wrap="wrap">
        <Heading size="xl">Job results</Heading>
        {data && (
          <HStack gap={3} fontSize="sm" color="fg.muted">
            <Text>
              namespace{" "}
              <Text as="span" fontFamily="mono">
                {data.namespace}
              </Text>
            </Text>
            <StateBadge state="dirty" label={`${data.counts.dirty} dirty`} />
            <StateBadge state="quarantined" label={`${data.counts.quarantined} quarantined`} />
          </HStack>
        )}
      </HStack>
      <form
        data-testid="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setOffset(0);
          setApplied(draft);
          reload();
        }}
      >
        <HStack gap={3} align="end" wrap="wrap">
          <Select
            label="State"
            value={draft.state}
            onChange={set("state")}
            options={[
              ["", "any state"],
              ["dirty", "dirty"],
              ["clean", "committed (clean)"],
            ]}
          />
          <Select
            label="Status"
            value={draft.status}
            onChange={set("status")}
            options={[
              ["", "any status"],
              ["SUCCEEDED", "succeeded"],
              ["FAILED", "failed"],
              ["CANCELED", "canceled"],
              ["STOPPED", "stopped"],
            ]}
          />
          <Field.Root w="48">
            <Field.Label fontSize="xs">DAG id</Field.Label>
            <Input size="sm" name="dag_id" value={draft.dag_id} onChange={(e) => set("dag_id")(e.target.value)} />
          </Field.Root>
          <Field.Root w="56">
            <Field.Label fontSize="xs">Job id starts with</Field.Label>
            <Input
              size="sm"
              name="job_id_prefix"
              value={draft.job_id_prefix}
              onChange={(e) => set("job_id_prefix")(e.target.value)}
            />
          </Field.Root>
          <Field.Root w="40">
            <Field.Label fontSize="xs">Recorded since</Field.Label>
            <Input
              size="sm"
              type="date"
              name="since"
              value={draft.since}
              onChange={(e) => set("since")(e.target.value)}
            />
          </Field.Root>
          <Select
            label="Per page"
            value={draft.limit}
            onChange={set("limit")}
            options={[
              ["10", "10"],
              ["25", "25"],
              ["50", "50"],
              ["100", "100"],
              ["250", "250"],
            ]}
          />
          <Button size="sm" type="submit" loading={loading}>
            Apply
          </Button>
          <Button
            size="sm"
            variant="ghost"
            onClick={() => {
              setDraft(EMPTY);
              setApplied(EMPTY);
              setOffset(0);
            }}
          >
            Reset
          </Button>
        </HStack>
      </form>
      <ErrorAlert title="Could not load the results" error={error} />
      {!data && !error && <Loading />}
      {data && (
        <Box overflowX="auto">
          <Table.Root size="sm" variant="outline" interactive data-testid="results">
            <Table.Header>
              <Table.Row>
                <Table.ColumnHeader>Job</Table.ColumnHeader>
                <Table.ColumnHeader>State</Table.ColumnHeader>
                <Table.ColumnHeader>Status</Table.ColumnHeader>
                <Table.ColumnHeader>Recorded</Table.ColumnHeader>
                <Table.ColumnHeader>Produced by</Table.ColumnHeader>
                <Table.ColumnHeader>Spark</Table.ColumnHeader>
              </Table.Row>
            </Table.Header>
            <Table.Body>
              {data.entries.map((e) => (
                <Table.Row key={e.job_id} data-job-id={e.job_id}>
                  <Table.Cell>
                    <HStack gap={1}>
                      <Link
                        as="button"
                        color="fg.info"
                        textAlign="start"
                        wordBreak="break-all"
                        onClick={() => onPick(e.job_id)}
                      >
                        {e.job_id}
                      </Link>
                    </HStack>
                  </Table.Cell>
                  <Table.Cell>
                    <StateBadge state={e.state} label={STATE_WORDS[e.state] ?? e.state} />
                  </Table.Cell>
                  <Table.Cell>
                    <StateBadge state={e.status} />
                  </Table.Cell>
                  <Table.Cell>
                    <When iso={e.created_at} />
                  </Table.Cell>
                  <Table.Cell>{e.attempt ? <AttemptLinks attempt={e.attempt} /> : "unknown"}</Table.Cell>
                  <Table.Cell>
                    <SparkLink url={e.spark_url} applicationId={e.application_id} />
                  </Table.Cell>
                </Table.Row>
              ))}
            </Table.Body>
          </Table.Root>
          {!data.entries.length && (
            <Text color="fg.muted" py={3} data-empty="results">
              No entries match these filters.
            </Text>
          )}
        </Box>
      )}
      {data && (
        <HStack gap={3}>
          <Button
            size="sm"
            variant="outline"
            disabled={offset === 0}
            onClick={() => setOffset(Math.max(0, offset - limit))}
            data-page="prev"
          >
            Previous
          </Button>
          <Text fontSize="sm" color="fg.muted" data-testid="page">
            {data.entries.length ? `${offset + 1}–${offset + data.entries.length}` : "0"}
          </Text>
          <Button
            size="sm"
            variant="outline"
            disabled={!data.has_more}
            onClick={() => setOffset(offset + limit)}
            data-page="next"
          >
            Next
          </Button>
        </HStack>
      )}
    </Stack>
  );
}

function Detail({ jobId, onBack }: { jobId: string; onBack: () => void }) {
  const { data, error, reload } = useLoad(jobId, (signal) =>
    api<JobDetail>(`api/results/${jobPath(jobId)}`, { signal }),
  );
  return (
    <Stack gap={4}>
      <HStack>
        <Button size="sm" variant="ghost" onClick={onBack} data-testid="back">
          ← All job results
        </Button>
      </HStack>
      <ErrorAlert title={`Could not load ${jobId}`} error={error} />
      {!data && !error && <Loading />}
      {data && <JobDetailView d={data} onChanged={reload} />}
    </Stack>
  );
}

export function JobResultsPage() {
  const [params, setParams] = useSearchParams();
  // ``job_id``: the old page's parameter, still in the extra links of finished tasks
  const jobId = params.get("job") ?? params.get("job_id");
  return (
    <Box p={4} data-testid="jrs-job-results">
      {jobId ? (
        <Detail jobId={jobId} onBack={() => setParams({})} />
      ) : (
        <Stack gap={8}>
          <List onPick={(id) => setParams({ job: id })} />
          <Leases />
        </Stack>
      )}
    </Box>
  );
}
