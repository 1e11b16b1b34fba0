/**
 * `$VAR` / `${VAR}` in an MCP server entry (its command, args, env, url, headers, cwd and oauth) come from the
 * environment (read through Effect's `Config`); an unset one keeps that server from starting, with the reason.
 * The values so resolved that are secret (headers, env, URL credentials, OAuth's client secret and refresh token)
 * are listed for redaction.
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { McpServerConfig } from "../../services/Extensions.js"
import * as Redact from "../../state/Redact.js"
import { interpolate } from "../ConfigFile.js"
import * as SecretRefs from "./SecretRefs.js"

const NO_SECRETS: ReadonlyMap<string, string> = new Map()

/** The `$VAR`s of a server entry's strings (command, args, env, url, headers, cwd, oauth). */
export const variablesOf = (server: McpServerConfig): ReadonlyArray<string> => {
  const names = new Set<string>()
  interpolate(interpolatable(server), (name) => {
    names.add(name)
    return ""
  })
  return [...names]
}

const interpolatable = (server: McpServerConfig) => ({
  command: server.command,
  args: server.args,
  env: server.env,
  url: server.url,
  headers: server.headers,
  cwd: server.cwd,
  oauth: server.oauth
})

/**
 * The entry with its `$VAR`s replaced by `lookup`, or why it cannot be (a variable unset, ...); its header and env
 * values naming a request secret (`${secret:NAME}`) filled from `secrets`, or left out (none given: the entry its
 * tools are listed with, see `SecretRefs.forRun`).
 */
export const resolveEntry = (
  server: McpServerConfig,
  lookup: (name: string) => string | undefined,
  secrets: ReadonlyMap<string, string> = NO_SECRETS
): Either.Either<McpServerConfig, string> =>
  Either.map(
    Either.mapLeft(interpolate(interpolatable(SecretRefs.forRun(server, secrets)), lookup), (issues) =>
      issues.map((issue) => `${issue.path}: ${issue.message}`).join("; ")),
    (values) => ({ ...server, ...(values as Partial<McpServerConfig>) })
  )

/** The values of environment variables by name (read through `Config`; unset or unreadable: undefined). */
export const lookupAll = (names: ReadonlyArray<string>) =>
  Effect.map(
    Effect.forEach(names, (name) =>
      Effect.map(
        Effect.orElseSucceed(Config.option(Config.string(name)), () => Option.none<string>()),
        (value) => [name, Option.getOrUndefined(value)] as const
      )),
    (entries) => new Map<string, string | undefined>(entries)
  )

/**
 * The secrets of the enabled servers, with their `$VAR`s resolved: header and env values and URL credentials,
 * which nothing the app prints or stores may contain.
 */
// a command-line flag that takes a secret (`--api-key V`, `--token=V`, `--github-token V`, `-password V`)
const SECRET_FLAG = /^--?(?:[a-z0-9]+[-_])*(?:api[-_]?key|key|token|secret|password|passwd|credentials?)(?:=(.*))?$/i
// an environment assignment given as an argument (`-e GITHUB_TOKEN=V` to docker, `env API_KEY=V cmd`)
const SECRET_ASSIGNMENT = /^[a-z_][a-z0-9_]*(?:key|token|secret|password|passwd|credentials?)=(.+)$/i

/**
 * The secrets a server's command line carries: the value of a flag named for a key, token, secret or password (in
 * the same argument after `=`, else the next one), a secret-named `NAME=value`, and the credentials of a URL.
 */
export const argSecrets = (args: ReadonlyArray<string>): ReadonlyArray<string> => {
  const out: Array<string> = []
  args.forEach((arg, i) => {
    const flag = SECRET_FLAG.exec(arg)
    if (flag !== null) {
      const value = flag[1] ?? args[i + 1]
      if (value !== undefined && value !== "" && !value.startsWith("-")) out.push(value)
    }
    const assigned = SECRET_ASSIGNMENT.exec(arg)?.[1]
    if (assigned !== undefined) out.push(assigned)
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(arg)) out.push(...Redact.urlSecrets(arg))
  })
  return out
}

/** The secrets of one resolved entry: header and env values, its command line's, URL credentials, OAuth's. */
export const entrySecrets = (resolved: McpServerConfig): ReadonlyArray<string> => {
  const out: Array<string> = []
  out.push(...Object.values(resolved.headers), ...Object.values(resolved.env), ...Redact.urlSecrets(resolved.url))
  out.push(...argSecrets(resolved.args))
  for (const secret of [resolved.oauth?.client_secret, resolved.oauth?.refresh_token]) {
    if (typeof secret === "string" && secret !== "") out.push(secret)
  }
  for (const value of Object.values(resolved.headers)) {
    const token = /^(?:bearer|basic|token)\s+(\S+)$/i.exec(value.trim())?.[1]
    if (token !== undefined) out.push(token)
  }
  return out
}

export const secrets = (servers: Readonly<Record<string, McpServerConfig>>): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function*() {
    const out: Array<string> = []
    for (const config of Object.values(servers)) {
      if (!config.enabled) continue
      const values = yield* lookupAll(variablesOf(config))
      out.push(...entrySecrets(Either.getOrElse(resolveEntry(config, (v) => values.get(v)), () => config)))
    }
    return out
  })
