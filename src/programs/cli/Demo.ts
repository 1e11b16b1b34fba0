/**
 * `antler demo`: a complete run, fully offline. A SCRIPTED model answers from a loopback Chat Completions
 * server (it replays a script, it does not think), reached through the real OpenAI client; the run goes
 * through the lead agent and the real sandbox tools (it writes a file in the thread's workspace and reads it
 * back) and is saved to the real thread store under `ANTLER_HOME`. A second turn continues the same thread.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ConfigFile from "../../layers/ConfigFile.js"
import * as OpenAiModel from "../../layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../layers/ScriptedChatServer.js"
import { defaults } from "../../services/AppConfig.js"
import { ModelService } from "../../services/ModelService.js"
import { threadPaths, WORKSPACE } from "../../services/Sandbox.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import * as M from "../../state/Message.js"
import * as App from "../App.js"
import * as LeadAgent from "../LeadAgent.js"
import * as Render from "./Render.js"

// ---------------------------------------------------------------------------------------------------------
// The script

/** The two requests the demo makes, on one thread. */
export const PROMPTS = [
  "Make me a short packing list for a weekend hike and save it as packing-list.md.",
  "Add a headlamp to the list."
] as const

/** The file the scripted model writes, as the model sees it. */
export const FILE = `${WORKSPACE}/packing-list.md`

type Body = ScriptedChatServer.ChatRequestBody
type WireMessage = Body["messages"][number]
type WireCall = { readonly id?: unknown; readonly function?: { readonly name?: unknown } }

const textOf = (message: WireMessage): string => {
  const content = message.content
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.map((part) => (typeof part?.text === "string" ? part.text : "")).join("\n")
}

/**
 * Where the conversation stands: which of the demo's requests is being answered, and the name and result of
 * the tool the model called last for it (none yet at the start of a turn). Messages the harness injects
 * (reminders, context) are skipped: only the demo's own requests, the model's calls and their results count.
 */
export const progress = (body: Body): { readonly turn: number; readonly tool?: { name: string; result: string } } => {
  const messages = body.messages
  let request = -1
  let turn = 0
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!
    if (m.role !== "user") continue
    const index = PROMPTS.findIndex((prompt) => textOf(m).includes(prompt))
    if (index >= 0) {
      request = i
      turn = index
    }
  }
  for (let i = messages.length - 1; i > request; i--) {
    const m = messages[i]!
    const calls: ReadonlyArray<WireCall> = Array.isArray(m.tool_calls) ? m.tool_calls : []
    if (m.role !== "assistant" || calls.length === 0) continue
    const call = calls[0]!
    const result = messages.slice(i + 1).find((r) => r.role === "tool" && r.tool_call_id === call.id)
    if (result === undefined) return { turn }
    return { turn, tool: { name: String(call.function?.name ?? ""), result: textOf(result) } }
  }
  return { turn }
}

/** The `- item` lines of a markdown list. */
export const items = (text: string): ReadonlyArray<string> =>
  text.split("\n")
    .map((line) => /^\s*- (.+)$/.exec(line)?.[1]?.trim())
    .filter((item): item is string => item !== undefined)

const readBack = { description: "Read the list back to check it", path: FILE }

/**
 * The SCRIPTED model. Asked for the list, it writes the file, reads it back, and answers from what it read;
 * asked to add an item, it appends it, reads the file again and answers from that. The answers are built
 * from the tool results, so what the user sees is what the tools really did.
 */
export const script: ScriptedChatServer.Script = (body) => {
  const { tool, turn } = progress(body)
  if (tool === undefined) {
    return turn === 0
      ? {
        content: "I'll write the list to your workspace. ",
        toolCalls: [{
          name: "write_file",
          arguments: {
            description: "Save the packing list",
            path: FILE,
            content: "# Weekend hike\n\n- water (2 litres)\n- rain jacket\n- map and compass\n"
          }
        }]
      }
      : {
        content: "Adding it to the end of the list. ",
        toolCalls: [{
          name: "write_file",
          arguments: { description: "Add a headlamp", path: FILE, content: "- headlamp\n", append: true }
        }]
      }
  }
  if (tool.name === "write_file") {
    if (tool.result.startsWith("Error")) return `I could not save the file: ${tool.result}`
    return { content: "Saved. Reading it back to check. ", toolCalls: [{ name: "read_file", arguments: readBack }] }
  }
  if (tool.result.startsWith("Error")) return `I could not read the file back: ${tool.result}`
  const list = items(tool.result)
  return `${FILE} now has ${list.length} items: ${list.join(", ")}.`
}

// ---------------------------------------------------------------------------------------------------------
// The demo

/**
 * Runs the demo; returns the exit code (0 when both turns succeed). `invocation` is how the user runs Antler
 * here (`antler`, `npx antler`), for the commands it suggests at the end.
 */
export const run = (invocation = "antler") => Effect.scoped(Effect.gen(function*() {
  const color = Render.useColor()
  const s = Render.style(color)
  const home = yield* ConfigFile.home
  const server = yield* ScriptedChatServer.start(script, { model: "scripted-demo" })
  const notice = "This demo uses a SCRIPTED model on a local server; no real model is called."
  yield* Render.write(`${s.yellow(s.bold(notice))}\n`)
  yield* Render.write(s.dim(
    `The script replays fixed answers from ${server.url} through the real OpenAI client;\n` +
      `the run goes through the lead agent, the real sandbox tools and the real thread store.\n\n`
  ))
  const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "demo-no-key", model: "scripted-demo" })
  // The demo ignores config.yaml: a configured title or summary model must not reach a real endpoint.
  const app = { config: defaults(), source: undefined, home, ignored: [] }
  const threadId = `demo-${M.newId().slice(0, 8)}`

  return yield* Effect.gen(function*() {
    const agent = yield* LeadAgent.LeadAgent
    for (const [i, prompt] of PROMPTS.entries()) {
      yield* Render.write(`${i > 0 ? "\n" : ""}${s.bold("you:")} ${prompt}\n`)
      const runId = M.newId()
      const events = agent.run({ threadId, runId, prompt })
      const options = { json: false, threadId, runId, model: "the scripted model", invocation }
      const { end } = yield* Render.run(events, options)
      if (end.status !== "success") return 1
    }
    const store = yield* ThreadStore
    const saved = yield* store.load(threadId)
    const messages = Option.match(saved, { onNone: () => 0, onSome: (t) => t.state.messages.length })
    yield* Render.write([
      "",
      `Saved: thread ${threadId} (${messages} messages, ${server.requests.length} model calls) in ` +
      App.storeLocation(home),
      `Data:         ${home}  (threads, uploads, files; set ANTLER_HOME to use another directory)`,
      `Inspect it:   ${invocation} threads show ${threadId}`,
      `All threads:  ${invocation} threads list`,
      `The file:     ${threadPaths(home, "default", threadId).workspace}/packing-list.md`,
      `Continue it:  ${invocation} run --thread ${threadId} "..."  (needs a real model: see ${invocation} run --help)`,
      ""
    ].join("\n"))
    return 0
  }).pipe(
    Effect.provide(LeadAgent.layer().pipe(
      Layer.provide(Layer.succeed(ModelService, model)),
      Layer.provideMerge(App.layer(app))
    ))
  )
}))
