/**
 * The thread store a run given request secrets (`RunOptions.secrets`) writes through: its checkpoints and its
 * records kept with every value hidden (itself, URL-encoded, JSON-escaped, hex or base64: `Redact.make`, `encoded`).
 * A tool's result is masked before the thread sees it, but the model may write a value out (one it decoded from a
 * form nothing masks), and the store hides only the process's secrets: the thread, its history and the database kept
 * it, where the run's stream hid it.
 */
import * as Effect from "effect/Effect"
import * as Redact from "../state/Redact.js"
import * as SkillSecrets from "../services/SkillSecrets.js"
import type { ThreadStore } from "../services/ThreadStore.js"

/**
 * `store` writing nothing that holds one of `secrets`' values, nor a line of one of several lines (as a tool's result
 * masks them: `SkillSecrets.maskedTexts`); `store` itself when there are none to hide.
 */
export const hiding = (
  store: ThreadStore["Type"],
  secrets: SkillSecrets.RequestSecrets | undefined
): ThreadStore["Type"] => {
  // (the run's redactor without the process's secrets, which the store below hides already)
  const redact = SkillSecrets.runRedactor(Redact.make(), secrets)
  if (redact.secrets.length === 0) return store
  const updatesOf = <A>(updates: A): A => redact.value(updates)
  return {
    ...store,
    append: (threadId, runId, updates, options) =>
      Effect.suspend(() => store.append(threadId, runId, updatesOf(updates), options)),
    appendMeasured: (threadId, runId, updates, local, options) =>
      Effect.suspend(() => store.appendMeasured(threadId, runId, updatesOf(updates), local, options)),
    saveRun: (run) => Effect.suspend(() => store.saveRun(redact.value(run)))
  }
}
