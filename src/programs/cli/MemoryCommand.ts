/**
 * `antler memory show [--agent NAME] [--user ID] [--json]` and `antler memory clear [--agent NAME] [--user ID]`:
 * what the agent remembers about the user (summaries and facts, from the memory file), and forgetting it.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as FileMemory from "../../layers/FileMemory.js"
import * as Sidecars from "../../layers/memory/Sidecars.js"
import type { Scope } from "../../services/Memory.js"
import * as MemoryDoc from "../../state/Memory.js"
import * as CliCommand from "./CliCommand.js"
import { ExitCode, fail } from "./CliCommand.js"
import * as Render from "./Render.js"

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
    // (a summary may hold line breaks, and a line of it may end with `:` as the headings do)
    const shown = body.split("\n").map((l) => Render.safeText(l))
    lines.push("", ...shown.map((l) => (l.endsWith(":") ? s.bold(l) : `  ${l}`)))
  }
  if (doc.facts.length > 0) {
    lines.push("", s.bold(`Facts (${doc.facts.length}):`))
    for (const fact of [...doc.facts].sort((a, b) => b.confidence - a.confidence)) {
      const mark = s.dim(`[${Render.safeText(MemoryDoc.categoryOf(fact))} ${fact.confidence.toFixed(2)}]`)
      lines.push(`  ${mark} ${Render.safeText(fact.content)} ${s.dim(Render.safeText(fact.id))}`)
    }
  }
  return `${lines.join("\n")}\n`
}

const scopeOptions = {
  agent: Options.text("agent").pipe(Options.optional),
  user: Options.text("user").pipe(Options.withDefault("default")),
  config: CliCommand.config
}

const SCOPE_HELP: ReadonlyArray<readonly [string, string]> = [
  ["--agent NAME", "A custom agent's own memory (default: the user's)"],
  ["--user ID", "The user (default: default)"],
  CliCommand.CONFIG_HELP
]

const fileFor = (args: {
  readonly agent: Option.Option<string>
  readonly user: string
  readonly config: Option.Option<string>
}) =>
  Effect.gen(function*() {
    const app = yield* CliCommand.loadConfig(Option.getOrUndefined(args.config))
    const scope: Scope = { userId: args.user, agentName: Option.getOrUndefined(args.agent) }
    const file = FileMemory.fileOf(FileMemory.rootOf(app), scope, app.config.memory.backend_config.manifest_filename)
    if (Either.isLeft(file)) return yield* fail(ExitCode.usage, file.left.message)
    return { app, file: file.right, scope }
  })

const show: CliCommand.Entry = {
  name: "show",
  command: Command.make("show", { ...scopeOptions, json: CliCommand.json }, (args) =>
    Effect.gen(function*() {
      const { app, file } = yield* fileFor(args)
      // as the agent reads it: within the memory limits, without the configured keys
      const limits = FileMemory.limitsOf(app.config.memory)
      const doc = yield* FileMemory.readDocument(file, limits, FileMemory.defaultRedactor(app)).pipe(
        Effect.catchTag("MemoryError", (error) => fail(ExitCode.runFailed, error.message))
      )
      if (args.json) yield* Render.writeJson(doc)
      else yield* Render.write(render(doc, file, Render.useColor()))
    })),
  help: {
    summary: "Show what the agent remembers about the user",
    usage: ["memory show [--agent NAME] [--user ID] [--config FILE] [--json]"],
    description: "The summaries and facts the agent keeps across threads (memory.json in the data directory), as " +
      "the agent reads them: within the memory limits (memory.backend_config max_facts, max_fact_chars, " +
      "max_summary_chars) and without the configured keys.",
    options: [...SCOPE_HELP, ["--json", "Print the memory file as JSON"]],
    examples: [["memory show", "What the agent knows about you"]]
  }
}

const clear: CliCommand.Entry = {
  name: "clear",
  command: Command.make("clear", scopeOptions, (args) =>
    Effect.gen(function*() {
      const { app, file, scope } = yield* fileFor(args)
      const timeout = app.config.memory.backend_config.file_lock_timeout_seconds * 1000
      // its recall records and eviction audit go with it, as DeerMem clears them
      const cleared = Effect.zipRight(FileMemory.writeDocument(file, MemoryDoc.empty()), Sidecars.clear(file, scope))
      yield* FileMemory.withLock(file, timeout, cleared).pipe(
        Effect.catchTag("MemoryError", (error) => fail(ExitCode.runFailed, error.message))
      )
      yield* Render.write(`Memory cleared: ${file}\n`)
    })),
  help: {
    summary: "Forget everything the agent remembers about the user",
    usage: ["memory clear [--agent NAME] [--user ID] [--config FILE]"],
    options: SCOPE_HELP,
    examples: [["memory clear", "Start from a blank memory"]]
  }
}

/** `antler memory`. */
export const entry: CliCommand.Entry = {
  name: "memory",
  command: Command.make("memory").pipe(Command.withSubcommands([show.command, clear.command])),
  subcommands: [show, clear],
  help: {
    summary: "The agent's long-term memory of the user: show, clear",
    usage: ["memory show [--agent NAME] [--user ID] [--json]", "memory clear [--agent NAME] [--user ID]"]
  }
}
