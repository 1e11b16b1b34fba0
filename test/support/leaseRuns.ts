/**
 * What the tests of a gateway run stopped when it no longer owns its thread (its lease taken, or its life run out)
 * look at: whether its command still runs, and whether every tool call of a history has its result; and the model
 * they script.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import type { SseEvent, TestGateway } from "../programs/gateway/support.js"
import * as Support from "../programs/gateway/support.js"
import { until } from "./poll.js"
import { as } from "./requests.js"

/** Whether a process of this host runs `command` (its command line holds it). */
export const running = (command: string): boolean =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).some((pid) => {
    try {
      return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").includes(command)
    } catch {
      return false
    }
  })

/** Whether every tool call of `messages` (LangChain's serialised shape) has its result. */
export const paired = (messages: ReadonlyArray<any>): boolean => {
  const answered = new Set(messages.filter((m) => m.type === "tool").map((m) => m.tool_call_id))
  return messages.flatMap((m) => (m.type === "ai" ? m.tool_calls ?? [] : [])).every((c: any) => answered.has(c.id))
}

const WORKSPACE = "/mnt/user-data/workspace"

/**
 * The model of a run labelled `labelOf(body)`: step 1, a command that says it started, sleeps (`sleepOf(label)`,
 * unique to its run, found among the processes while it runs), then writes `after.txt`; step 2, a second command,
 * writing `second.txt`; then `<label> done`. A request with no label is answered `Next answer.`.
 */
export const twoCommands = (labelOf: (body: ChatRequestBody) => string, sleepOf: (label: string) => string) =>
(body: ChatRequestBody): Turn => {
  const label = labelOf(body)
  if (label === "") return "Next answer."
  const tools = body.messages.filter((m) => m.role === "tool").length
  if (tools === 0) {
    return {
      toolCalls: [{
        name: "bash",
        arguments: {
          description: `step one of ${label}`,
          command: `echo started > ${WORKSPACE}/started.txt; ${sleepOf(label)}; echo after > ${WORKSPACE}/after.txt`
        }
      }]
    }
  }
  if (tools === 1) {
    return {
      toolCalls: [{
        name: "bash",
        arguments: { description: `step two of ${label}`, command: `echo second > ${WORKSPACE}/second.txt` }
      }]
    }
  }
  return `${label} done`
}

/** A streamed run started by `startRun`, once its command runs. */
export interface Started {
  readonly thread: string
  /** The thread's id in the store (the run's lease is on it). */
  readonly stored: string
  readonly workspace: string
  readonly runId: string
  /** Its stream's events, and when it ended. */
  readonly stream: Promise<{ readonly events: ReadonlyArray<SseEvent>; readonly endedAt: number }>
}

/**
 * A streamed run of `label` on a new thread of `gateway`, once its command (`sleepOf(label)`) runs and its lease is
 * taken (`threadOf`: the stored thread of each run id that took a lease).
 */
export const startRun = async (
  gateway: TestGateway,
  label: string,
  sleepOf: (label: string) => string,
  threadOf: ReadonlyMap<string, string>
): Promise<Started> => {
  const thread = (await as(() => gateway)("POST", "/threads", {})).json().thread_id as string
  const response = await fetch(`${gateway.url}/threads/${thread}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: `Please do ${label}` }] },
      stream_mode: ["values", "updates"]
    })
  })
  let runId = ""
  const stream = Support.readSse(response, (event) => {
    if (event.event === "metadata") runId = (event.data as { run_id: string }).run_id
    return false
  }).then(({ events }) => ({ events, endedAt: Date.now() }))
  const workspace = Path.join(gateway.home, "users/default/threads", thread, "user-data/workspace")
  await until(() => Fs.existsSync(Path.join(workspace, "started.txt")) && running(sleepOf(label)), `${label} started`)
  await until(() => runId !== "" && threadOf.has(runId), `${label}'s run id and lease`)
  return { thread, stored: threadOf.get(runId)!, workspace, runId, stream }
}
