/**
 * Small pieces every view shares, built from the host's Chakra UI so they look like Airflow's:
 * state badges, copy buttons, relative times, links into Airflow's own pages, error alerts and
 * the collapsed "raw JSON" section (raw data only when someone asks for it).
 */
import {
  Alert,
  Badge,
  Box,
  Clipboard,
  Code,
  Collapsible,
  HStack,
  IconButton,
  Link,
  Spinner,
  Text,
} from "@chakra-ui/react";
import type { ReactNode } from "react";
import { Link as RouterLink } from "react-router-dom";

import type { Attempt } from "../api";
import { absolute, relative } from "../time";
import { paletteOf, runPath, tiPath } from "./format";
import { CheckIcon, CopyIcon, ExternalIcon } from "./icons";

export { runPath, STATE_WORDS, tiPath } from "./format";

export function StateBadge({ state, label }: { state: string; label?: string }) {
  return (
    <Badge colorPalette={paletteOf(state)} variant={state === "missing" ? "outline" : "subtle"} data-state={state}>
      {label ?? state}
    </Badge>
  );
}

export function CopyButton({ value, label }: { value: string; label: string }) {
  return (
    <Clipboard.Root value={value} display="inline-flex">
      <Clipboard.Trigger asChild>
        <IconButton aria-label={`Copy ${label}`} title={`Copy ${label}`} size="2xs" variant="ghost" data-copy={label}>
          <Clipboard.Indicator copied={<CheckIcon />}>
            <CopyIcon />
          </Clipboard.Indicator>
        </IconButton>
      </Clipboard.Trigger>
    </Clipboard.Root>
  );
}

/** A value people paste elsewhere (a job id, a path, an application id), with its copy button. */
export function Copyable({ value, label, mono = true }: { value: string; label: string; mono?: boolean }) {
  return (
    <HStack gap={1} display="inline-flex" maxW="full">
      <Text as="span" fontFamily={mono ? "mono" : undefined} fontSize="sm" wordBreak="break-all">
        {value}
      </Text>
      <CopyButton value={value} label={label} />
    </HStack>
  );
}

export function When({ iso }: { iso: string | null | undefined }) {
  if (!iso)
    return (
      <Text as="span" color="fg.muted">
        –
      </Text>
    );
  return (
    <Text as="span" title={absolute(iso)} data-time={iso}>
      {relative(iso)}
    </Text>
  );
}

/** A link inside Airflow's UI: the host's router, so it navigates without reloading the page. */
export function AirflowLink({ to, children }: { to: string; children: ReactNode }) {
  return (
    <Link asChild color="fg.info">
      <RouterLink to={to}>{children}</RouterLink>
    </Link>
  );
}

export function ExternalLink({ href, children }: { href: string; children: ReactNode }) {
  return (
    <Link href={href} target="_blank" rel="noopener noreferrer" color="fg.info">
      {children} <ExternalIcon />
    </Link>
  );
}

export function AttemptLinks({ attempt }: { attempt: Attempt }) {
  return (
    <Text as="span">
      <AirflowLink to={tiPath(attempt)}>
        {attempt.dag_id} / {attempt.task_id}
        {attempt.map_index !== undefined && attempt.map_index >= 0 ? ` [${attempt.map_index}]` : ""}
      </AirflowLink>{" "}
      in run <AirflowLink to={runPath(attempt.dag_id, attempt.run_id)}>{attempt.run_id}</AirflowLink> (try{" "}
      {attempt.try_number})
    </Text>
  );
}

export function SparkLink({ url, applicationId }: { url: string | null | undefined; applicationId?: string }) {
  if (!applicationId)
    return (
      <Text as="span" color="fg.muted">
        –
      </Text>
    );
  if (url && /^https?:\/\//.test(url)) return <ExternalLink href={url}>{applicationId}</ExternalLink>;
  return <Copyable value={applicationId} label="application id" />;
}

export function ErrorAlert({ title, error }: { title: string; error: Error | string | undefined }) {
  if (!error) return null;
  return (
    <Alert.Root status="error" data-testid="error">
      <Alert.Indicator />
      <Alert.Content>
        <Alert.Title>{title}</Alert.Title>
        <Alert.Description>{typeof error === "string" ? error : error.message}</Alert.Description>
      </Alert.Content>
    </Alert.Root>
  );
}

export function Notice({ status, children }: { status: "info" | "success" | "warning"; children: ReactNode }) {
  return (
    <Alert.Root status={status} data-testid={`notice-${status}`}>
      <Alert.Indicator />
      <Alert.Description>{children}</Alert.Description>
    </Alert.Root>
  );
}

export function Loading() {
  return (
    <HStack color="fg.muted" py={4}>
      <Spinner size="sm" />
      <Text>Loading…</Text>
    </HStack>
  );
}

/** Raw data, collapsed: for the one who needs the exact members, out of everyone else's way. */
export function Raw({ label = "Raw JSON", value }: { label?: string; value: unknown }) {
  if (value === null || value === undefined) return null;
  return (
    <Collapsible.Root>
      <Collapsible.Trigger asChild>
        <Link as="button" fontSize="xs" color="fg.muted" data-raw-toggle={label}>
          {label} ▸
        </Link>
      </Collapsible.Trigger>
      <Collapsible.Content>
        <Box position="relative" mt={1}>
          <Box position="absolute" right={1} top={1}>
            <CopyButton value={JSON.stringify(value, null, 2)} label={label} />
          </Box>
          <Code as="pre" display="block" whiteSpace="pre-wrap" wordBreak="break-all" p={3} fontSize="xs" w="full">
            {JSON.stringify(value, null, 2)}
          </Code>
        </Box>
      </Collapsible.Content>
    </Collapsible.Root>
  );
}
