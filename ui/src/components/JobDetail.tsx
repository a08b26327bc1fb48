/**
 * One job, in words first: its state, what it produced, who moved it and why, what successors
 * did about dead attempts, and where to look next (the runs, the Spark UI). The store's raw
 * members (lease, intent, heartbeat) stay behind a "raw" toggle; a heartbeat is only mentioned
 * while an attempt runs, when it means something.
 */
import { Box, Button, Card, DataList, Heading, HStack, List, Stack, Table, Text, Wrap } from "@chakra-ui/react";
import { type ReactNode, useState } from "react";

import { act, type Entry, type JobAction, type JobDetail as Detail } from "../api";
import { absolute } from "../time";
import {
  AirflowLink,
  AttemptLinks,
  Copyable,
  ErrorAlert,
  ExternalLink,
  Notice,
  Raw,
  runPath,
  SparkLink,
  StateBadge,
  STATE_WORDS,
  When,
} from "./common";
import { ConfirmDialog } from "./ConfirmDialog";
import { holderWords, metricText, ranSeconds } from "./format";

function Section({ title, children, testId }: { title: string; children: ReactNode; testId?: string }) {
  return (
    <Card.Root size="sm" variant="outline" data-section={testId ?? title}>
      <Card.Header>
        <Heading size="sm">{title}</Heading>
      </Card.Header>
      <Card.Body>{children}</Card.Body>
    </Card.Root>
  );
}

function Outputs({ entry }: { entry: Entry }) {
  const outputs = Object.entries(entry.outputs ?? {});
  if (!outputs.length && !entry.checkpoint_location) return <Text color="fg.muted">This job recorded no outputs.</Text>;
  return (
    <DataList.Root orientation="horizontal" size="sm">
      {outputs.map(([name, path]) => (
        <DataList.Item key={name}>
          <DataList.ItemLabel>{name}</DataList.ItemLabel>
          <DataList.ItemValue>
            <Copyable value={String(path)} label={`path of ${name}`} />
          </DataList.ItemValue>
        </DataList.Item>
      ))}
      {entry.checkpoint_location && (
        <DataList.Item>
          <DataList.ItemLabel>checkpoint</DataList.ItemLabel>
          <DataList.ItemValue>
            <Copyable value={entry.checkpoint_location} label="checkpoint location" />
          </DataList.ItemValue>
        </DataList.Item>
      )}
    </DataList.Root>
  );
}

function Metrics({ metrics }: { metrics: Record<string, unknown> | undefined }) {
  const rows = Object.entries(metrics ?? {});
  if (!rows.length) return <Text color="fg.muted">No metrics.</Text>;
  return (
    <Table.Root size="sm" variant="line" maxW="lg">
      <Table.Body>
        {rows.map(([k, v]) => (
          <Table.Row key={k}>
            <Table.Cell color="fg.muted">{k}</Table.Cell>
            <Table.Cell textAlign="end" fontFamily="mono">
              {metricText(v)}
            </Table.Cell>
          </Table.Row>
        ))}
      </Table.Body>
    </Table.Root>
  );
}

function History({ items }: { items: Entry[] }) {
  if (!items.length) return <Text color="fg.muted">Never forgotten, recomputed or superseded.</Text>;
  return (
    <List.Root gap={2} variant="plain" fontSize="sm" data-testid="history">
      {items.map((h, i) => (
        <List.Item key={i} data-reason={h.moved?.reason ?? ""} display="block">
          <Text as="span" fontWeight="semibold">
            {h.moved ? h.moved.reason : "moved"}
          </Text>
          {h.moved?.by ? <> by {h.moved.by.text}</> : null} <When iso={h.moved?.moved_at ?? null} />
          <Text as="span" color="fg.muted">
            {" "}
            — it was <StateBadge state={h.status} /> ({STATE_WORDS[h.state] ?? h.state}), created{" "}
            <When iso={h.created_at} />
            {h.fence != null ? `, fence ${h.fence}` : ""}
            {h.attempt ? (
              <>
                , by <AttemptLinks attempt={h.attempt} />
              </>
            ) : null}
          </Text>
        </List.Item>
      ))}
    </List.Root>
  );
}

/** Sentences about the job's recoveries: the API's own story when it has one, else each step's text. */
function RecoveryStory({ d }: { d: Detail }) {
  const story = d.recovery_story?.length ? d.recovery_story : d.recoveries.map((r) => r.text).reverse();
  if (!story.length) return null;
  return (
    <Section title="How it recovered" testId="recovery">
      <List.Root gap={1} as="ol" ps={4} fontSize="sm" data-testid="recovery-story">
        {story.map((line, i) => (
          <List.Item key={i}>{line}</List.Item>
        ))}
      </List.Root>
    </Section>
  );
}

function Running({ d }: { d: Detail }) {
  if (!d.lease) return null;
  const now = d.holder_state;
  if (now && now.state !== "running")
    // a crash: the task process is gone while its lease (and maybe its Spark) lives on
    return (
      <Notice status="warning">
        <Text data-holder-state={now.state}>
          <b>{now.state === "task_gone" ? "Task process gone, Spark still running" : "Task process gone"}</b>:{" "}
          {now.text} {now.next}
        </Text>
      </Notice>
    );
  const o = d.lease.owner;
  const who = holderWords(o);
  return (
    <Notice status="info">
      Running now: fence {d.lease.token} holds the lease{who ? ` (${who}` : ""}
      {o.host ? ` on ${o.host}` : ""}
      {who ? ")" : ""}; it expires in {Math.round(d.lease.ttl_ms / 1000)} s unless renewed.
      {d.intent?.application_id ? ` Spark application ${d.intent.application_id}.` : ""}
      {d.stop_request?.pending ? ` A ${d.stop_request.kind ?? "stop"} was asked and is pending.` : ""}
    </Notice>
  );
}

interface ActionSpec {
  action: JobAction;
  label: string;
  title: string;
  text: ReactNode;
  danger?: boolean;
  extra?: Record<string, unknown>;
}

function actionsFor(d: Detail): ActionSpec[] {
  const e = d.entry;
  const out: ActionSpec[] = [];
  if (!d.can_edit) return out;
  if (e?.attempt && !d.lease)
    out.push({
      action: "recompute",
      label: "Recompute",
      title: `Recompute ${d.job_id}?`,
      text: (
        <>
          <Text>
            Its result is forgotten (kept in its history) and {e.attempt.dag_id}.{e.attempt.task_id} in run{" "}
            {e.attempt.run_id} is cleared, so it runs Spark again.
          </Text>
          <Text>A later run or backfill of the date reuses the new result.</Text>
        </>
      ),
      extra: { created_at: e.created_at },
    });
  if (e)
    out.push({
      action: "forget",
      label: "Forget",
      title: `Forget the result of ${d.job_id}?`,
      text: <Text>The next run of the job computes it again. The entry stays in the job's history.</Text>,
      danger: true,
      extra: { created_at: e.created_at },
    });
  if (e?.state === "dirty")
    out.push({
      action: "mark-clean",
      label: "Mark clean",
      title: `Mark ${d.job_id} clean?`,
      text: <Text>Without running its cleanup: do this only if its staging data is already gone.</Text>,
    });
  if (d.quarantined)
    out.push({
      action: "release-quarantine",
      label: "Release quarantine",
      title: `Drop the quarantined entry of ${d.job_id}?`,
      text: <Text>The job may run again. The entry's bytes are shown once released.</Text>,
      danger: true,
    });
  if (d.intent && d.streaming === false)
    // a batch job has no batch boundary: a stop or a cancel both terminate its spark-submit
    out.push({
      action: "cancel",
      label: "Cancel job",
      title: `Cancel ${d.job_id} at once?`,
      text: (
        <>
          <Text>Its spark-submit is terminated and the job records CANCELED; its next run computes it again.</Text>
          {d.holder_state?.state === "task_gone" && (
            <Text>
              Its task is gone: left alone, the task's retry adopts this application's output when it finishes.
            </Text>
          )}
        </>
      ),
      danger: true,
    });
  else if (d.intent) {
    out.push({
      action: "stop",
      label: "Stop stream",
      title: `Stop the stream ${d.job_id}?`,
      text: <Text>It stops at its next batch boundary and records STOPPED.</Text>,
    });
    out.push({
      action: "cancel",
      label: "Cancel stream",
      title: `Cancel the stream ${d.job_id} at once?`,
      text: <Text>The batch in flight is aborted; the job records CANCELED.</Text>,
      danger: true,
    });
  }
  return out;
}

export function JobDetailView({ d, onChanged, lead }: { d: Detail; onChanged: () => void; lead?: ReactNode }) {
  const [open, setOpen] = useState<ActionSpec | null>(null);
  const [done, setDone] = useState<string>();
  const e = d.entry;
  const actions = actionsFor(d);
  const ran = e ? ranSeconds(e) : null;
  const runs = d.links?.runs ?? [];

  return (
    <Stack gap={4} data-testid="job-detail" data-job-id={d.job_id}>
      {lead}
      <HStack gap={3} wrap="wrap">
        <Heading size="lg" fontFamily="mono" wordBreak="break-all">
          <Copyable value={d.job_id} label="job id" />
        </Heading>
        {e ? (
          <StateBadge state={e.state} label={STATE_WORDS[e.state] ?? e.state} />
        ) : (
          <StateBadge
            state={d.quarantined ? "quarantined" : "missing"}
            label={d.quarantined ? "quarantined" : "no result"}
          />
        )}
        {e && <StateBadge state={e.status} />}
        {d.running && <StateBadge state="running" />}
      </HStack>

      {done && <Notice status="success">{done}</Notice>}
      <Running d={d} />
      {d.problem && <ErrorAlert title={`This entry cannot be read (${d.problem.error})`} error={d.problem.detail} />}
      {e?.error && <ErrorAlert title={`The job ended ${e.status}`} error={e.error} />}

      {e && (
        <DataList.Root orientation="horizontal" size="sm" data-testid="facts">
          <DataList.Item>
            <DataList.ItemLabel>Produced by</DataList.ItemLabel>
            <DataList.ItemValue>{e.attempt ? <AttemptLinks attempt={e.attempt} /> : "unknown"}</DataList.ItemValue>
          </DataList.Item>
          <DataList.Item>
            <DataList.ItemLabel>Recorded</DataList.ItemLabel>
            <DataList.ItemValue>
              <When iso={e.created_at} />
              {ran !== null ? (
                <Text as="span" color="fg.muted" ms={2}>
                  (ran {ran} s)
                </Text>
              ) : null}
            </DataList.ItemValue>
          </DataList.Item>
          <DataList.Item>
            <DataList.ItemLabel>Spark</DataList.ItemLabel>
            <DataList.ItemValue>
              <SparkLink url={e.spark_url ?? d.links?.spark_ui} applicationId={e.application_id} />
            </DataList.ItemValue>
          </DataList.Item>
          {e.fingerprint && (
            <DataList.Item>
              <DataList.ItemLabel>Fingerprint</DataList.ItemLabel>
              <DataList.ItemValue>
                <Copyable value={e.fingerprint} label="fingerprint" />
              </DataList.ItemValue>
            </DataList.Item>
          )}
          {e.fence != null && (
            <DataList.Item>
              <DataList.ItemLabel>Fence</DataList.ItemLabel>
              <DataList.ItemValue>{e.fence}</DataList.ItemValue>
            </DataList.Item>
          )}
          {runs.length > 0 && (
            <DataList.Item>
              <DataList.ItemLabel>Runs</DataList.ItemLabel>
              <DataList.ItemValue>
                <Wrap gap={2}>
                  {runs.map((r) =>
                    r.url.startsWith("http") ? (
                      <ExternalLink key={r.run_id} href={r.url}>
                        {r.run_id}
                      </ExternalLink>
                    ) : (
                      <AirflowLink key={r.run_id} to={runPath(r.dag_id ?? e.attempt?.dag_id ?? "", r.run_id)}>
                        {r.run_id}
                      </AirflowLink>
                    ),
                  )}
                </Wrap>
              </DataList.ItemValue>
            </DataList.Item>
          )}
        </DataList.Root>
      )}

      {actions.length > 0 && (
        <HStack gap={2} wrap="wrap" data-testid="actions">
          {actions.map((a) => (
            <Button
              key={a.action}
              size="sm"
              variant="outline"
              colorPalette={a.danger ? "red" : undefined}
              data-action={a.action}
              onClick={() => setOpen(a)}
            >
              {a.label}
            </Button>
          ))}
        </HStack>
      )}
      {!d.can_edit && e && (
        <Text fontSize="sm" color="fg.muted">
          You may read this job but not act on it (that needs edit access to its DAG).
        </Text>
      )}

      {e && (
        <Section title="Outputs">
          <Outputs entry={e} />
        </Section>
      )}
      {e && (
        <Section title="Metrics">
          <Metrics metrics={e.metrics} />
        </Section>
      )}
      <RecoveryStory d={d} />
      <Section title="History (newest first)">
        <History items={d.history} />
      </Section>
      <Box>
        <Raw label="Raw JSON of this job" value={d} />
      </Box>

      <ConfirmDialog
        open={open !== null}
        title={open?.title ?? ""}
        typed={d.job_id}
        typedLabel="the job id"
        confirmLabel={open?.label ?? ""}
        danger={open?.danger}
        onClose={() => setOpen(null)}
        onConfirm={async () => {
          if (!open) return;
          const res = await act(d.job_id, open.action, open.extra);
          setDone(`${open.label}: ${res.message ?? res.done} (${absolute(new Date().toISOString())})`);
          onChanged();
        }}
      >
        {open?.text}
      </ConfirmDialog>
    </Stack>
  );
}
