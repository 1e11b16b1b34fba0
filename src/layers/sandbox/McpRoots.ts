/**
 * The directories an enabled MCP filesystem server (`@modelcontextprotocol/server-filesystem`) may reach, as
 * DeerFlow reads them: every enabled server with an argument naming `server-filesystem`, and of its arguments those
 * that are absolute paths (not options). The sandbox shows each at its own path (the model and the server name the
 * same files), writable as the server's are; a root that is not an existing directory, or that would cover the
 * thread's directories, the skills, the sandbox's system directories or the data directory, is left out.
 */
import * as Fs from "node:fs"
import { containerPathProblem, normalizeContainer, reservedClash, systemClash } from "../../services/config/Mounts.js"
import type { McpServerConfig } from "../../services/Extensions.js"
import type { ExtraMount } from "./SandboxState.js"

/** The root paths an enabled filesystem server names (pure). */
export const filesystemRootPaths = (servers: Readonly<Record<string, McpServerConfig>>): ReadonlyArray<string> => {
  const roots: Array<string> = []
  for (const server of Object.values(servers)) {
    if (!server.enabled || !server.args.some((arg) => arg.includes("server-filesystem"))) continue
    for (const arg of server.args) {
      if (!arg.startsWith("-") && arg.startsWith("/")) roots.push(normalizeContainer(arg) || "/")
    }
  }
  return [...new Set(roots)]
}

/** The mounts of the enabled filesystem servers' roots that can be shown (see the module's comment). */
export const filesystemMounts = (
  servers: Readonly<Record<string, McpServerConfig>>,
  skillsContainer: string
): ReadonlyArray<ExtraMount> =>
  filesystemRootPaths(servers).flatMap((root): Array<ExtraMount> => {
    if (containerPathProblem(root) !== undefined) return []
    if (reservedClash(root, skillsContainer) !== undefined || systemClash(root) !== undefined) return []
    try {
      if (!Fs.statSync(root).isDirectory()) return []
    } catch {
      return []
    }
    return [{ host: root, virtual: root, writable: true, origin: "mcp" }]
  })
