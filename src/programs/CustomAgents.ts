/**
 * Custom agents (SPEC §3.2), in DeerFlow's layout under the data directory: each user's agents live in
 * `{home}/users/{user}/agents/{name}/` (`config.yaml` and `SOUL.md`); DeerFlow's older shared layout
 * `{home}/agents/{name}/` is still read (the per-user agent of the same name wins), never written. The default
 * agent's soul is `{home}/SOUL.md`.
 *
 * `config.yaml` is untrusted input: it is decoded with Schema, and a bad value is an error naming the file,
 * the key and the problem. Keys Antler does not manage (`github:`, `icon:`, ...) are kept when the agent
 * updates itself. Every write is atomic (a new agent appears whole, a file is replaced whole), so a reader
 * never sees half an agent. Both files are read only as regular files, `config.yaml` up to 1 MiB and `SOUL.md`
 * (which every request of the agent carries) up to `MAX_SOUL_BYTES`; a larger one is refused with an error
 * naming it, and is never written.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as ConfigFile from "../layers/ConfigFile.js"
import * as FileErrors from "../internal/FileErrors.js"
import * as OnDemand from "../internal/OnDemand.js"
import * as TextFile from "../layers/TextFile.js"

/** Agent names: letters, digits and `-` (DeerFlow's `^[A-Za-z0-9-]+$`); see `nameProblem` for the whole rule. */
export const AGENT_NAME = /^[A-Za-z0-9-]+$/

/** The longest agent name (a name is a directory name). */
export const MAX_NAME_LENGTH = 64

/**
 * Names no custom agent may have, in any case: `lead-agent` is the lead agent's assistant id (hyphenated, as
 * assistant ids become agent names), `default` is what DeerFlow calls the default agent (in run metadata), and
 * `bootstrap` the agent that creates agents.
 */
export const RESERVED_NAMES: ReadonlySet<string> = new Set(["lead-agent", "default", "bootstrap"])

/**
 * Why a name cannot name an agent, if it cannot: names come from clients (`agent_name`, `assistant_id`) and
 * become directory names, so only letters, digits and `-` (no `.`, `/` or `\`: no way out of the agents
 * directory), at most `MAX_NAME_LENGTH` of them, and none of `RESERVED_NAMES`.
 */
export const nameProblem = (name: string): string | undefined => {
  if (!AGENT_NAME.test(name)) return "agent names are letters, digits and '-'"
  if (name.length > MAX_NAME_LENGTH) return `agent names are at most ${MAX_NAME_LENGTH} characters`
  if (RESERVED_NAMES.has(name.toLowerCase())) return `"${name.toLowerCase()}" is a reserved name`
  return undefined
}

/** Whether a name can name an agent (see `nameProblem`). */
export const isAgentName = (name: string): boolean => nameProblem(name) === undefined

/**
 * What the CLI adds to an agent that is not there: the command creating it, typed as `antler` (how the user runs
 * Antler where they are: `npx antler` in a clone; see `CliCommand.invocation`).
 */
export const createHint = (name: string, antler: string): string => `Create one with: ${antler} agents create ${name}`

/** An agent name, decoded (see `nameProblem`). */
export const AgentName = Schema.String.pipe(
  Schema.filter((name) => nameProblem(name) ?? true, { identifier: "AgentName" })
)

/** The file of an agent's soul. */
export const SOUL_FILE = "SOUL.md"

/** The file of an agent's settings. */
export const CONFIG_FILE = "config.yaml"

/** The largest SOUL.md read or written: 128 KiB (it is in the system prompt of every request). */
export const MAX_SOUL_BYTES = 128 * 1024

/**
 * The most agents one user may have: each holds up to 1 MiB of settings, `MAX_SOUL_BYTES` of soul and a memory of
 * its own, so without a bound one gateway user could fill the disk every user shares (DeerFlow has none).
 */
export const MAX_AGENTS_PER_USER = 100

/**
 * Per-agent model settings. Another key (`top_p`) is an error, as in DeerFlow: the agent would otherwise run
 * without a setting its author believes it has.
 */
export const ModelSettings = Schema.Struct({
  temperature: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.between(0, 2)))),
  max_tokens: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.between(1, 200000))))
}).annotations({ parseOptions: { onExcessProperty: "error" } })

/** An agent's `config.yaml` (DeerFlow's `AgentConfig`; other keys are kept but not read). */
export const AgentConfig = Schema.Struct({
  name: Schema.optional(Schema.NullOr(Schema.String)),
  description: Schema.optionalWith(Schema.String, { default: () => "", nullable: true }),
  model: Schema.optional(Schema.NullOr(Schema.String)),
  /** Tool groups of the configured tools (absent or null = all, [] = none). */
  tool_groups: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  /** Skills allowlist (absent or null = all enabled skills, [] = none). */
  skills: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  model_settings: Schema.optional(Schema.NullOr(ModelSettings)),
  thinking_enabled: Schema.optional(Schema.NullOr(Schema.Boolean)),
  reasoning_effort: Schema.optional(Schema.NullOr(Schema.Literal("low", "medium", "high")))
})
export type AgentConfig = typeof AgentConfig.Type

/** A custom agent as loaded. */
export interface CustomAgent {
  readonly name: string
  /** Its directory. */
  readonly dir: string
  /** Whether it lives in the old shared layout (read-only for Antler). */
  readonly legacy: boolean
  readonly config: AgentConfig
  /** The whole `config.yaml` as read, unmanaged keys included. */
  readonly raw: Readonly<Record<string, unknown>>
  readonly soul: string | undefined
}

/** A custom agent that cannot be used. */
export class AgentError extends Schema.TaggedError<AgentError>()("AgentError", {
  reason: Schema.Literal("invalid_name", "not_found", "invalid_config", "legacy", "too_many", "io"),
  name: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** Where a user's agents live. */
export const agentsDir = (home: string, userId: string): string => Path.join(home, "users", userId, "agents")

/** Where agents lived before agents were per user (read only). */
export const legacyAgentsDir = (home: string): string => Path.join(home, "agents")

/** The default agent's soul. */
export const globalSoulPath = (home: string): string => Path.join(home, SOUL_FILE)

const invalidName = (name: string) =>
  new AgentError({
    reason: "invalid_name",
    name,
    message: `Invalid agent name ${JSON.stringify(name)}: ${nameProblem(name) ?? "not a name"}`
  })

/** Whether `path` is a directory (anything that cannot be read is not). */
const isDir = (fs: FileSystem.FileSystem, path: string): Effect.Effect<boolean> =>
  fs.stat(path).pipe(Effect.map((info) => info.type === "Directory"), Effect.orElseSucceed(() => false))

/** Whether `path` exists (anything that cannot be read does not). */
const exists = (fs: FileSystem.FileSystem, path: string): Effect.Effect<boolean> =>
  Effect.orElseSucceed(fs.exists(path), () => false)

/**
 * The directory of an agent: the user's when it holds the agent (its `config.yaml`), else the shared one when
 * that does, else the user's. Directory names are the name in lower case, as DeerFlow stores them (so `MyAgent`
 * and `myagent` are one agent, whichever a client or the CLI names); a directory of another case is still found
 * where no lower-case one is (agents written before names were kept in lower case: `MyAgent/` is the agent
 * `myagent`, `MYAGENT` and `MyAgent`; only directory names that are agent names are looked at, the first in
 * sorted order when several differ only in case). (The user's directory of a shared agent may exist without
 * being an agent: the user's memory of it lives there.)
 */
export const agentDir = (
  home: string,
  userId: string,
  name: string
): Effect.Effect<{ readonly dir: string; readonly legacy: boolean }, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const lower = name.toLowerCase()
    const names = name === lower ? [name] : [lower, name]
    for (const [root, legacy] of [[agentsDir(home, userId), false], [legacyAgentsDir(home), true]] as const) {
      for (const each of names) {
        const dir = Path.join(root, each)
        if (yield* exists(fs, Path.join(dir, CONFIG_FILE))) return { dir, legacy }
      }
      const entries = yield* Effect.orElseSucceed(fs.readDirectory(root), (): Array<string> => [])
      const others = entries.filter((entry) =>
        entry.toLowerCase() === lower && !names.includes(entry) && isAgentName(entry)
      )
      for (const each of others.sort()) {
        const dir = Path.join(root, each)
        if (yield* exists(fs, Path.join(dir, CONFIG_FILE))) return { dir, legacy }
      }
    }
    return { dir: Path.join(agentsDir(home, userId), lower), legacy: false }
  })

/** The text of an agent's file (undefined when there is none); a `TextFileError` is thrown. */
const readText = (file: string, limit: number): string | undefined =>
  Either.match(TextFile.read(file, limit), {
    onLeft: (error) => {
      if (error.reason === "missing") return undefined
      throw error
    },
    onRight: (text) => text
  })

/** A soul too large to be written: the message says by how much. */
const soulTooLarge = (name: string, soul: string): AgentError | undefined => {
  const bytes = Buffer.byteLength(soul, "utf8")
  return bytes <= MAX_SOUL_BYTES ? undefined : new AgentError({
    reason: "invalid_config",
    name,
    message: `The soul is ${TextFile.formatBytes(bytes)}; a ${SOUL_FILE} holds at most ` +
      `${TextFile.formatBytes(MAX_SOUL_BYTES)}. Write a shorter one.`
  })
}

const decodeConfig = Schema.decodeUnknownEither(AgentConfig, { errors: "all", onExcessProperty: "ignore" })

/**
 * An agent error's message for someone other than the operator (the model, an HTTP client): its files named from
 * the data directory (`users/alice/agents/x/config.yaml`), not where the server keeps it.
 */
export const messageFromHome = (error: AgentError, home: string): string =>
  error.message.split(home + Path.sep).join("")

/** Decodes the text of a `config.yaml`; a problem names the file, the key and what was wrong. */
export const parseConfig = (
  text: string,
  file: string
): Either.Either<{ readonly config: AgentConfig; readonly raw: Record<string, unknown> }, string> => {
  const parsed = ConfigFile.parseYaml(text)
  if (Either.isLeft(parsed)) {
    return Either.left(parsed.left.map((issue) => ConfigFile.formatIssue(file, issue)).join("\n"))
  }
  const raw = parsed.right ?? {}
  if (typeof raw !== "object" || Array.isArray(raw)) return Either.left(`${file}: expected a mapping of settings`)
  return Either.match(decodeConfig(raw), {
    onLeft: (error) =>
      Either.left(
        ParseResult.ArrayFormatter.formatErrorSync(error)
          .map((issue) => `${file}: ${issue.path.join(".") || "(file)"}: ${issue.message}`)
          .join("\n")
      ),
    onRight: (config) => Either.right({ config, raw: raw as Record<string, unknown> })
  })
}

/** Loads an agent: its settings (decoded) and its soul. */
export const load = (
  home: string,
  userId: string,
  name: string
): Effect.Effect<CustomAgent, AgentError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    if (!isAgentName(name)) return yield* Effect.fail(invalidName(name))
    const { dir, legacy } = yield* agentDir(home, userId, name)
    const file = Path.join(dir, CONFIG_FILE)
    return yield* Effect.try({
      try: () => ({
        text: readText(file, ConfigFile.MAX_CONFIG_BYTES),
        soul: readText(Path.join(dir, SOUL_FILE), MAX_SOUL_BYTES)
      }),
      catch: (cause) =>
        new AgentError({
          reason: "io",
          name,
          message: `Cannot read the agent ${name}: ${cause instanceof Error ? cause.message : String(cause)}`,
          cause
        })
    }).pipe(Effect.flatMap(({ soul, text }) => {
      if (text === undefined) {
        return Effect.fail(
          new AgentError({
            reason: "not_found",
            name,
            // the data directory is not named: the message may go to a gateway's client
            // (nor a command to create one: the CLI adds it as the user types it there, `createHint`)
            message: `No agent named "${name}" (looked in users/${userId}/agents/${name} and agents/${name} of the ` +
              "data directory)."
          })
        )
      }
      return Either.match(parseConfig(text, file), {
        onLeft: (message) => Effect.fail(new AgentError({ reason: "invalid_config", name, message })),
        onRight: ({ config, raw }) => {
          const trimmed = soul?.trim()
          return Effect.succeed<CustomAgent>({
            // the name its directory has: its memory and its runs' events name the agent as its files do
            name: Path.basename(dir),
            dir,
            legacy,
            config,
            raw,
            soul: trimmed === undefined || trimmed === "" ? undefined : trimmed
          })
        }
      })
    }))
  })

/** A user's agents (and the shared ones they do not shadow), by name; those that cannot be read are reported. */
export const list = (home: string, userId: string): Effect.Effect<
  { readonly agents: ReadonlyArray<CustomAgent>; readonly problems: ReadonlyArray<AgentError> },
  never,
  FileSystem.FileSystem
> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const names = new Set<string>()
    for (const root of [agentsDir(home, userId), legacyAgentsDir(home)]) {
      const entries = yield* Effect.orElseSucceed(fs.readDirectory(root), (): Array<string> => [])
      for (const entry of entries) {
        if (isAgentName(entry) && (yield* exists(fs, Path.join(root, entry, CONFIG_FILE)))) names.add(entry)
      }
    }
    const agents: Array<CustomAgent> = []
    const problems: Array<AgentError> = []
    for (const name of [...names].sort()) {
      const loaded = yield* Effect.either(load(home, userId, name))
      if (Either.isRight(loaded)) agents.push(loaded.right)
      else problems.push(loaded.left)
    }
    return { agents, problems }
  })

// ---------------------------------------------------------------------------------------------------------
// Writing

/** Fails when the user has `MAX_AGENTS_PER_USER` agents (their folders, staging ones left out) already. */
const roomFor = (home: string, userId: string, name: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const entries = yield* Effect.orElseSucceed(fs.readDirectory(agentsDir(home, userId)), (): Array<string> => [])
    if (entries.filter((entry) => !entry.startsWith(".")).length < MAX_AGENTS_PER_USER) return
    return yield* new AgentError({
      reason: "too_many",
      name,
      message: `The agent ${name} was not created: a user has at most ${MAX_AGENTS_PER_USER} agents; delete one first`
    })
  })

/** Writes a file whole: a temporary file next to it, then a rename over it. */
export const writeAtomic = (
  file: string,
  content: string
): Effect.Effect<void, PlatformError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.makeDirectory(Path.dirname(file), { recursive: true })
    const temp = Path.join(Path.dirname(file), `.${Path.basename(file)}.${Crypto.randomUUID()}.tmp`)
    yield* Effect.zipRight(fs.writeFileString(temp, content, { flag: "wx" }), fs.rename(temp, file)).pipe(
      Effect.tapError(() => Effect.ignore(fs.remove(temp, { force: true })))
    )
  })

/** What a failed write says: Node's error, as it reads (`Error: EACCES: permission denied, ...`). */
const writeFailure = (cause: unknown): string => String(FileErrors.nodeError(cause))

/** The YAML text of an agent's settings (null and undefined values left out). */
export const configText = (raw: Readonly<Record<string, unknown>>): string => {
  const clean: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(raw)) if (value !== undefined && value !== null) clean[key] = value
  return OnDemand.yaml().stringify(clean)
}

/** What to write: the agent's settings (the whole file) and, when given, its soul. */
export interface AgentWrite {
  readonly config: Readonly<Record<string, unknown>>
  readonly soul?: string | undefined
}

/**
 * Writes an agent in the user's layout, atomically: a new agent is written into a temporary directory that is
 * then renamed into place, so it appears whole; an existing agent has each file replaced whole. The settings
 * must decode. Agents only in the shared layout are refused (DeerFlow does not write there either).
 */
export const save = (
  home: string,
  userId: string,
  name: string,
  write: AgentWrite
): Effect.Effect<string, AgentError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    if (!isAgentName(name)) return yield* Effect.fail(invalidName(name))
    const text = configText({ ...write.config, name })
    const checked = parseConfig(text, `${name}/${CONFIG_FILE}`)
    if (Either.isLeft(checked)) {
      return yield* Effect.fail(new AgentError({ reason: "invalid_config", name, message: checked.left }))
    }
    if (Buffer.byteLength(text, "utf8") > ConfigFile.MAX_CONFIG_BYTES) {
      return yield* Effect.fail(
        new AgentError({
          reason: "invalid_config",
          name,
          message: `The settings of ${name} would be larger than ${TextFile.formatBytes(ConfigFile.MAX_CONFIG_BYTES)}`
        })
      )
    }
    const large = write.soul === undefined ? undefined : soulTooLarge(name, write.soul.trim())
    if (large !== undefined) return yield* Effect.fail(large)
    const where = yield* agentDir(home, userId, name)
    if (where.legacy) {
      return yield* Effect.fail(
        new AgentError({
          reason: "legacy",
          name,
          // the data directory is not named: the message may go to the model and a gateway's client
          message: `The agent ${name} is in the old shared layout (agents/${name} of the data directory), which ` +
            `no user's run changes; move it to users/${userId}/agents/${name} to change it`
        })
      )
    }
    if (!(yield* isDir(yield* FileSystem.FileSystem, where.dir))) yield* roomFor(home, userId, name)
    // (a write once started is not interrupted: it would leave a staging directory or a temporary file behind)
    return yield* Effect.uninterruptible(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = where.dir
      if (!(yield* isDir(fs, dir))) {
        const root = agentsDir(home, userId)
        yield* fs.makeDirectory(root, { recursive: true })
        const staging = yield* fs.makeTempDirectory({ directory: root, prefix: `.${name}.` })
        const made = yield* Effect.gen(function*() {
          yield* fs.writeFileString(Path.join(staging, CONFIG_FILE), text)
          if (write.soul !== undefined) {
            yield* fs.writeFileString(Path.join(staging, SOUL_FILE), `${write.soul.trim()}\n`)
          }
          yield* fs.rename(staging, dir)
          return true
        }).pipe(Effect.catchAll((cause) =>
          Effect.zipRight(
            Effect.ignore(fs.remove(staging, { recursive: true, force: true })),
            // another writer made the agent first: fall through to replacing its files
            Effect.flatMap(isDir(fs, dir), (made) => made ? Effect.succeed(false) : Effect.fail(cause))
          )
        ))
        if (made) return dir
      }
      if (write.soul !== undefined) yield* writeAtomic(Path.join(dir, SOUL_FILE), `${write.soul.trim()}\n`)
      yield* writeAtomic(Path.join(dir, CONFIG_FILE), text)
      return dir
    })).pipe(Effect.mapError((cause) =>
      new AgentError({ reason: "io", name, message: `Cannot write the agent ${name}: ${writeFailure(cause)}`, cause })
    ))
  })

/** Writes the default agent's soul (`{home}/SOUL.md`) atomically. */
export const saveGlobalSoul = (
  home: string,
  soul: string
): Effect.Effect<void, AgentError, FileSystem.FileSystem> => {
  const large = soulTooLarge("", soul.trim())
  if (large !== undefined) return Effect.fail(large)
  return Effect.uninterruptible(writeAtomic(globalSoulPath(home), `${soul.trim()}\n`)).pipe(
    Effect.mapError((cause) =>
      new AgentError({ reason: "io", name: "", message: `Cannot write ${SOUL_FILE}: ${writeFailure(cause)}`, cause })
    )
  )
}

/** A short fingerprint of what an agent is (settings and soul): a changed agent gets an agent of its own. */
export const fingerprint = (agent: CustomAgent): string =>
  Crypto.createHash("sha256").update(JSON.stringify([agent.raw, agent.soul ?? null])).digest("hex").slice(0, 16)
