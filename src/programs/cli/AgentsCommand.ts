/**
 * `antler agents`: custom agents from the command line.
 *
 *   antler agents list [--json]
 *   antler agents show NAME [--json]
 *   antler agents create NAME [MESSAGE...] [--thread ID] [--model NAME] [--base-url URL] [--api-key KEY]
 *                        [--config FILE] [--verbose]
 *
 * `create` is a conversation with the bootstrap agent (the `bootstrap` skill and `setup_agent`): the first
 * message comes from the words after the name (or stdin), each next line read from stdin is one more turn; it
 * ends when the agent has been written (exit 0), or when stdin ends first (exit 1, with how to continue). Then
 * `antler run --agent NAME "..."` runs it.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Readline from "node:readline"
import * as ConfigFile from "../../layers/ConfigFile.js"
import { Memory } from "../../services/Memory.js"
import * as M from "../../state/Message.js"
import * as App from "../App.js"
import * as CliCommand from "./CliCommand.js"
import { CliExit, ExitCode, fail } from "./CliCommand.js"
import * as CustomAgents from "../CustomAgents.js"
import * as Factory from "../Factory.js"
import * as Render from "./Render.js"

const firstLine = (text: string) => text.trim().split("\n")[0] ?? ""

const summary = (agent: CustomAgents.CustomAgent): string => {
  const c = agent.config
  const list = (v: ReadonlyArray<string> | null | undefined) =>
    v == null ? "all" : v.length === 0 ? "none" : v.join(", ")
  return `model: ${c.model ?? "default"} · tool groups: ${list(c.tool_groups)} · skills: ${list(c.skills)}` +
    (agent.legacy ? " · shared layout (read-only)" : "")
}

const home = Effect.flatMap(ConfigFile.home, CliCommand.dataHome)

const nameArg = Args.text({ name: "name" })

const checkName = (name: string) => {
  const problem = CustomAgents.nameProblem(name)
  return problem === undefined
    ? Effect.succeed(name)
    : fail(ExitCode.usage, `Invalid agent name "${Render.safeText(name)}": ${problem}.`)
}

// ---------------------------------------------------------------------------------------------------------
// agents list

const list: CliCommand.Entry = {
  name: "list",
  command: Command.make("list", { json: CliCommand.json }, (args) =>
    Effect.gen(function*() {
      const dir = yield* home
      const { agents, problems } = yield* CustomAgents.list(dir, "default")
      for (const problem of problems) yield* Render.writeError(`warning: ${Render.safeText(problem.message)}\n`)
      if (args.json) {
        const rows = agents.map((a) => ({ name: a.name, config: a.raw, legacy: a.legacy }))
        return yield* Render.writeJson(rows)
      }
      const s = Render.style(Render.useColor())
      if (agents.length === 0) {
        return yield* Render.write(
          `No custom agents yet in ${dir}. Create one with: ${CliCommand.invocation()} agents create NAME\n`
        )
      }
      const width = Math.max(...agents.map((a) => a.name.length))
      for (const agent of agents) {
        const description = Render.safeText(firstLine(agent.config.description)) || s.dim("(no description)")
        const details = s.dim(Render.safeText(summary(agent)))
        yield* Render.write(`${agent.name.padEnd(width)}  ${description}\n${" ".repeat(width)}  ${details}\n`)
      }
    }).pipe(Effect.catchAll(CliCommand.reportFailure("error")))),
  help: {
    summary: "List your custom agents",
    usage: ["agents list [--json]"],
    description: "The custom agents in the data directory (agents/<name>/config.yaml and SOUL.md under " +
      "$ANTLER_HOME, default ~/.antler), with their description, model, tool groups and skills.",
    options: [["--json", "Print the agents as one JSON array (name, settings as written, legacy layout)"]],
    examples: [["agents list", "Which agents you have"]]
  }
}

// ---------------------------------------------------------------------------------------------------------
// agents show

const show: CliCommand.Entry = {
  name: "show",
  command: Command.make("show", { name: nameArg, json: CliCommand.json }, (args) =>
    Effect.gen(function*() {
      const dir = yield* home
      const name = yield* checkName(args.name)
      const agent = yield* CustomAgents.load(dir, "default", name).pipe(
        Effect.catchTag("AgentError", (error) =>
          fail(
            error.reason === "invalid_config" ? ExitCode.usage : ExitCode.runFailed,
            Render.safeText(error.message) +
              (error.reason === "not_found" ? ` ${CustomAgents.createHint(name, CliCommand.invocation())}` : "")
          ))
      )
      if (args.json) {
        const shown = { name, config: agent.raw, soul: agent.soul ?? null, legacy: agent.legacy, dir: agent.dir }
        return yield* Render.writeJson(shown)
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
    }).pipe(Effect.catchAll(CliCommand.reportFailure("error")))),
  help: {
    summary: "Show a custom agent: its settings and its SOUL.md",
    usage: ["agents show NAME [--json]"],
    arguments: [["NAME", "The agent's name (letters, digits and '-'), as agents list shows it"]],
    options: [["--json", "Print the agent as JSON: name, settings as written, SOUL.md text, directory"]],
    examples: [["agents show ada", "What ada is told to be, and with which model and tools"]]
  }
}

// ---------------------------------------------------------------------------------------------------------
// agents create

const createCommand = Command.make(
  "create",
  {
    name: nameArg,
    message: Args.text({ name: "message" }).pipe(Args.repeated),
    thread: Options.text("thread").pipe(Options.optional),
    model: Options.text("model").pipe(Options.optional),
    baseUrl: Options.text("base-url").pipe(Options.optional),
    apiKey: Options.redacted("api-key").pipe(Options.optional),
    config: CliCommand.config,
    verbose: Options.boolean("verbose")
  },
  (args) =>
    Effect.gen(function*() {
      const name = yield* checkName(args.name)
      const given = Option.isSome(args.thread)
        ? Option.some(yield* CliCommand.threadIdFrom(args.thread.value))
        : Option.none<string>()
      const app = yield* CliCommand.loadConfig(Option.getOrUndefined(args.config))
      yield* CliCommand.checkTools(app)
      const existing = yield* Effect.either(CustomAgents.load(app.home, "default", name))
      if (Either.isRight(existing) || existing.left.reason !== "not_found") {
        const { dir } = yield* CustomAgents.agentDir(app.home, "default", name)
        return yield* fail(
          ExitCode.usage,
          `An agent named "${name}" already exists (${dir}). ` +
            `Talk to it with: ${CliCommand.invocation()} run --agent ${name} "..." (it can change itself), or ` +
            "remove that directory."
        )
      }
      const threadId = Option.getOrElse(given, M.newId)
      const { choice, env } = yield* CliCommand.chooseModel(app, args)
      const secrets = yield* App.toolSecrets(app)
      const redact = App.redactor(choice.models, env, secrets)
      const invocation = CliCommand.invocation()
      const settings: Factory.RunSettings = { model_name: choice.name, is_bootstrap: true, agent_name: name }
      const interactive = process.stdin.isTTY === true
      const s = Render.style(Render.useColor())

      const conversation = Effect.gen(function*() {
        const factory = yield* Factory.AgentFactory
        // the bootstrap agent is built before anything is printed: a configuration error exits 2
        yield* Effect.flatMap(factory.resolve(settings, undefined, true), factory.agent)
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
            "an empty line or Ctrl-D ends without creating it.\n"
        ))
        let first: string | undefined = args.message.length > 0 ? args.message.join(" ") : undefined
        let code: number = ExitCode.runFailed
        for (;;) {
          const line = first ?? (yield* readLine)
          first = undefined
          if (line === undefined || line.trim() === "") break
          const runId = M.newId()
          const outcome = yield* Render.run(
            factory.run({ threadId, runId, prompt: line, settings, admin: true }),
            { json: false, threadId, runId, redact, verbose: args.verbose, model: choice.model, invocation }
          )
          const end = outcome.end
          if (end.status !== "success" && end.status !== "interrupted") {
            code = CliCommand.exitCodeOf(end)
            break
          }
          const created = yield* Effect.either(CustomAgents.load(app.home, "default", name))
          if (Either.isRight(created)) {
            yield* Render.write(s.green(`Agent ${name} created in ${created.right.dir}.\n`))
            yield* Render.write(`Run it with: ${invocation} run --agent ${name} "<your message>"\n`)
            code = ExitCode.ok
            break
          }
        }
        if (code === ExitCode.runFailed) {
          yield* Render.writeError(
            "The conversation ended before the agent was created. Continue it with: " +
              `${invocation} agents create ${name} --thread ${threadId}\n`
          )
        }
        // the process ends here: the memory update of the conversation is made now
        const memory = yield* Memory
        if ((yield* memory.pending) > 0) yield* memory.flush
        return code
      }).pipe(Effect.scoped)

      const code = yield* conversation.pipe(
        Effect.provide(App.factoryLayer(app, choice, {}, redact)),
        CliCommand.withCleanLogs(redact, { quiet: !args.verbose, home: app.home }),
        CliCommand.reportAgentFailures(app, redact, "error", "Invalid run settings")
      )
      if (code !== ExitCode.ok) return yield* Effect.fail(new CliExit({ code }))
    })
)

const create: CliCommand.Entry = {
  name: "create",
  command: createCommand,
  help: {
    summary: "Create a custom agent by talking with the bootstrap agent",
    usage: ["agents create NAME [options] [<message>...]"],
    description: "A conversation with the bootstrap agent, which asks what the new agent should be like and " +
      "then writes it (agents/NAME/config.yaml and SOUL.md in the data directory) with its setup_agent tool. " +
      "Your first message is the words after NAME (or the first line of stdin); every further line of stdin is " +
      "your next message. The conversation ends when the agent has been created (exit 0), or at an empty line " +
      "or the end of stdin (exit 1; continue it later with --thread). Then run it with run --agent NAME.",
    arguments: [
      ["NAME", "The new agent's name: letters, digits and '-' (an existing agent is not overwritten)"],
      ["<message>...", "Your first message to the bootstrap agent (default: read from stdin)"]
    ],
    options: [
      ["--thread ID", "Continue an earlier create conversation (its thread id was printed when it started)"],
      ["--model NAME", "A model named in config.yaml, or the model id to ask for with --base-url"],
      ["--base-url URL", "An OpenAI-compatible endpoint, such as http://localhost:11434/v1 (Ollama)"],
      [
        "--api-key KEY",
        "The key for --base-url. Visible in the process list: prefer OPENAI_API_KEY or $VAR in config.yaml"
      ],
      CliCommand.CONFIG_HELP,
      ["--verbose", "Also show each tool call's full arguments, every event's raw data and the log lines"]
    ],
    examples: [
      ["agents create ada \"A research assistant who cites sources\"", "Start creating ada; answer on stdin"],
      ["agents create ada --thread 5f0c2d1e \"Yes, that is right\"", "Continue a conversation that was cut short"]
    ]
  }
}

/** `antler agents`. */
export const entry: CliCommand.Entry = {
  name: "agents",
  command: Command.make("agents").pipe(Command.withSubcommands([list.command, show.command, create.command])),
  subcommands: [list, show, create],
  help: {
    summary: "Your custom agents: list, show, create (by conversation)",
    usage: ["agents list [--json]", "agents show NAME [--json]", "agents create NAME [options] [<message>...]"],
    description: "A custom agent has its own SOUL.md (personality), model, tool groups and skills, and can " +
      "change itself with update_agent. Run one with run --agent NAME."
  }
}
