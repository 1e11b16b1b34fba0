/**
 * The process runner behind the sandbox's `bash`: bubblewrap isolation (the system view, the setup script that
 * mounts the thread's directories and drops to the unprivileged sandbox user, resource limits, and a probe),
 * the host-bash guard used when isolation is knowingly switched off, and a runner that spawns a real child
 * process, captures stdout and stderr together, enforces a timeout that kills the whole process tree, stops it
 * when a guard (a resource limit) says so, and kills it too when the calling fiber is interrupted.
 *
 * The parts live under `bash/`, one concept each: `Output` (capture and truncation), `SystemView` (what of the
 * host the sandbox shows), `Limits` (rlimits), `Setup` (the staged setup script), `Bwrap` (bubblewrap's
 * arguments), `Process` (running and supervising the child), `Probe` (whether bubblewrap works here),
 * `HostBash` (the guard for host bash) and `SkillsView` (the skills host bash sees while one is disabled).
 */
export type { BwrapInvocation, BwrapMode, BwrapSpec, Mount } from "./bash/Bwrap.js"
export { bwrapInvocation } from "./bash/Bwrap.js"
export {
  hostBashArgs,
  pathInFolders,
  rewriteHostCommand,
  shellQuote,
  SYSTEM_PREFIXES,
  validateHostCommand
} from "./bash/HostBash.js"
export type { Limits } from "./bash/Limits.js"
export { NO_LIMITS } from "./bash/Limits.js"
export {
  LineBuffer,
  middleMarker,
  middleTruncate,
  middleTruncateParts,
  OutputCollector,
  UNLIMITED_OUTPUT_CHARS
} from "./bash/Output.js"
export type { BwrapStatus } from "./bash/Probe.js"
export { probeBwrap } from "./bash/Probe.js"
export type { Guard, ProcessOutcome, ProcessSpec } from "./bash/Process.js"
export { run, wrapped } from "./bash/Process.js"
export { parseSetupStatus, removeTree, SETUP_SCRIPT, STAGE } from "./bash/Setup.js"
export { buildSkillsView } from "./bash/SkillsView.js"
export type { LayoutEntry, RootLayout } from "./bash/SystemView.js"
export { etcFiles, hostRootLayout, SANDBOX_HOSTNAME, SANDBOX_PATH, SANDBOX_USER } from "./bash/SystemView.js"
