/**
 * `antler skills list [--config FILE] [--json]`: the skills the agent would find, where it looked, whether each
 * is enabled, and why a SKILL.md was rejected.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SkillsDirectory from "../layers/SkillsDirectory.js"
import type { AppConfigService } from "../services/AppConfig.js"
import type { Catalog } from "../services/Skills.js"
import type { CliExit } from "./Cli.js"
import * as Render from "./Render.js"

/** What the command uses from the CLI (passed in, so this module does not import it). */
export interface CliHelpers {
  readonly loadConfig: (path: string | undefined) => Effect.Effect<AppConfigService["Type"], CliExit>
}

/** The listing, readable. */
export const render = (
  catalog: Catalog,
  where: { readonly path: string; readonly from: string },
  extensions: string,
  color: boolean
): string => {
  const s = Render.style(color)
  const lines: Array<string> = []
  if (catalog.root === undefined) {
    lines.push(`No skills directory: looked for ${where.path} (${where.from}).`)
    lines.push(s.dim("Set skills.path in config.yaml, or put skills/public/<name>/SKILL.md next to it."))
  } else {
    const enabled = catalog.skills.filter((k) => k.enabled).length
    const counts = `${catalog.skills.length} found, ${enabled} enabled`
    lines.push(`${s.bold("skills")} in ${where.path} (${where.from}): ${counts}`)
    lines.push(s.dim(`mounted for the model at ${catalog.container}; enabled state from ${extensions}`))
    for (const skill of catalog.skills) {
      const state = skill.enabled ? s.green("enabled ") : s.yellow("disabled")
      const tools = skill.allowedTools === undefined
        ? ""
        : s.dim(`  allowed-tools: ${skill.allowedTools.join(", ") || "(none)"}`)
      lines.push(`  ${state} ${Render.safeText(skill.name)} ${s.dim(`(${skill.category})`)}  ${skill.location}${tools}`)
    }
  }
  for (const skill of catalog.shadowed) {
    lines.push(s.dim(`  replaced: ${skill.location} (a later skill has the name ${Render.safeText(skill.name)})`))
  }
  if (catalog.rejected.length > 0) {
    lines.push(s.bold(`rejected (${catalog.rejected.length})`))
    for (const r of catalog.rejected) lines.push(`  ${s.red("✗")} ${r.file}: ${Render.safeText(r.problem)}`)
  }
  for (const warning of catalog.warnings) lines.push(s.yellow(`warning: ${Render.safeText(warning)}`))
  return `${lines.join("\n")}\n`
}

/** The `skills` command, and its `list` subcommand (the CLI checks command lines against it). */
export const make = (cli: CliHelpers) => {
  const list = Command.make(
    "list",
    {
      config: Options.text("config").pipe(
        Options.optional,
        Options.withDescription("config.yaml to use (default: ANTLER_CONFIG, else ./config.yaml)")
      ),
      json: Options.boolean("json").pipe(Options.withDescription("Print JSON instead of text"))
    },
    (args) =>
      Effect.gen(function*() {
        const app = yield* cli.loadConfig(Option.getOrUndefined(args.config))
        const catalog = SkillsDirectory.catalogOf(app)
        const where = SkillsDirectory.location(app)
        const extensions = SkillsDirectory.extensionsConfigPath(app)
        if (args.json) {
          yield* Render.write(`${JSON.stringify({ ...catalog, searched: where, extensions_config: extensions })}\n`)
        } else yield* Render.write(render(catalog, where, extensions, Render.useColor()))
      })
  ).pipe(Command.withDescription("List the skills found, where, enabled or not, and why any was rejected"))
  const command = Command.make("skills").pipe(
    Command.withDescription("The agent's skills"),
    Command.withSubcommands([list])
  )
  return { command, list }
}
