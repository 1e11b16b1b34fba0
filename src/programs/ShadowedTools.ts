/**
 * The tools of an assembly that the agent's own tools replace. A middleware's tool (`ask_clarification`, `task`,
 * `write_todos`, `tool_search`...) or a custom agent's own (`update_agent`) answers under its name, so an MCP
 * tool of the same name (a server with `tool_name_prefix: false`) never reaches the model. DeerFlow, whose
 * built-ins come before MCP tools, leaves such a tool out with a warning (issue #1803); so does Antler: the
 * report says it is left out and why, where it would otherwise show a tool the model does not get.
 */
import type { ToolDefinition } from "../services/ModelService.js"
import * as Tool from "../services/Tool.js"
import type * as ToolAssembly from "./ToolAssembly.js"

const same = (a: ToolDefinition, b: ToolDefinition): boolean =>
  a.description === b.description && JSON.stringify(a.parameters) === JSON.stringify(b.parameters)

// (the tools from outside; an app's own tool replacing a sandbox or built-in one does so on purpose)
const where = (entry: ToolAssembly.Entry): string | undefined =>
  entry.source === "mcp" ? `MCP server '${entry.server ?? "?"}'` : entry.source === "acp" ? "acp_agents" : undefined

/**
 * The assembly with each of its MCP and ACP tools that `definitions` (the agent's tools, as the model sees them)
 * hold under the same name but as another tool marked missing, with a warning naming it; the same assembly when
 * there is none.
 */
export const report = (
  assembly: ToolAssembly.Assembly,
  definitions: ReadonlyArray<ToolDefinition>
): ToolAssembly.Assembly => {
  const byName = new Map(definitions.map((d) => [d.name, d]))
  const shadowed = new Set<string>()
  for (const tool of assembly.tools) {
    const own = byName.get(tool.name)
    if (own !== undefined && !same(own, Tool.definition(tool))) shadowed.add(tool.name)
  }
  if (shadowed.size === 0) return assembly
  const warnings = [...assembly.warnings]
  const entries = assembly.entries.map((entry) => {
    const source = where(entry)
    if (source === undefined || entry.state === "missing" || !shadowed.has(entry.name)) return entry
    warnings.push(`${source}: a second tool named ${entry.name} is left out (the agent's own comes first)`)
    return { ...entry, state: "missing" as const, note: `a second ${entry.name}: the agent's own comes first` }
  })
  return { ...assembly, entries, warnings }
}
