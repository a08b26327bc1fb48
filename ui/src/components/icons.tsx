/** The few icons the views use, inline (the host's icon set is not shared with plugins). */
const base = {
  fill: "none",
  stroke: "currentColor",
  strokeWidth: 2,
  strokeLinecap: "round",
  strokeLinejoin: "round",
} as const;

export const CopyIcon = () => (
  <svg width="14" height="14" viewBox="0 0 24 24" aria-hidden="true" {...base}>
    <rect x="9" y="9" width="13" height="13" rx="2" />
    <path d="M5 15H4a2 2 0 0 1-2-2V4a2 2 0 0 1 2-2h9a2 2 0 0 1 2 2v1" />
  </svg>
);

export const CheckIcon = () => (
  <svg width="14" height="14" viewBox="0 0 24 24" aria-hidden="true" {...base}>
    <path d="M20 6 9 17l-5-5" />
  </svg>
);

export const ExternalIcon = () => (
  <svg width="12" height="12" viewBox="0 0 24 24" aria-hidden="true" {...base}>
    <path d="M15 3h6v6M10 14 21 3M18 13v6a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2V8a2 2 0 0 1 2-2h6" />
  </svg>
);
