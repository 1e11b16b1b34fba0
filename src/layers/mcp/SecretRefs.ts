/**
 * `${secret:NAME}` in an MCP server entry: a request-scoped secret of the run that calls the server (a gateway run's
 * `context.secrets`, `antler run --secret NAME`), the declarative form of what DeerFlow's custom MCP interceptors do
 * with `config.context.secrets` (an `Authorization` header from the request). Only a `headers` or `env` value may name
 * one; `$$` stays a literal `$`, as everywhere in the entry. Which entry a call uses:
 * - `forRun(entry, secrets)`: each header and env value naming one has it in place (its `$` written `$$`, so the
 *   `$VAR`s resolved after never read into it); a value naming one the run did not give (or a header one holding a
 *   line break, a NUL or a character past U+00FF; an env one holding a NUL) is left out, never sent half made.
 * - `forRun(entry, empty)`: the entry the server's tools are listed with and a run without them calls: every
 *   value naming one left out (DeerFlow's interceptors apply to calls only).
 */
import type { McpServerConfig } from "../../services/Extensions.js"

/** `$$` (a literal `$`, skipped) or `${secret:NAME}` (its name in group 1). */
const TOKENS = () => /\$\$|\$\{secret:([^}]*)\}/g

/** A secret's name: an environment variable's (as `context.secrets` takes them). */
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Variables a request's value must not set in a stdio server's environment: those that make a shell, the dynamic
 * linker, glibc's iconv or an interpreter run other code (or find other programs) at the server's start
 * (`PYTHONWARNINGS` imports the module a category names, which with `BROWSER` runs a program; pagers, editors); the
 * home and configuration directories its start reads files from (Python runs the `.pth` files of `~/.local`, npx reads
 * `~/.npmrc`, git `~/.gitconfig`: a user names a directory the model's bash wrote); and where a package launcher
 * (npx, uvx, pip) fetches the server's code from or keeps it.
 */
const CODE_VARIABLE = new RegExp(
  "^(BASH_ENV|ENV|SHELLOPTS|BASHOPTS|BASH_FUNC_.*|LD_.*|DYLD_.*|GCONV_PATH|HOME|XDG_CONFIG_(HOME|DIRS)|" +
    "NODE_OPTIONS|NODE_PATH|PYTHON(STARTUP|PATH|HOME|USERBASE|EXECUTABLE|WARNINGS|BREAKPOINT|INSPECT)|" +
    "BROWSER|PAGER|GIT_PAGER|EDITOR|VISUAL|PERL5OPT|PERL5LIB|PERLLIB|PERL5DB|" +
    "RUBYOPT|RUBYLIB|JAVA_TOOL_OPTIONS|JDK_JAVA_OPTIONS|_JAVA_OPTIONS|CLASSPATH|LUA_(INIT|PATH|CPATH).*|" +
    "PHPRC|PHP_INI_SCAN_DIR|GIT_(SSH|SSH_COMMAND|ASKPASS|EXEC_PATH|PROXY_COMMAND|EXTERNAL_DIFF|TEMPLATE_DIR|" +
    "CONFIG.*)|NPM_CONFIG_.*|UV_.*|PIP_.*|PATH)$",
  "i"
)

/** The secret names one text refers to, in order. */
const namesIn = (text: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (const match of text.matchAll(TOKENS())) if (match[1] !== undefined) out.push(match[1])
  return out
}

/** The secrets the entry's header and env values name (none: the server takes no request secret). */
export const namesOf = (entry: McpServerConfig): ReadonlyArray<string> => {
  const out = new Set<string>()
  for (const value of [...Object.values(entry.headers), ...Object.values(entry.env)]) {
    for (const name of namesIn(value)) out.add(name)
  }
  return [...out]
}

/**
 * Why the entry's `${secret:...}`s cannot be used (none: `undefined`): one outside a header or env value (the
 * command, its args, the url, cwd or oauth: a request must not change what runs or where it connects), one in the
 * value of a variable that runs code at the start (`LD_PRELOAD`, `NODE_OPTIONS`, `PATH`...), or a name that is not
 * an environment variable's.
 */
export const problemOf = (name: string, entry: McpServerConfig): string | undefined => {
  const elsewhere: Array<readonly [string, unknown]> = [
    ["command", entry.command],
    ["args", entry.args],
    ["url", entry.url],
    ["cwd", entry.cwd],
    ["oauth", entry.oauth]
  ]
  for (const [field, value] of elsewhere) {
    if (value !== undefined && value !== null && namesIn(JSON.stringify(value)).length > 0) {
      return `MCP server '${name}': ${field} names a request secret (\${secret:...}); only header and env values may`
    }
  }
  for (const [field, values] of [["headers", entry.headers], ["env", entry.env]] as const) {
    for (const [key, value] of Object.entries(values)) {
      const names = namesIn(value)
      if (field === "env" && names.length > 0 && CODE_VARIABLE.test(key.trim())) {
        return `MCP server '${name}': env.${key} may not name a request secret: that variable makes the server's ` +
          "start run other code"
      }
      const bad = names.find((secret) => !NAME.test(secret))
      if (bad !== undefined) {
        return `MCP server '${name}': ${field}.${key}: ${JSON.stringify(bad.slice(0, 64))} is not a valid secret ` +
          "name (an environment variable name: letters, digits and _, not starting with a digit)"
      }
    }
  }
  return undefined
}

/** What no HTTP header value can hold (fetch refuses it with a message repeating the whole value, or fails). */
const NOT_IN_HEADER = /[\r\n\0]|[^\u0000-\u00ff]/
/** What no environment variable can hold (spawning refuses it with a message repeating the whole value). */
const NOT_IN_ENV = /\0/

/**
 * `values` with each `${secret:NAME}` replaced from `secrets`; a value naming one absent is left out, and so is a
 * value whose secret matches `refused`: what no header (a line break, a NUL, a character past U+00FF) or variable (a
 * NUL) can hold, which the HTTP client's or the spawn's refusal would repeat in its message.
 */
const fill = (
  values: Readonly<Record<string, string>>,
  secrets: ReadonlyMap<string, string>,
  refused: RegExp
): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(values)) {
    let missing = false
    const filled = value.replace(TOKENS(), (match, name: string | undefined) => {
      if (name === undefined) return match
      const secret = secrets.get(name)
      if (secret === undefined || refused.test(secret)) {
        missing = true
        return match
      }
      return secret.replaceAll("$", "$$$$")
    })
    if (!missing) out[key] = filled
  }
  return out
}

/** The entry a run given `secrets` calls (before its `$VAR`s are resolved): see the module's header. */
export const forRun = (entry: McpServerConfig, secrets: ReadonlyMap<string, string>): McpServerConfig =>
  namesOf(entry).length === 0
    ? entry
    : { ...entry, headers: fill(entry.headers, secrets, NOT_IN_HEADER), env: fill(entry.env, secrets, NOT_IN_ENV) }

/**
 * What a server naming request secrets that did not list its tools without them is shown as (`antler tools list`,
 * the warnings of an agent built for no run): listed per run, with `why` the server's refusal.
 */
export const listedPerRun = (server: string, names: ReadonlyArray<string>, why: string): string =>
  `MCP server '${server}' lists its tools per run, with the request secret${names.length === 1 ? "" : "s"} ` +
  `${names.join(", ")} (context.secrets, antler run --secret NAME): it did not list them without ` +
  `${names.length === 1 ? "it" : "them"} (${why})`

/** Why a server that lists its tools only with request secrets has none in a run that did not give `missing`. */
export const notListed = (server: string, missing: ReadonlyArray<string>): string =>
  `MCP server '${server}' did not list its tools without the request secret${missing.length === 1 ? "" : "s"} ` +
  `${missing.join(", ")}, which this run did not give (context.secrets, antler run --secret NAME): its tools are ` +
  "left out"
