/**
 * The screen a stdio MCP server set through the gateway's API passes before it is written (DeerFlow's
 * `_validate_mcp_update_request`): a bare executable name among the allowed launchers, no argument that makes the
 * launcher evaluate a string, no variable that injects code at startup. Defence in depth, not a trust boundary:
 * `npx` and `uvx` exist to fetch and run code.
 *
 * A package launcher (`npx`, `uvx`) parses its own options only up to the package name; what follows is the
 * server's own command line, where `-c` is commonly "config", so only the launcher's option region is screened.
 * The region ends at `--` or at the first token that is neither an option nor an option's value: an option taking
 * a value (`npx -p <pkg> -c '<cmd>'` runs the command) keeps it open. An option `npx` is not known to take no
 * value is taken to take one (npm refuses options it does not define, so this never blocks a working launch);
 * `uvx` has no option that evaluates a string, and an option it is not known to take a value for takes none. Any
 * other command is an interpreter: every argument is screened, `-p` (node's `--print`) is refused too, and a
 * cluster of short options (`node -pe`) is read letter by letter. Long options match whatever their case; short
 * ones keep it (npm's `-C` is `--prefix`). Only the flag is named in the refusal, never its value.
 */
import type { McpServerConfig } from "../../../services/Extensions.js"
import { serverProblem, transportOf } from "../../../services/Extensions.js"

/** Launchers allowed for servers set through the API (DeerFlow's defaults). */
export const LAUNCHERS: ReadonlyArray<string> = ["npx", "uvx"]

/** Arguments that make a launcher evaluate the text that follows (DeerFlow's list). */
const EVAL_ARGS: ReadonlySet<string> = new Set([
  "-c",
  "--call",
  "-e",
  "--eval",
  "--print",
  "--shell",
  "--node-arg",
  "--node-options"
])

/** Refused as well for a command that is not a package launcher: node's `-p` (`--print`). */
const EVAL_ARGS_OUTSIDE_LAUNCHERS: ReadonlySet<string> = new Set(["-p"])

/** The letters of the one-letter evaluating options, refused inside a cluster (`-pe`). */
const CLUSTERED_EVAL_LETTERS: ReadonlySet<string> = new Set(
  [...EVAL_ARGS, ...EVAL_ARGS_OUTSIDE_LAUNCHERS].filter((f) => f.length === 2 && f.startsWith("-")).map((f) => f[1]!)
)

/** npm's options that take no value (npm 10.9.4's boolean configs and their shorthands; DeerFlow's table). */
const NPX_BOOLEAN_ARGS: ReadonlySet<string> = new Set([
  "--all", "--allow-same-version", "--audit", "--bin-links", "--commit-hooks", "--description", "--dev",
  "--diff-ignore-all-space", "--diff-name-only", "--diff-no-prefix", "--diff-text", "--dry-run", "--engine-strict",
  "--expect-results", "--force", "--foreground-scripts", "--format-package-lock", "--fund", "--git-tag-version",
  "--global", "--global-style", "--if-present", "--ignore-scripts", "--include-staged", "--include-workspace-root",
  "--install-links", "--json", "--legacy-bundling", "--legacy-peer-deps", "--link", "--long", "--offline",
  "--omit-lockfile-registry-resolved", "--optional", "--package-lock", "--package-lock-only", "--parseable",
  "--prefer-dedupe", "--prefer-offline", "--prefer-online", "--production", "--progress", "--provenance",
  "--read-only", "--rebuild-bundle", "--save", "--save-bundle", "--save-dev", "--save-exact", "--save-optional",
  "--save-peer", "--save-prod", "--shrinkwrap", "--sign-git-commit", "--sign-git-tag", "--strict-peer-deps",
  "--strict-ssl", "--timing", "--unicode", "--update-notifier", "--usage", "--version", "--versions", "--workspaces",
  "--workspaces-update", "--yes", "-?", "-B", "-D", "-E", "-H", "-O", "-P", "-S", "-a", "-d", "-dd", "-ddd",
  "-desc", "-f", "-g", "-h", "-help", "-iwr", "-l", "-local", "-n", "-no", "-porcelain", "-q", "-quiet",
  "-readonly", "-s", "-silent", "-v", "-verbose", "-ws", "-y"
])

/** uv's options that take a value (uv 0.11.1's `uvx --help`; DeerFlow's table). */
const UVX_VALUE_ARGS: ReadonlySet<string> = new Set([
  "--allow-insecure-host", "--build-constraints", "--cache-dir", "--color", "--config-file", "--config-setting",
  "--config-settings-package", "--constraints", "--default-index", "--directory", "--env-file", "--exclude-newer",
  "--exclude-newer-package", "--extra-index-url", "--find-links", "--fork-strategy", "--from", "--index",
  "--index-strategy", "--index-url", "--keyring-provider", "--link-mode", "--no-binary-package",
  "--no-build-isolation-package", "--no-build-package", "--no-sources-package", "--overrides", "--prerelease",
  "--project", "--python", "--python-platform", "--refresh-package", "--reinstall-package", "--resolution",
  "--torch-backend", "--upgrade-package", "--with", "--with-editable", "--with-requirements", "-C", "-P", "-b", "-c",
  "-f", "-i", "-p", "-w"
])

/** How a package launcher separates its own options from the server's. */
interface Grammar {
  readonly evalArgs: ReadonlySet<string>
  readonly takesValue: (flag: string) => boolean
}

const GRAMMARS: ReadonlyMap<string, Grammar> = new Map([
  ["npx", { evalArgs: EVAL_ARGS, takesValue: (flag: string) => !NPX_BOOLEAN_ARGS.has(flag) }],
  // (uv spells `-c` `--constraints` and `-p` `--python`: only the long spellings stay, as a tripwire)
  ["uvx", {
    evalArgs: new Set([...EVAL_ARGS].filter((flag) => flag.startsWith("--"))),
    takesValue: (flag: string) => UVX_VALUE_ARGS.has(flag)
  }]
])

/** Variables that run code when a process starts. */
const CODE_VARIABLES: ReadonlySet<string> = new Set([
  "BASH_ENV",
  "DYLD_INSERT_LIBRARIES",
  "ENV",
  "LD_AUDIT",
  "LD_PRELOAD",
  "NODE_OPTIONS",
  "PERL5OPT",
  "PYTHONHOME",
  "PYTHONPATH",
  "PYTHONSTARTUP",
  "RUBYOPT"
])

/** The leading arguments a package launcher reads as its own options. */
const optionRegion = (args: ReadonlyArray<string>, grammar: Grammar): ReadonlyArray<string> => {
  const region: Array<string> = []
  for (let index = 0; index < args.length; index++) {
    const token = args[index]!.trim()
    if (token === "--" || token === "-" || !token.startsWith("-")) break
    region.push(token)
    if (!token.includes("=") && grammar.takesValue(token)) index++
  }
  return region
}

/** The flag among `args` that makes `command` evaluate a string, or undefined. */
export const evaluatingFlag = (command: string, args: ReadonlyArray<string>): string | undefined => {
  const grammar = GRAMMARS.get(command.toLowerCase())
  if (grammar !== undefined) {
    for (const token of optionRegion(args, grammar)) {
      const name = token.split("=")[0]!
      const flag = name.startsWith("--") ? name.toLowerCase() : name
      if (grammar.evalArgs.has(flag)) return flag
    }
    return undefined
  }
  for (const arg of args) {
    const flag = arg.split("=")[0]!.trim().toLowerCase()
    if (EVAL_ARGS.has(flag) || EVAL_ARGS_OUTSIDE_LAUNCHERS.has(flag)) return flag
    if (!flag.startsWith("-") || flag.startsWith("--")) continue
    for (const letter of flag.slice(1)) {
      if (CLUSTERED_EVAL_LETTERS.has(letter)) return `-${letter}`
    }
  }
  return undefined
}

/** Why a server's launch is not taken through the API, if it is not (see the module header). */
export const launchProblem = (
  name: string,
  server: McpServerConfig,
  allowed: ReadonlySet<string>
): string | undefined => {
  const problem = serverProblem(name, server)
  if (problem !== undefined) return `${problem}.`
  if (transportOf(server) !== "stdio") return undefined
  const command = server.command ?? ""
  if (command !== command.trim() || /[/\\\s;|&`$<>]/.test(command)) {
    return `MCP server '${name}' command must be a single executable name; put parameters in args instead.`
  }
  if (!allowed.has(command)) {
    return `MCP server '${name}' uses disallowed stdio command '${command}'. Allowed commands: ` +
      `${[...allowed].sort().join(", ")}. Configure DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST to extend this list.`
  }
  const evaluating = evaluatingFlag(command, server.args)
  if (evaluating !== undefined) {
    return `MCP server '${name}' passes '${evaluating}' to '${command}', which would run arbitrary code. ` +
      "Point the server at a package or module instead."
  }
  const variable = Object.keys(server.env).find((key) => CODE_VARIABLES.has(key.trim().toUpperCase()))
  if (variable !== undefined) {
    return `MCP server '${name}' sets environment variable '${variable}', which would run arbitrary code at ` +
      "process startup."
  }
  return undefined
}
