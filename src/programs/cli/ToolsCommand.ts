/**
 * `antler tools list [--model NAME] [--config FILE] [--json]`: every tool the lead agent would get, where it
 * comes from (configured, sandbox, built-in, MCP server, middleware), which are deferred behind `tool_search`,
 * which configured tools are left out and why, and what each MCP server is doing. The agent is built as a run
 * would build it (MCP servers are started to list their tools, and stopped at the end); no model is called.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as LocalSandbox from "../../layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../layers/MemoryThreadStore.js"
import { AppConfigService } from "../../services/AppConfig.js"
import type { ServerStatus } from "../../services/Mcp.js"
import { Mcp } from "../../services/Mcp.js"
import { ModelError, ModelService } from "../../services/ModelService.js"
import type * as Redact from "../../state/Redact.js"
import * as App from "../App.js"
import * as CliCommand from "./CliCommand.js"
import * as Factory from "../Factory.js"
import * as Render from "./Render.js"
import * as ToolAssembly from "../ToolAssembly.js"

/** One tool of the report. */
export interface Row {
  readonly name: string
  /** `config`, `sandbox`, `builtin`, `mcp`, or `middleware` (ask_clarification, tool_search...). */
  readonly source: ToolAssembly.Source | "middleware"
  readonly state: "available" | "deferred" | "missing"
  readonly group?: string | undefined
  readonly use?: string | undefined
  readonly server?: string | undefined
  readonly note?: string | undefined
}

/** What `tools list` shows. */
export interface Report {
  /** The model the listing is for (vision decides `view_image`). */
  readonly model: string | undefined
  /** The tools the agent gets, in the order the model sees them. */
  readonly tools: ReadonlyArray<Row>
  /** Configured tools that are left out, with why. */
  readonly missing: ReadonlyArray<Row>
  readonly servers: ReadonlyArray<ServerStatus>
  readonly warnings: ReadonlyArray<string>
}

// Never called: listing builds the agent but runs nothing.
const noModel = Layer.succeed(ModelService, {
  generate: () =>
    Effect.fail(new ModelError({ reason: "other", errorType: "NoModel", message: "tools list calls no model" }))
})

/**
 * Builds the agent for `model` (default: the first configured) and reports its tools. `redact`: the process's secrets,
 * hidden in what the agent and its MCP servers cut (a failed start's error) before the cut.
 */
export const report = (app: AppConfigService["Type"], model: string | undefined, redact?: Redact.Redactor) =>
  Effect.gen(function*() {
    const factory = yield* Factory.AgentFactory
    // (as the CLI's runs are: an admin's)
    const resolved = yield* factory.resolve(model === undefined ? {} : { model_name: model }, undefined, true)
    const agent = yield* factory.agent(resolved)
    const assembly = yield* factory.tools(resolved)
    const mcp = yield* Effect.serviceOption(Mcp)
    const servers = Option.isSome(mcp) ? yield* mcp.value.status : []
    const known = new Map(assembly.entries.filter((e) => e.state !== "missing").map((e) => [e.name, e]))
    const tools = agent.tools.map((definition): Row => {
      const entry = known.get(definition.name)
      return entry === undefined ? { name: definition.name, source: "middleware", state: "available" } : { ...entry }
    })
    // a server's problem is told once, under its server, not again among the warnings
    const told = new Set(servers.flatMap((server) => server.problems))
    return {
      model: resolved.modelName,
      tools,
      missing: assembly.entries.filter((e) => e.state === "missing"),
      servers: servers.map((server) => ({ ...server, problems: [...new Set(server.problems)] })),
      warnings: [...new Set([...resolved.warnings, ...assembly.warnings])].filter((warning) => !told.has(warning))
    } satisfies Report
  }).pipe(
    Effect.provide(
      Factory.layer({ models: app.config.models, requireModel: false, redact }).pipe(
        Layer.provide(noModel),
        Layer.provideMerge(App.mcpLayer(app, redact)),
        Layer.provideMerge(Layer.mergeAll(
          Layer.succeed(AppConfigService, app),
          MemoryThreadStore.layer(),
          LocalSandbox.layer().pipe(Layer.provide(Layer.succeed(AppConfigService, app)))
        ))
      )
    )
  )

const pad = (text: string, width: number) => (text.length >= width ? `${text} ` : text.padEnd(width))

const sourceText = (row: Row) =>
  row.source === "mcp" ? `mcp:${row.server ?? "?"}` : row.source === "builtin" ? "built-in" : row.source

/** The report as text. */
export const render = (
  r: Report,
  options: { readonly color: boolean; readonly redact?: Redact.Redactor | undefined }
): string => {
  const s = Render.style(options.color)
  const clean = (text: string) => Render.safeText(text, options.redact)
  const width = Math.min(40, Math.max(12, ...[...r.tools, ...r.missing].map((row) => row.name.length + 2)))
  const line = (row: Row) =>
    (`  ${pad(clean(row.name), width)}${pad(clean(sourceText(row)), 16)}${pad(clean(row.group ?? ""), 12)}` +
      `${row.state === "deferred" ? "deferred: " : ""}${clean(row.note ?? "")}`).trimEnd()
  const out: Array<string> = []
  const forModel = r.model !== undefined ? ` (model ${clean(r.model)})` : ""
  out.push(s.bold(`Tools the agent gets${forModel}: ${r.tools.length}`))
  out.push(...r.tools.map(line))
  if (r.missing.length > 0) {
    out.push("", s.bold(`Left out: ${r.missing.length}`))
    out.push(...r.missing.map(line))
  }
  if (r.servers.length > 0) {
    out.push("", s.bold("MCP servers:"))
    for (const server of r.servers) {
      const tools = server.state === "running" ? `, ${server.tools} tool${server.tools === 1 ? "" : "s"}` : ""
      out.push(`  ${pad(clean(server.name), width)}${pad(server.transport, 16)}${server.state}${tools}`)
      for (const problem of server.problems) out.push(`    ${clean(problem)}`)
    }
  }
  if (r.warnings.length > 0) {
    out.push("", s.bold("Warnings:"))
    out.push(...r.warnings.map((w) => `  ${clean(w)}`))
  }
  return `${out.join("\n")}\n`
}

const list: CliCommand.Entry = {
  name: "list",
  command: Command.make(
    "list",
    { model: Options.text("model").pipe(Options.optional), config: CliCommand.config, json: CliCommand.json },
    (args) =>
      Effect.gen(function*() {
        const app = yield* CliCommand.loadConfig(Option.getOrUndefined(args.config))
        yield* CliCommand.checkTools(app)
        const secrets = yield* App.toolSecrets(app)
        const redact = App.redactor(app.config.models, {}, secrets)
        const result = yield* Effect.scoped(report(app, Option.getOrUndefined(args.model), redact))
        if (args.json) yield* Render.write(`${Render.safeText(JSON.stringify(result), redact)}\n`)
        else yield* Render.write(render(result, { color: Render.useColor(), redact }))
      }).pipe(Effect.catchAll(CliCommand.reportFailure("error")))
  ),
  help: {
    summary: "Show every tool the agent would get, where it comes from, and why any is missing",
    usage: ["tools list [--model NAME] [--config FILE] [--json]"],
    description: "Lists the tools in the order the model sees them, with where each comes from (config, sandbox, " +
      "built-in, mcp:SERVER, middleware), which MCP tools are deferred behind tool_search, which configured tools " +
      "are left out and why, and what each MCP server is doing. MCP servers are started to list their tools, then " +
      "stopped. No model is called.",
    options: [
      ["--model NAME", "List for this configured model (a vision model adds view_image)"],
      CliCommand.CONFIG_HELP,
      ["--json", "Print the report as one JSON object"]
    ],
    examples: [["tools list", "What the agent can do with this configuration"]]
  }
}

/** `antler tools`. */
export const entry: CliCommand.Entry = {
  name: "tools",
  command: Command.make("tools").pipe(Command.withSubcommands([list.command])),
  subcommands: [list],
  help: {
    summary: "The agent's tools: where each comes from, and why any is missing",
    usage: ["tools list [--model NAME] [--config FILE] [--json]"]
  }
}
