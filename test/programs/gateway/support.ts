/**
 * A gateway for tests: `Gateway.layer` on 127.0.0.1 (a free port) over a SCRIPTED Chat Completions server,
 * reached through the real `openai` client, with its data in a temp directory. Also an SSE reader for plain
 * `fetch` clients.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import { Client } from "@langchain/langgraph-sdk"
import type { SpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Yaml from "yaml"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import * as App from "../../../src/programs/App.js"
import * as Gateway from "../../../src/programs/gateway/Gateway.js"
import * as Runs from "../../../src/programs/gateway/Runs.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import { messageText } from "../../support/modelRequests.js"

/** The scripted server of a test gateway. */
export class Scripted extends Context.Tag("test/Scripted")<Scripted, ScriptedChatServer.ScriptedChatServer>() {}

/** A running test gateway. */
export interface TestGateway {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly home: string
  readonly scripted: ScriptedChatServer.ScriptedChatServer
  readonly store: ThreadStore["Type"]
  readonly runs: Runs.Service
  readonly stop: () => Promise<void>
}

/** Options of `start`. */
export interface StartOptions {
  readonly script: ScriptedChatServer.Script
  readonly server?: ScriptedChatServer.Options
  /** More of `config.yaml` (merged over the test's defaults), or a function of the scripted server's URL. */
  readonly config?: Record<string, unknown> | ((url: string) => Record<string, unknown>)
  readonly home?: string
  readonly spanProcessor?: SpanProcessor
  /** Where the configuration says it was read from (files beside it: extensions_config.json, skills/). */
  readonly source?: string
  /**
   * The configuration is written to this file (YAML) and read from it, as `antler serve --config` reads it; with
   * `reload`, its edits are taken for the next runs (looked for at every run: `recheckMs` 0).
   */
  readonly file?: string
  readonly reload?: boolean
  /** The gateway's logger (`captureLogs`'s). */
  readonly logger?: Layer.Layer<never>
  /** References the gateway's layers are built with (a test's shorter life of something: `Context.Reference`s). */
  readonly references?: Layer.Layer<never>
  /**
   * The thread store the gateway is given, of the configured one: a test watching or failing what the gateway asks
   * of it wraps it.
   */
  readonly wrapStore?: (configured: ThreadStore["Type"]) => ThreadStore["Type"]
}

/** A fresh temp directory. */
export const tempDir = (prefix: string) => Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix)))

/** A model of `config.yaml` named `name` over the scripted server at `url` (several of one server in a test). */
export const scriptedModel = (name: string, url: string) => ({
  name,
  model: `model-${name}`,
  base_url: url,
  api_key: "sk-test-scripted-key-000000"
})

/** A run's input of one user message. */
export const userInput = (content: string) => ({ messages: [{ role: "user", content }] })

/** The test's defaults: fast retries, no title model, no summaries. */
export const baseConfig = (url: string): Record<string, unknown> => ({
  models: [{ name: "scripted", model: "scripted", base_url: url, api_key: "sk-test-scripted-key-000000" }],
  llm_call: { retry_base_delay_ms: 5, retry_cap_delay_ms: 10, burst_retry_base_delay_ms: 5 },
  sandbox: { allow_host_bash: false },
  gateway: { heartbeat_seconds: 1 },
  // tests that are not about memory: no memory update call after a run
  memory: { enabled: false }
})

/** Starts a gateway (stopped with `stop`). */
export const start = async (options: StartOptions): Promise<TestGateway> => {
  const home = options.home ?? tempDir("antler-gw-")
  const layer = Layer.unwrapScoped(Effect.gen(function*() {
    const scripted = yield* ScriptedChatServer.start(options.script, options.server)
    const base = baseConfig(scripted.url)
    const more = typeof options.config === "function" ? options.config(scripted.url) : options.config
    const file = options.file
    if (file !== undefined) Fs.writeFileSync(file, Yaml.stringify({ ...base, ...more }))
    const app = file !== undefined
      ? yield* ConfigFile.loadFile(file, home)
      : yield* ConfigFile.fromObject({ ...base, ...more }, { home, source: options.source })
    const wrap = options.wrapStore
    return Gateway.layer({
      app,
      ...(wrap !== undefined
        ? {
          store: Layer.map(Gateway.storeLayer(app), (context) =>
            Context.add(context, ThreadStore, wrap(Context.get(context, ThreadStore))))
        }
        : {}),
      choice: Either.getOrThrow(App.chooseModel(app.config.models, {}, {})),
      host: "127.0.0.1",
      port: 0,
      ...(options.spanProcessor !== undefined ? { spanProcessor: options.spanProcessor } : {}),
      ...(options.reload === true
        ? { reload: { choose: (config) => App.chooseModel(config.models, {}, {}), recheckMs: 0 } }
        : {})
    }).pipe(Layer.merge(Layer.succeed(Scripted, scripted)))
  }))
  const logged = options.logger === undefined ? layer : Layer.provide(layer, options.logger)
  const runtime = ManagedRuntime.make(
    options.references === undefined ? logged : Layer.provide(logged, options.references)
  )
  const { address, scripted, store, runs } = await runtime.runPromise(Effect.gen(function*() {
    return {
      address: (yield* HttpServer.HttpServer).address,
      scripted: yield* Scripted,
      store: yield* ThreadStore,
      runs: yield* Runs.Runs
    }
  }))
  if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
  return {
    url: `http://127.0.0.1:${address.port}`,
    home,
    scripted,
    store,
    runs,
    stop: () => runtime.dispose()
  }
}

/** One server-sent event. */
export interface SseEvent {
  readonly event: string
  readonly id: string | undefined
  readonly data: unknown
}

/** A block of an SSE stream: a comment (the gateway's heartbeat) or an event. */
export type SseBlock = { readonly heartbeat: true } | { readonly heartbeat: false; readonly event: SseEvent }

/** A fetch response's SSE blocks as they come; the body is cancelled when the reader stops early. */
export async function* sseBlocks(response: Response): AsyncGenerator<SseBlock> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      buffer += value
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        if (block.startsWith(":")) {
          yield { heartbeat: true }
          continue
        }
        let event = ""
        let id: string | undefined
        const data: Array<string> = []
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) event = line.slice(7)
          else if (line.startsWith("data: ")) data.push(line.slice(6))
          else if (line.startsWith("id: ")) id = line.slice(4)
        }
        yield { heartbeat: false, event: { event, id, data: data.length > 0 ? JSON.parse(data.join("\n")) : null } }
      }
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
}

/** Reads SSE events from a fetch response until it ends (or `stop` says so); comments are counted. */
export const readSse = async (
  response: Response,
  stop: (event: SseEvent, all: ReadonlyArray<SseEvent>) => boolean = () => false
): Promise<{ events: ReadonlyArray<SseEvent>; comments: number }> => {
  const events: Array<SseEvent> = []
  let comments = 0
  for await (const block of sseBlocks(response)) {
    if (block.heartbeat) {
      comments++
      continue
    }
    events.push(block.event)
    if (stop(block.event, events)) break
  }
  return { events, comments }
}

/** The messages of a state that a user sees: hidden ones (the date reminder of a thread's first turn) left out. */
export const visible = (messages: ReadonlyArray<any>): ReadonlyArray<any> =>
  messages.filter((m) => m.additional_kwargs?.hide_from_ui !== true)

/**
 * A state's values without what `/history` adds to its newest state's messages (each answer's `run_id`, a run's
 * `turn_duration`): the state as stored.
 */
export const unstamped = (values: any): any => ({
  ...values,
  messages: values.messages.map(({ run_id: _run, ...message }: any) => {
    if (message.additional_kwargs === undefined) return message
    const { turn_duration: _duration, ...kwargs } = message.additional_kwargs
    return { ...message, additional_kwargs: kwargs }
  })
})

/** The types of the messages a user sees. */
export const visibleTypes = (messages: ReadonlyArray<any>): ReadonlyArray<string> => visible(messages).map((m) => m.type)

/** The tokens of a test gateway's two users, alice and bob (see `twoUsers`). */
export const ALICE = "alice-token-0123456789abcdef"
export const BOB = "bob-token-0123456789abcdef00"

/** `gateway:` settings with the two token users alice and bob (and a short heartbeat). */
export const twoUsers = {
  heartbeat_seconds: 1,
  auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] }
}

/**
 * A test gateway of the two token users whose configuration names a second model, `other`, with `key` as its api key
 * (and `config` beside): one of the process's own secrets, which the model adapter of a run on `scripted` does not
 * hold (the secret-cut attacks).
 */
export const startWithOtherKey = (script: StartOptions["script"], key: string, config: Record<string, unknown> = {}) =>
  start({
    script,
    config: (url: string) => ({
      models: [scriptedModel("scripted", url), { ...scriptedModel("other", url), api_key: key }],
      gateway: twoUsers,
      ...config
    })
  })

/**
 * A test gateway with the two token users alice and bob (and `config` beside them), and an SDK client for each.
 */
export const startTwoUsers = async (
  script: StartOptions["script"],
  config: Record<string, unknown> = {}
): Promise<{ readonly gateway: TestGateway; readonly alice: Client; readonly bob: Client }> => {
  const gateway = await start({ script, config: { gateway: twoUsers, ...config } })
  return {
    gateway,
    alice: new Client({ apiUrl: gateway.url, apiKey: ALICE }),
    bob: new Client({ apiUrl: gateway.url, apiKey: BOB })
  }
}

/**
 * A test gateway with the two token users alice and bob over the MCP servers `mcpServers` (the extensions_config.json
 * beside its configuration, no skills), `options.config` merged beside the users.
 */
export const startOverMcp = (
  prefix: string,
  mcpServers: Record<string, unknown>,
  options: Omit<StartOptions, "source" | "config"> & { readonly config?: Record<string, unknown> }
): Promise<TestGateway> => {
  const dir = tempDir(prefix)
  Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({ mcpServers, skills: {} }))
  return start({ ...options, source: Path.join(dir, "config.yaml"), config: { gateway: twoUsers, ...options.config } })
}

/** The text of the last user message a scripted model was sent. */
export const lastUserText = (body: ScriptedChatServer.ChatRequestBody): string => {
  return messageText(body.messages.filter((m) => m.role === "user").at(-1) ?? {})
}

/** What a new thread's first run sent the model: its system prompt's text and the names of the tools offered. */
export const firstRequestOf = async (gateway: TestGateway): Promise<{ system: string; tools: Array<string> }> => {
  const client = new Client({ apiUrl: gateway.url })
  const thread = await client.threads.create()
  const before = gateway.scripted.requests.length
  await client.runs.wait(thread.thread_id, "lead_agent", { input: userInput("hi") })
  const request = gateway.scripted.requests[before]!
  return {
    system: messageText(request.messages.find((m) => m.role === "system") ?? {}),
    tools: (request.tools ?? []).map((t: any) => t.function?.name)
  }
}

/** A script that echoes the user's last message, and stalls (streams "working", then nothing) when it says "hang". */
export const echoOrHang = (body: ScriptedChatServer.ChatRequestBody): ScriptedChatServer.Turn => {
  const text = lastUserText(body)
  if (text.includes("hang")) return { content: "working", stall: true }
  return `You said: ${text}`
}

/** The HTTP status an SDK call failed with (none when it succeeded). */
export const statusOf = (call: Promise<unknown>): Promise<number | undefined> =>
  call.then(() => undefined, (error) => (error as { status?: number }).status)

/**
 * The index among `gateways` of the one whose runner executes run `runId`, once its model was asked `asked` (a
 * cluster's run, its answer stalled there, its first words sent).
 */
export const runnerAsked = async (gateways: ReadonlyArray<TestGateway>, runId: string, asked: string) => {
  for (let i = 0; i < 400; i++) {
    const owner = gateways.findIndex((g) =>
      g.runs.get(runId)?.finished() === false && g.scripted.requests.some((r) => JSON.stringify(r).includes(asked))
    )
    if (owner >= 0) return (await new Promise((resolve) => setTimeout(resolve, 200)), owner)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`run ${runId} never asked the model "${asked}"`)
}
