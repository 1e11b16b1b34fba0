/**
 * The request secrets of the run that started an MCP task, kept for the task's life so that what its server says
 * back after that run ended (a result, an error, a question) is masked before anything keeps or shows it: the task's
 * record, its notification run, `list_background_tasks`, the thread's `background_tasks`. They are sealed in the
 * record (`SealedSecrets`: AES-256-GCM, bound to the task's user, thread and id) under a key derived from
 * `gateway.cluster.secret` when there is one (every process of the cluster opens them), else a key the process makes
 * at its start and holds in memory only (never on disk). The record drops them when its task ends. A process that
 * cannot open them (restarted without the key, another cluster secret) cannot mask what the task says: it withholds
 * that text with a notice saying why (`withheld`), never keeps it unmasked.
 */
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import * as SkillSecrets from "../../../services/SkillSecrets.js"
import type { TaskRecord } from "../../../services/McpTasks.js"
import * as Redact from "../../../state/Redact.js"
import type { Snapshot } from "../../../layers/mcp/TaskDriver.js"
import * as SealedSecrets from "../cluster/SealedSecrets.js"

/** The key tasks' secrets are sealed under: the cluster's shared secret, or one of this process's own. */
export interface Key {
  readonly secret: Redacted.Redacted<string>
  /** Whether other processes (a cluster's, a restarted one configured alike) have it too. */
  readonly shared: boolean
}

/** The key of a process: from `gateway.cluster.secret` when set, else a random one held in memory. */
export const keyOf = (clusterSecret: Redacted.Redacted<string> | undefined): Key =>
  clusterSecret === undefined
    ? { secret: Redacted.make(Crypto.randomBytes(32).toString("base64url")), shared: false }
    : { secret: clusterSecret, shared: true }

const ownerOf = (task: Pick<TaskRecord, "id" | "user_id" | "thread_id">): SealedSecrets.Owner => ({
  userId: task.user_id,
  threadId: task.thread_id,
  runId: `mcp-task:${task.id}`
})

/** The run's secrets sealed for `task` (none, or none long enough to be masked: null). */
export const seal = (
  key: Key,
  task: Pick<TaskRecord, "id" | "user_id" | "thread_id">,
  secrets: SkillSecrets.RequestSecrets | undefined
): string | null => {
  if (secrets === undefined || Redact.make(Redacted.value(secrets).values()).secrets.length === 0) return null
  return SealedSecrets.seal(key.secret, ownerOf(task), secrets)
}

/** How a task's answers are made safe to keep: masked by a redactor, or withheld (the notice says why). */
export type Guard = Either.Either<Redact.Redactor, string>

/** The guard of `task`'s answers: `base`, with the run's secrets when it was given any (see the module's header). */
export const guardOf = (key: Key, task: TaskRecord, base: Redact.Redactor): Guard => {
  const sealed = task.sealed_secrets
  if (sealed === null || sealed === undefined) return Either.right(base)
  return Either.match(SealedSecrets.open(key.secret, ownerOf(task), sealed), {
    onLeft: () =>
      Either.left(
        "[withheld: this MCP task was started by a run given request secrets, and this gateway process cannot open " +
          "them to mask what the task says (" +
          (key.shared
            ? "they were sealed under another gateway.cluster.secret, or changed"
            : "they were sealed with the in-memory key of the gateway process that started the task, which has " +
              "stopped; set gateway.cluster.secret to keep them across restarts") +
          "), so its text is not kept]"
      ),
    // (as the run's own redactor masks them: each line of one of several lines too)
    onRight: (secrets) => Either.right(SkillSecrets.runRedactor(base, secrets))
  })
}

/** A snapshot as `guard` keeps it: masked, or every text the server gave replaced by the notice. */
export const guarded = (guard: Guard, snapshot: Snapshot): Snapshot =>
  Either.match(guard, {
    onRight: (redact) => redact.value(snapshot),
    onLeft: (notice) => ({
      ...snapshot,
      result: null,
      result_preview: snapshot.result === null && snapshot.result_preview === null ? null : notice,
      result_truncated: false,
      result_artifact: null,
      error: snapshot.error === null ? null : notice,
      input_required: snapshot.input_required === null ? null : { withheld: notice }
    })
  })

/**
 * An error text (a failed poll's) as `guard` keeps it; the driver cuts a server's error text, maybe inside a secret,
 * whose beginning at its end is hidden too (`Redact.Redactor.last`).
 */
export const guardedText = (guard: Guard, text: string): string =>
  Either.match(guard, { onRight: (redact) => redact.last(text), onLeft: (notice) => notice })
