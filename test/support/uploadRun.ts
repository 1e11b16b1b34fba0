/**
 * The probe of the attacks on a cut inside a secret the user uploaded (Attack27BashCut, Attack28BashCut,
 * Attack28GrepCut): a thread made with one file uploaded, then a run on it to its end; what the run answered and
 * what the thread keeps.
 */
import { assert } from "@effect/vitest"
import type { Answer } from "./requests.js"

/** Requests as one user (`Requests.as`). */
type User = (method: string, path: string, body?: unknown) => Promise<Answer>

/**
 * Makes `thread` with `config.txt` (holding `content`) uploaded, runs it with `body` (`POST /threads/{id}/runs/wait`,
 * or `/runs/stream`) and answers the run's answer (status 200) and the thread's state.
 */
export const uploadThenRun = async (
  user: User,
  thread: string,
  content: string,
  mode: "wait" | "stream",
  body: Record<string, unknown>
): Promise<{ readonly run: Answer; readonly state: Answer }> => {
  assert.strictEqual((await user("POST", "/threads", { thread_id: thread })).status, 200)
  const form = new FormData()
  form.append("files", new Blob([content]), "config.txt")
  const uploaded = await user("POST", `/api/threads/${thread}/uploads`, form)
  assert.strictEqual(uploaded.status, 200, uploaded.text)
  const run = await user("POST", `/threads/${thread}/runs/${mode}`, { assistant_id: "lead_agent", ...body })
  assert.strictEqual(run.status, 200, run.text.slice(0, 300))
  return { run, state: await user("GET", `/threads/${thread}/state`) }
}
