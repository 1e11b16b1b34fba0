import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { ConfigFile, LeadAgent, LocalSandbox, OpenAiModel, SqliteThreadStore, Tool } from "antler"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

// A tool of the app's own: its Schema is what the model sees, and what decodes the model's arguments.
const multiply = Tool.make({
  name: "multiply",
  description: "Multiplies two numbers exactly.",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(`${a} × ${b} = ${a * b}`)
})

const program = Effect.gen(function*() {
  const agent = yield* LeadAgent.LeadAgent
  yield* agent.run({ prompt: "What is 6 times 7? Use the multiply tool." }).pipe(
    Stream.runForEach((event) => Console.log(event.type))
  )
})

// The model from OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL; threads and sandboxes under ./.antler.
const AppLive = LeadAgent.layer({ tools: [multiply] }).pipe(
  Layer.provide(OpenAiModel.layer()),
  Layer.provide(Layer.merge(SqliteThreadStore.layerFromHome(".antler"), LocalSandbox.layer())),
  Layer.provide(ConfigFile.layerFromObject({}, { home: ".antler" }))
)

program.pipe(Effect.provide(AppLive), NodeRuntime.runMain)
