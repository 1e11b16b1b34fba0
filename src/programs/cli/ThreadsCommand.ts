/**
 * `antler threads list | show ID | delete ID | compact ID`: the saved threads of the data directory
 * (`ANTLER_HOME`, else `~/.antler`), the same whatever directory the command runs in.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { AppConfigService } from "../../services/AppConfig.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import * as AgentSetup from "../AgentSetup.js"
import * as App from "../App.js"
import * as Compaction from "../Compaction.js"
import * as CustomAgents from "../CustomAgents.js"
import * as Factory from "../Factory.js"
import * as CliCommand from "./CliCommand.js"
import { ExitCode, fail } from "./CliCommand.js"
import * as Render from "./Render.js"
import { runSettings } from "./RunCommand.js"

const notFound = (home: string, threadId: string) =>
  fail(
    ExitCode.runFailed,
    `No thread "${threadId}" in ${home}. List the saved threads with: ${CliCommand.invocation()} threads list`
  )

const list: CliCommand.Entry = {
  name: "list",
  command: Command.make("list", { json: CliCommand.json }, (args) =>
    CliCommand.withStore((home) =>
      Effect.gen(function*() {
        const threads = yield* (yield* ThreadStore).list
        if (args.json) return yield* Render.writeJson(threads)
        const options = { color: Render.useColor(), invocation: CliCommand.invocation() }
        yield* Render.write(Render.threadList(threads, home, options))
      })
    )),
  help: {
    summary: "List the saved threads, newest first, with their status",
    usage: ["threads list [--json]"],
    description: "One line per thread: its id, when it last changed, its status (completed, waiting for your " +
      "answer, failed, cancelled, running, stopped), its steps and its title. Threads are kept in $ANTLER_HOME, else " +
      "~/.antler, whatever the directory you run in.",
    options: [[
      "--json",
      "Print the list as one JSON array (thread_id, title, created_at, updated_at, checkpoints, status, stop_reason)"
    ]],
    examples: [["threads list", "What you talked about, and what is waiting for an answer"]]
  }
}

const show: CliCommand.Entry = {
  name: "show",
  command: Command.make("show", { id: Args.text({ name: "id" }), json: CliCommand.json }, (args) =>
    CliCommand.withStore((home) =>
      Effect.gen(function*() {
        const threadId = yield* CliCommand.threadIdFrom(args.id)
        const loaded = yield* (yield* ThreadStore).load(threadId)
        if (Option.isNone(loaded)) return yield* notFound(home, threadId)
        if (args.json) yield* Render.writeJson(loaded.value)
        else yield* Render.write(Render.thread(loaded.value, { color: Render.useColor() }))
      })
    )),
  help: {
    summary: "Show a thread: its runs, every message and tool call, title, files and token usage",
    usage: ["threads show [--json] <id>"],
    arguments: [["<id>", "The thread's id (from threads list, or printed by run)"]],
    options: [["--json", "Print the stored state as one JSON object"]],
    examples: [["threads show 7f3c…", "Read a conversation again, tool calls and results included"]]
  }
}

const remove: CliCommand.Entry = {
  name: "delete",
  command: Command.make("delete", { id: Args.text({ name: "id" }) }, (args) =>
    CliCommand.withStore((home) =>
      Effect.gen(function*() {
        const threadId = yield* CliCommand.threadIdFrom(args.id)
        const deleted = yield* Effect.catchIf(
          App.deleteThread(home, threadId),
          (error) => error.operation === "delete",
          (error) => fail(ExitCode.runFailed, error.message)
        )
        if (!deleted) return yield* notFound(home, threadId)
        yield* Render.write(`Deleted thread ${threadId} and its files.\n`)
      })
    )),
  help: {
    summary: "Delete a thread: its messages and runs, and its files (workspace, uploads, outputs)",
    usage: ["threads delete <id>"],
    description: "There is no undo. A thread whose run is in progress is not deleted (exit code 1).",
    arguments: [["<id>", "The thread's id (from threads list)"]],
    examples: [["threads delete 7f3c…", "Forget a thread and remove its files"]]
  }
}

const compactMessage = (error: Compaction.CompactionError): string => {
  switch (error.reason) {
    case "disabled":
      return "Compaction is off: set `summarization.enabled: true` in config.yaml (with `trigger: null` only " +
        "manual compaction happens)."
    case "summary_failed":
      return `No summary could be made; the thread is unchanged. ${error.errors.join("; ")}`
    default:
      return error.message
  }
}

const compact: CliCommand.Entry = {
  name: "compact",
  command: Command.make("compact", {
    id: Args.text({ name: "id" }),
    force: Options.boolean("force"),
    json: CliCommand.json,
    config: CliCommand.config,
    model: Options.text("model").pipe(Options.optional),
    baseUrl: Options.text("base-url").pipe(Options.optional),
    apiKey: Options.redacted("api-key").pipe(Options.optional),
    agent: Options.text("agent").pipe(Options.optional)
  }, (args) =>
    Effect.gen(function*() {
      const threadId = yield* CliCommand.threadIdFrom(args.id)
      const app = yield* CliCommand.loadConfig(Option.getOrUndefined(args.config))
      const { choice, env } = yield* CliCommand.chooseModel(app, args)
      const redact = App.redactor(choice.models, env, yield* App.toolSecrets(app))
      // a custom agent's thread is summarised with the agent's model, as run --agent chooses it
      const agentName = Option.getOrUndefined(args.agent)
      const custom = agentName === undefined
        ? undefined
        : yield* CustomAgents.load(app.home, "default", agentName).pipe(
          Effect.catchTag("AgentError", (error) =>
            fail(
              error.reason === "io" ? ExitCode.runFailed : ExitCode.usage,
              `--agent: ${Render.safeText(error.message, redact)}` +
                (error.reason === "not_found" ? ` ${CustomAgents.createHint(agentName, CliCommand.invocation())}` : "")
            ))
        )
      const resolved = Factory.resolve(
        choice.models,
        runSettings(choice.name, {
          modelGiven: Option.isSome(args.model) || Option.isSome(args.baseUrl),
          agent: agentName
        }),
        AgentSetup.defaultsOf(custom)
      )
      for (const warning of resolved.warnings) {
        yield* Render.writeError(`warning: ${Render.safeText(warning, redact)}\n`)
      }
      const model = yield* Effect.catchAll(App.modelService(choice), CliCommand.reportFailure("error", redact))
      yield* CliCommand.withStore((home) =>
        Effect.gen(function*() {
          const outcome = yield* Compaction.compactThread(threadId, {
            model,
            force: args.force,
            raise: true,
            modelName: resolved.modelName ?? choice.name,
            agentName: custom?.name
          }).pipe(
            Effect.catchTags({
              CompactionThreadNotFound: () => notFound(home, threadId),
              CompactionThreadBusy: (error) => fail(ExitCode.runFailed, error.message),
              CompactionError: (error) =>
                error.reason === "not_enough_messages" || error.reason === "below_trigger"
                  ? Effect.succeed(error)
                  : fail(ExitCode.runFailed, Render.safeText(compactMessage(error), redact))
            }),
            Effect.provide(Layer.succeed(AppConfigService, app))
          )
          if (outcome instanceof Compaction.CompactionError) {
            const answer = { thread_id: threadId, compacted: false, reason: outcome.reason }
            if (args.json) return yield* Render.writeJson(answer)
            return yield* Render.write(`Nothing compacted: ${outcome.message}\n`)
          }
          if (args.json) return yield* Render.writeJson(outcome)
          yield* Render.write(
            `Compacted thread ${threadId}: ${outcome.removed_message_count} older messages summarised, ` +
              `${outcome.preserved_message_count} kept (context was ${outcome.total_tokens} tokens).\n`
          )
        })
      ).pipe(Effect.catchAll(CliCommand.reportFailure("error", redact)))
    })),
  help: {
    summary: "Compact a thread: summarise its older messages, as happens when a summarization trigger fires",
    usage: [
      "threads compact [--force] [--json] [--agent NAME] [--model NAME] [--base-url URL] [--api-key KEY] " +
      "[--config FILE] <id>"
    ],
    description: "The older messages are replaced by a summary a model writes (never splitting a tool call " +
      "from its result; the latest question and the most recent skill reads stay); the next run of the thread " +
      "reads the summary and the recent messages. Follows the summarization section of config.yaml: off unless " +
      "summarization.enabled is true, and without --force only when one of its triggers fires. Nothing to " +
      "compact is not an error (exit code 0); a summary that cannot be made leaves the thread unchanged (exit " +
      "code 1). The model is chosen as run chooses it: with --agent, the custom agent's model unless --model or " +
      "--base-url is given.",
    arguments: [["<id>", "The thread's id (from threads list)"]],
    options: [
      ["--force", "Compact even when no summarization trigger fires"],
      ["--json", "Print what was done as one JSON object (compacted, reason, counts, checkpoint_id)"],
      [
        "--model NAME",
        "A model named in config.yaml, or the model id to ask for with --base-url (summarization.model_name, " +
        "when set, is asked first)"
      ],
      ["--base-url URL", "An OpenAI-compatible endpoint, such as http://localhost:11434/v1 (Ollama)"],
      [
        "--api-key KEY",
        "The key for --base-url. Visible in the process list: prefer OPENAI_API_KEY or $VAR in config.yaml"
      ],
      CliCommand.CONFIG_HELP,
      ["--agent NAME", "The thread is this custom agent's (see agents list): its model writes the summary"]
    ],
    examples: [
      ["threads compact --force 7f3c…", "Make a long conversation cheaper to continue"],
      ["threads compact --agent ada 7f3c…", "Compact a thread of your custom agent ada, with its model"]
    ]
  }
}

const subcommands = [list, show, remove, compact]

/** `antler threads`. */
export const entry: CliCommand.Entry = {
  name: "threads",
  command: Command.make("threads").pipe(
    Command.withSubcommands([list.command, show.command, remove.command, compact.command])
  ),
  subcommands,
  help: {
    summary: "The saved threads: list, show, delete, compact",
    usage: ["threads list", "threads show <id>", "threads delete <id>", "threads compact [--force] <id>"],
    description: "A thread is one conversation: its messages, tool calls and files. Threads are kept in " +
      "$ANTLER_HOME, else ~/.antler; continue one with run --thread ID, or the latest with run --continue."
  }
}
