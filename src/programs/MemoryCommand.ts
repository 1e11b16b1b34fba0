/**
 * `antler memory show [--agent NAME] [--user ID] [--json]` and `antler memory clear [--agent NAME] [--user ID]`:
 * what the agent remembers about the user (summaries and facts, from the memory file), and forgetting it.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as FileMemory from "../layers/FileMemory.js"
import type { AppConfigService } from "../services/AppConfig.js"
import type { Scope } from "../services/Memory.js"
import * as MemoryDoc from "../state/Memory.js"
import type { CliExit } from "./Cli.js"
import * as Render from "./Render.js"

/** What the command uses from the CLI (passed in, so this module does not import it). */
export interface CliHelpers {
  readonly loadConfig: (path: string | undefined) => Effect.Effect<AppConfigService["Type"], CliExit>
  /** Prints the message on stderr and ends the command with the exit code. */
  readonly fail: (code: number, message: string) => Effect.Effect<never, CliExit>
}

/** A memory document, readable. */
export const render = (doc: MemoryDoc.Document, file: string, color: boolean): string => {
  const s = Render.style(color)
  const lines = [`${s.bold("memory")} ${file}`]
  if (MemoryDoc.isEmpty(doc)) {
    lines.push(s.dim("  (nothing remembered yet)"))
    return `${lines.join("\n")}\n`
  }
  if (doc.lastUpdated !== "") lines.push(s.dim(`  updated ${doc.lastUpdated}`))
  const body = MemoryDoc.formatForInjection(doc, {
    maxTokens: Number.MAX_SAFE_INTEGER,
    count: (text) => text.length,
    guaranteedCategories: [],
    guaranteedBudget: 0,
    includeFacts: false
  })
  if (body !== "") {
    lines.push("", ...body.split("\n").map((l) => (l.endsWith(":") ? s.bold(l) : `  ${Render.safeText(l)}`)))
  }
  if (doc.facts.length > 0) {
    lines.push("", s.bold(`Facts (${doc.facts.length}):`))
    for (const fact of [...doc.facts].sort((a, b) => b.confidence - a.confidence)) {
      const mark = s.dim(`[${Render.safeText(fact.category)} ${fact.confidence.toFixed(2)}]`)
      lines.push(`  ${mark} ${Render.safeText(fact.content)} ${s.dim(fact.id)}`)
    }
  }
  return `${lines.join("\n")}\n`
}

const scopeOptions = {
  agent: Options.text("agent").pipe(
    Options.optional,
    Options.withDescription("A custom agent's own memory (default: the user's)")
  ),
  user: Options.text("user").pipe(
    Options.withDefault("default"),
    Options.withDescription("The user (default: default)")
  ),
  config: Options.text("config").pipe(
    Options.optional,
    Options.withDescription("config.yaml to use (default: ANTLER_CONFIG, else ./config.yaml)")
  )
}

/** The `memory` command, and its subcommands (the CLI checks command lines against them). */
export const make = (cli: CliHelpers) => {
  const fileFor = (args: {
    readonly agent: Option.Option<string>
    readonly user: string
    readonly config: Option.Option<string>
  }) =>
    Effect.gen(function*() {
      const app = yield* cli.loadConfig(Option.getOrUndefined(args.config))
      const scope: Scope = { userId: args.user, agentName: Option.getOrUndefined(args.agent) }
      const file = FileMemory.fileOf(FileMemory.rootOf(app), scope, app.config.memory.backend_config.manifest_filename)
      if (Either.isLeft(file)) return yield* cli.fail(2, file.left.message)
      return { app, file: file.right }
    })

  const show = Command.make(
    "show",
    { ...scopeOptions, json: Options.boolean("json").pipe(Options.withDescription("Print the memory file as JSON")) },
    (args) =>
      Effect.gen(function*() {
        const { file } = yield* fileFor(args)
        const doc = yield* FileMemory.readDocument(file).pipe(
          Effect.catchTag("MemoryError", (error) => cli.fail(1, error.message))
        )
        if (args.json) yield* Render.write(`${JSON.stringify(doc)}\n`)
        else yield* Render.write(render(doc, file, Render.useColor()))
      })
  ).pipe(Command.withDescription("Show what the agent remembers about the user"))

  const clear = Command.make("clear", scopeOptions, (args) =>
    Effect.gen(function*() {
      const { app, file } = yield* fileFor(args)
      const timeout = app.config.memory.backend_config.file_lock_timeout_seconds * 1000
      yield* FileMemory.withLock(file, timeout, FileMemory.writeDocument(file, MemoryDoc.empty())).pipe(
        Effect.catchTag("MemoryError", (error) => cli.fail(1, error.message))
      )
      yield* Render.write(`Memory cleared: ${file}\n`)
    })).pipe(Command.withDescription("Forget everything the agent remembers about the user"))

  const command = Command.make("memory").pipe(
    Command.withDescription("The agent's long-term memory of the user"),
    Command.withSubcommands([show, clear])
  )
  return { command, show, clear }
}
