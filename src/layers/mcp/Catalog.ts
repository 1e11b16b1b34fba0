/**
 * The MCP catalog put together from each server's listing: one tool per exposed name, the first server listing a
 * name keeps it and a later one's tool is left out with a problem saying which; a run's listing with its request
 * secrets (`McpClient`'s `catalogWith`) is added to the shared one the same way.
 */
import type { McpCatalog, McpTool } from "../../services/Mcp.js"

/** One server's listing: its tools, and why it was not listed or left some out. */
export interface Listed {
  readonly server: string
  readonly tools: ReadonlyArray<McpTool>
  readonly problems: ReadonlyArray<string>
}

/** The servers' listings, in order, as one catalog. */
export const merge = (listed: ReadonlyArray<Listed>): McpCatalog => {
  const tools: Array<McpTool> = []
  const problems: Array<{ server: string; message: string }> = []
  const taken = new Map<string, string>()
  for (const { problems: theirs, server, tools: own } of listed) {
    for (const message of theirs) problems.push({ server, message })
    for (const tool of own) {
      const holder = taken.get(tool.name)
      if (holder !== undefined) {
        problems.push({
          server,
          message: `${server}: tool '${tool.original}' was left out: the name ${tool.name} is already taken by ` +
            `MCP server '${holder}' (keep tool_name_prefix on)`
        })
        continue
      }
      taken.set(tool.name, server)
      tools.push(tool)
    }
  }
  return { tools, problems }
}

/** `shared` with a run's own listings of the servers it could not list added (their shared problems replaced). */
export const withPerRun = (shared: McpCatalog, listed: ReadonlyArray<Listed>): McpCatalog => {
  const names = new Set(listed.map((l) => l.server))
  const taken = new Set(shared.tools.map((t) => t.name))
  const tools = [...shared.tools]
  const problems = shared.problems.filter((p) => !names.has(p.server))
  for (const { problems: theirs, server, tools: own } of listed) {
    for (const message of theirs) problems.push({ server, message })
    for (const tool of own) {
      const message = `${server}: tool '${tool.original}' was left out: the name ${tool.name} is taken`
      if (taken.has(tool.name)) problems.push({ server, message })
      else tools.push(tool)
      taken.add(tool.name)
    }
  }
  return { tools, problems, perRun: true }
}
