/**
 * Antler as a library: the lead agent in an Effect program, with a tool of the app's own and any
 * OpenAI-compatible model, one turn, its events printed as they arrive.
 *
 *   OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2 npx tsx examples/library.ts "What is 6 x 7?"
 *
 * The model comes from the environment (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`); threads are saved
 * in SQLite under `ANTLER_HOME` (default `./.antler`); the agent's file and bash tools work in the thread's
 * sandbox there.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { ConfigFile, LeadAgent, LocalSandbox, OpenAiModel, SqliteThreadStore, Tool } from "antler"
import type { Message, RunEvents } from "antler"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

// A tool of the app's own: its Schema is what the model sees, and what decodes the model's arguments.
const multiply = Tool.make({
  name: "multiply",
  description: "Multiplies two numbers exactly.",
  parameters: Schema.Struct({
    a: Schema.Number.annotations({ description: "The first factor" }),
    b: Schema.Number.annotations({ description: "The second factor" })
  }),
  handler: ({ a, b }) => Effect.succeed(`${a} × ${b} = ${a * b}`)
})

// What a person sees of a run: the answer as it streams, each tool call and its result, and how it ended.
const show = (event: RunEvents.RunEvent): Effect.Effect<void> => {
  switch (event.type) {
    case "token":
      return event.text === undefined ? Effect.void : Effect.sync(() => void process.stdout.write(event.text!))
    case "message":
      return showMessage(event.message)
    case "run_end":
      return Console.log(`\n[run_end] ${event.status} (${event.stop_reason})${event.error ? `: ${event.error.message}` : ""}`)
    default:
      return Effect.void
  }
}

const showMessage = (message: Message.Message): Effect.Effect<void> =>
  message.type === "ai" && (message.tool_calls?.length ?? 0) > 0
    ? Effect.forEach(message.tool_calls!, (call) => Console.log(`\n→ ${call.name}(${JSON.stringify(call.args)})`))
    : message.type === "tool"
    ? Console.log(`← ${typeof message.content === "string" ? message.content : JSON.stringify(message.content)}`)
    : Effect.void

const program = Effect.gen(function*() {
  const agent = yield* LeadAgent.LeadAgent
  const prompt = process.argv.slice(2).join(" ") || "What is 6 times 7? Use the multiply tool."
  yield* agent.run({ prompt }).pipe(Stream.runForEach(show))
})

// The app's services, composed once: configuration (defaults here; a config.yaml works too with
// `ConfigFile.layer()`), the thread store, the sandbox, the model, and the agent over them.
const home = process.env.ANTLER_HOME ?? ".antler"
const AppLive = LeadAgent.layer({ tools: [multiply] }).pipe(
  Layer.provide(OpenAiModel.layer()),
  Layer.provide(Layer.merge(SqliteThreadStore.layerFromHome(home), LocalSandbox.layer())),
  Layer.provide(ConfigFile.layerFromObject({}, { home }))
)

program.pipe(Effect.provide(AppLive), NodeRuntime.runMain)
