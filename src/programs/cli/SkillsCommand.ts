/**
 * `antler skills list [--config FILE] [--json]`: the skills the agent would find, where it looked, whether each
 * is enabled, and why a SKILL.md was rejected.
 */
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SkillsDirectory from "../../layers/SkillsDirectory.js"
import type { Catalog } from "../../services/Skills.js"
import * as CliCommand from "./CliCommand.js"
import * as Render from "./Render.js"

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
        : s.dim(`  allowed-tools: ${Render.safeText(skill.allowedTools.join(", ")) || "(none)"}`)
      // (a skill's folder name and its SKILL.md's fields are the files': any character)
      const name = Render.safeText(skill.name)
      lines.push(`  ${state} ${name} ${s.dim(`(${skill.category})`)}  ${Render.safeText(skill.location)}${tools}`)
    }
  }
  for (const skill of catalog.shadowed) {
    const replaced = `${Render.safeText(skill.location)} (a later skill has the name ${Render.safeText(skill.name)})`
    lines.push(s.dim(`  replaced: ${replaced}`))
  }
  if (catalog.rejected.length > 0) {
    lines.push(s.bold(`rejected (${catalog.rejected.length})`))
    for (const r of catalog.rejected) {
      lines.push(`  ${s.red("✗")} ${Render.safeText(r.file)}: ${Render.safeText(r.problem)}`)
    }
  }
  for (const warning of catalog.warnings) lines.push(s.yellow(`warning: ${Render.safeText(warning)}`))
  return `${lines.join("\n")}\n`
}

const list: CliCommand.Entry = {
  name: "list",
  command: Command.make("list", { config: CliCommand.config, json: CliCommand.json }, (args) =>
    Effect.gen(function*() {
      const app = yield* CliCommand.loadConfig(Option.getOrUndefined(args.config))
      const catalog = SkillsDirectory.catalogOf(app)
      const where = SkillsDirectory.location(app)
      const extensions = SkillsDirectory.extensionsConfigPath(app)
      if (args.json) {
        yield* Render.writeJson({ ...catalog, searched: where, extensions_config: extensions })
      } else yield* Render.write(render(catalog, where, extensions, Render.useColor()))
    }).pipe(Effect.catchAll(CliCommand.reportFailure("error")))),
  help: {
    summary: "List the skills found, where, enabled or not, and why any was rejected",
    usage: ["skills list [--config FILE] [--json]"],
    description: "Skills are folders with a SKILL.md, found under skills.path (default: skills/ next to " +
      "config.yaml). A message that starts with /<skill-name> activates one for the run.",
    options: [CliCommand.CONFIG_HELP, ["--json", "Print the catalog as one JSON object"]],
    examples: [["skills list", "Which skills the agent can use"]]
  }
}

/** `antler skills`. */
export const entry: CliCommand.Entry = {
  name: "skills",
  command: Command.make("skills").pipe(Command.withSubcommands([list.command])),
  subcommands: [list],
  help: { summary: "The agent's skills: found, enabled, rejected", usage: ["skills list [--config FILE] [--json]"] }
}
