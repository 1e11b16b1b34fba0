/**
 * `antler agents`: custom agents from the command line.
 *
 *   antler agents list [--json]
 *   antler agents show NAME [--json]
 *   antler agents create NAME [MESSAGE...] [--thread ID] [--model NAME] [--base-url URL] [--api-key KEY]
 *                        [--config FILE]
 *
 * `create` is a conversation with the bootstrap agent (the `bootstrap` skill and `setup_agent`): each line read
 * from stdin is one turn; it ends when the agent has been written (exit 0), or when stdin ends first (exit 1,
 * with how to continue). Then `antler run --agent NAME "..."` runs it. Also: the run settings of
 * `antler run --agent NAME --subagents`.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Readline from "node:readline"
import type { AppConfigService } from "../services/AppConfig.js"
import type { RunEndEvent } from "../services/RunEvents.js"
import * as M from "../state/Message.js"
import * as Redact from "../state/Redact.js"
import * as App from "./App.js"
import * as CustomAgents from "./CustomAgents.js"
import * as Factory from "./Factory.js"
import * as Render from "./Render.js"

/** The settings of `antler run`: the model (unless a custom agent chooses its own), the agent, subagents. */
export const runSettings = (
  modelName: string,
  flags: { readonly model?: string | undefined; readonly agent?: string | undefined; readonly subagents?: boolean }
): Record<string, unknown> => ({
  ...(flags.agent === undefined || flags.model !== undefined ? { model_name: modelName } : {}),
  ...(flags.agent !== undefined ? { agent_name: flags.agent } : {}),
  ...(flags.subagents === true ? { subagent_enabled: true } : {})
})

/** What the command needs from the CLI (its exit codes, config loading and error reporting). */
export interface Support<E> {
  readonly exitCode: { readonly ok: number; readonly runFailed: number; readonly usage: number }
  readonly fail: (code: number, message: string) => Effect.Effect<never, E>
  readonly exit: (code: number) => Effect.Effect<never, E>
  readonly loadConfig: (path: string | undefined) => Effect.Effect<AppConfigService["Type"], E>
  /** The data directory, checked. */
  readonly home: Effect.Effect<string, E>
  readonly threadIdFrom: (value: string) => Effect.Effect<string, E>
  readonly reportFailure: (what: string, redact?: Redact.Redactor) => (error: unknown) => Effect.Effect<never, E>
  readonly exitCodeOf: (end: RunEndEvent) => number
}

const firstLine = (text: string) => text.trim().split("\n")[0] ?? ""

const summary = (agent: CustomAgents.CustomAgent): string => {
  const c = agent.config
  const list = (v: ReadonlyArray<string> | null | undefined) =>
    v == null ? "all" : v.length === 0 ? "none" : v.join(", ")
  return `model: ${c.model ?? "default"} · tool groups: ${list(c.tool_groups)} · skills: ${list(c.skills)}` +
    (agent.legacy ? " · shared layout (read-only)" : "")
}

/** The `agents` command and its subcommands (for the CLI's command-line check). */
export const make = <E>(support: Support<E>) => {
  const json = Options.boolean("json").pipe(Options.withDescription("Print JSON instead of text"))
  const nameArg = Args.text({ name: "name" }).pipe(Args.withDescription("The agent's name (letters, digits and '-')"))
  const checkName = (name: string) =>
    CustomAgents.AGENT_NAME.test(name)
      ? Effect.succeed(name)
      : support.fail(support.exitCode.usage, `Invalid agent name "${name}": names are letters, digits and '-'.`)

  const list = Command.make("list", { json }, (args) =>
    Effect.gen(function*() {
      const home = yield* support.home
      const { agents, problems } = yield* CustomAgents.list(home, "default")
      for (const problem of problems) yield* Render.writeError(`warning: ${Render.safeText(problem.message)}\n`)
      if (args.json) {
        const rows = agents.map((a) => ({ name: a.name, config: a.raw, legacy: a.legacy }))
        return yield* Render.write(`${JSON.stringify(rows)}\n`)
      }
      const s = Render.style(Render.useColor())
      if (agents.length === 0) {
        return yield* Render.write(`No custom agents yet in ${home}. Create one with: antler agents create NAME\n`)
      }
      const width = Math.max(...agents.map((a) => a.name.length))
      for (const agent of agents) {
        const description = Render.safeText(firstLine(agent.config.description)) || s.dim("(no description)")
        const details = s.dim(Render.safeText(summary(agent)))
        yield* Render.write(`${agent.name.padEnd(width)}  ${description}\n${" ".repeat(width)}  ${details}\n`)
      }
    })).pipe(Command.withDescription("List your custom agents"))

  const show = Command.make("show", { name: nameArg, json }, (args) =>
    Effect.gen(function*() {
      const home = yield* support.home
      const name = yield* checkName(args.name)
      const agent = yield* CustomAgents.load(home, "default", name).pipe(
        Effect.catchTag("AgentError", (error) =>
          support.fail(
            error.reason === "invalid_config" ? support.exitCode.usage : support.exitCode.runFailed,
            Render.safeText(error.message)
          ))
      )
      if (args.json) {
        const shown = { name, config: agent.raw, soul: agent.soul ?? null, legacy: agent.legacy, dir: agent.dir }
        return yield* Render.write(`${JSON.stringify(shown)}\n`)
      }
      const s = Render.style(Render.useColor())
      const lines = [
        `${s.bold("agent")} ${name}`,
        `${s.bold("description")}  ${Render.safeText(agent.config.description) || s.dim("(none)")}`,
        s.dim(Render.safeText(summary(agent))),
        s.dim(agent.dir),
        s.bold("SOUL.md"),
        agent.soul === undefined
          ? s.dim("  (none)")
          : Render.safeText(agent.soul).split("\n").map((l) => `  ${l}`).join("\n")
      ]
      yield* Render.write(`${lines.join("\n")}\n`)
    })).pipe(Command.withDescription("Show a custom agent: its settings and its SOUL.md"))

  const create = Command.make(
    "create",
    {
      name: nameArg,
      message: Args.text({ name: "message" }).pipe(
        Args.repeated,
        Args.withDescription("Your first message (else it is read from stdin, like the next ones)")
      ),
      thread: Options.text("thread").pipe(Options.optional, Options.withDescription("Continue this conversation")),
      model: Options.text("model").pipe(Options.optional, Options.withDescription("A configured model name")),
      baseUrl: Options.text("base-url").pipe(
        Options.optional,
        Options.withDescription("An OpenAI-compatible endpoint")
      ),
      apiKey: Options.redacted("api-key").pipe(Options.optional, Options.withDescription("The API key for --base-url")),
      config: Options.text("config").pipe(Options.optional, Options.withDescription("config.yaml to use"))
    },
    (args) =>
      Effect.gen(function*() {
        const app = yield* support.loadConfig(Option.getOrUndefined(args.config))
        const name = yield* checkName(args.name)
        const existing = yield* Effect.either(CustomAgents.load(app.home, "default", name))
        if (Either.isRight(existing) || existing.left.reason !== "not_found") {
          return yield* support.fail(
            support.exitCode.usage,
            `An agent named "${name}" already exists (${CustomAgents.agentDir(app.home, "default", name).dir}). ` +
              `Talk to it with: antler run --agent ${name} "..." (it can change itself), or remove that directory.`
          )
        }
        const threadId = Option.isSome(args.thread) ? yield* support.threadIdFrom(args.thread.value) : M.newId()
        const env = yield* App.openAiEnv
        const choice = yield* Either.match(
          App.chooseModel(app.config.models, {
            model: Option.getOrUndefined(args.model),
            baseUrl: Option.getOrUndefined(args.baseUrl),
            apiKey: Option.getOrUndefined(Option.map(args.apiKey, Redacted.value))
          }, env),
          { onLeft: (error) => support.fail(support.exitCode.usage, error.message), onRight: Effect.succeed }
        )
        const redact = App.redactor(choice.models, env)
        const settings = { model_name: choice.name, is_bootstrap: true, agent_name: name }
        const interactive = process.stdin.isTTY === true
        const s = Render.style(Render.useColor())

        const conversation = Effect.gen(function*() {
          const factory = yield* Factory.AgentFactory
          const reader = yield* Effect.acquireRelease(
            Effect.sync(() => {
              const rl = Readline.createInterface({ input: process.stdin, terminal: false })
              return { rl, lines: rl[Symbol.asyncIterator]() }
            }),
            ({ rl }) => Effect.sync(() => rl.close())
          )
          const readLine = Effect.zipRight(
            interactive ? Render.write(s.cyan("> ")) : Effect.void,
            Effect.promise(() => reader.lines.next())
          ).pipe(Effect.map((r) => (r.done === true ? undefined : String(r.value))))
          yield* Render.write(s.dim(
            `Creating the agent ${name} with the bootstrap agent (thread ${threadId}). Answer its questions; ` +
              `Ctrl-D ends without creating it.\n`
          ))
          let first: string | undefined = args.message.length > 0 ? args.message.join(" ") : undefined
          for (;;) {
            const line = first ?? (yield* readLine)
            first = undefined
            if (line === undefined || line.trim() === "") break
            const runId = M.newId()
            const end = yield* Render.run(
              factory.run({ threadId, runId, prompt: line, settings }),
              { json: false, threadId, runId, redact }
            )
            if (end.status !== "success" && end.status !== "interrupted") return support.exitCodeOf(end)
            const created = yield* Effect.either(CustomAgents.load(app.home, "default", name))
            if (Either.isRight(created)) {
              yield* Render.write(s.green(`Agent ${name} created in ${created.right.dir}.\n`))
              yield* Render.write(`Run it with: antler run --agent ${name} "<your message>"\n`)
              return support.exitCode.ok
            }
          }
          yield* Render.writeError(
            `The conversation ended before the agent was created. Continue it with: ` +
              `antler agents create ${name} --thread ${threadId}\n`
          )
          return support.exitCode.runFailed
        }).pipe(Effect.scoped)

        const code = yield* conversation.pipe(
          Effect.provide(App.factoryLayer(app, choice, {}, redact)),
          Effect.catchAll(support.reportFailure("error", redact))
        )
        if (code !== support.exitCode.ok) return yield* support.exit(code)
      })
  ).pipe(Command.withDescription("Create a custom agent by talking with the bootstrap agent"))

  const command = Command.make("agents").pipe(
    Command.withDescription("Custom agents"),
    Command.withSubcommands([list, show, create])
  )
  return { command, subcommands: [["list", list], ["show", show], ["create", create]] as const }
}
