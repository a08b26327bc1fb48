/**
 * Airflow-like confirmation: a Chakra dialog (the host's look, its dark mode, focus trapped,
 * Escape closes) in which the person types the name of what they act on. The API asks for the
 * same name in the body (``{"confirm": job_id}``), so a stray click on the wrong row cannot act.
 */
import { Button, CloseButton, Dialog, Field, Input, Portal, Stack, Text } from "@chakra-ui/react";
import { type ReactNode, useState } from "react";

import { ErrorAlert } from "./common";

export interface ConfirmProps {
  open: boolean;
  title: string;
  /** What happens, in words. */
  children: ReactNode;
  /** What the person must type to confirm (the job id); ``null``: a plain confirm. */
  typed: string | null;
  typedLabel?: string;
  confirmLabel: string;
  danger?: boolean;
  onClose: () => void;
  /** Runs the action; a rejection is shown in the dialog, in words. */
  onConfirm: () => Promise<void>;
}

export function ConfirmDialog(props: ConfirmProps) {
  const { open, title, children, typed, typedLabel, confirmLabel, danger, onClose, onConfirm } = props;
  const [value, setValue] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error>();
  // Each opening starts afresh: reset while rendering the opening (React's "adjusting state when
  // a prop changes"), not in an effect, which would first paint the last opening's text and error.
  const [wasOpen, setWasOpen] = useState(open);
  if (open !== wasOpen) {
    setWasOpen(open);
    if (open) {
      setValue("");
      setError(undefined);
      setBusy(false);
    }
  }

  const ready = typed === null || value.trim() === typed;
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await onConfirm();
      onClose();
    } catch (err) {
      setError(err as Error);
    } finally {
      setBusy(false);
    }
  };

  return (
    <Dialog.Root open={open} onOpenChange={(e) => !e.open && !busy && onClose()} role="alertdialog" size="md">
      <Portal>
        <Dialog.Backdrop />
        <Dialog.Positioner>
          <Dialog.Content data-testid="confirm-dialog">
            <Dialog.Header>
              <Dialog.Title>{title}</Dialog.Title>
            </Dialog.Header>
            <Dialog.Body>
              <Stack gap={4}>
                <Stack gap={2} fontSize="sm">
                  {children}
                </Stack>
                {typed !== null && (
                  <Field.Root>
                    <Field.Label>
                      Type{" "}
                      <Text as="span" fontFamily="mono" fontWeight="bold">
                        {typed}
                      </Text>{" "}
                      to confirm
                      {typedLabel ? ` (${typedLabel})` : ""}
                    </Field.Label>
                    <Input
                      autoFocus
                      data-testid="confirm-input"
                      fontFamily="mono"
                      value={value}
                      onChange={(e) => setValue(e.target.value)}
                      onKeyDown={(e) => e.key === "Enter" && ready && !busy && void run()}
                    />
                  </Field.Root>
                )}
                <ErrorAlert title={`${confirmLabel} failed`} error={error} />
              </Stack>
            </Dialog.Body>
            <Dialog.Footer>
              <Button variant="outline" onClick={onClose} disabled={busy} data-confirm="no">
                Back
              </Button>
              <Button
                colorPalette={danger ? "red" : "blue"}
                disabled={!ready}
                loading={busy}
                onClick={() => void run()}
                data-confirm="yes"
              >
                {confirmLabel}
              </Button>
            </Dialog.Footer>
            <Dialog.CloseTrigger asChild>
              <CloseButton size="sm" />
            </Dialog.CloseTrigger>
          </Dialog.Content>
        </Dialog.Positioner>
      </Portal>
    </Dialog.Root>
  );
}
