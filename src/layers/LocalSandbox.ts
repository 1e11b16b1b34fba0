/**
 * The local sandbox provider: each thread gets host directories under the data directory
 * (`{home}/users/{user}/threads/{thread}/user-data/{workspace,uploads,outputs}`) that the model sees only as
 * `/mnt/user-data/{workspace,uploads,outputs}`, plus the skills directory at `/mnt/skills` (read-only) and, when
 * ACP agents are configured, the thread's ACP workspace at `/mnt/acp-workspace` (read-only: the agents write it).
 *
 * Every path is checked twice: when it is resolved (virtual roots only, no `..`, no encoded separators, no
 * NUL bytes, and a real path, symlinks followed, inside the thread's directories) and again after the file
 * is opened (the open descriptor's real path, on Linux), so a symlink swapped in between by a concurrent
 * command cannot redirect a read or a write. Commands run under bubblewrap (see `Bash.ts`); without it, bash
 * is refused unless `sandbox.allow_host_bash` is set.
 *
 * Resource limits (`sandbox.max_processes`, `max_memory_mb`, `tmp_size_mb`, `max_file_size_mb`,
 * `disk_quota_mb`): each command gets its own cgroup where one can be made (`Cgroup.ts`) and rlimits; a watcher
 * stops a command that hits the process cap or grows the thread's files past the quota (`DiskQuota.ts`), and
 * the file tools refuse writes past the file size limit or the quota. What the host cannot enforce is warned
 * about once per provider.
 *
 * This module is the provider; the sandbox's parts live under `sandbox/`: `VirtualPaths` (the virtual roots,
 * path rules and masking), `Resolve` (from a virtual to a real path), `SafeIo` (descriptor-checked reads and
 * writes), `Walk` (listing), `Quota` (resource limits and the disk quota), `Exec` (running commands), over one
 * record per thread (`SandboxState`).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { AppConfigService } from "../services/AppConfig.js"
import { Mcp } from "../services/Mcp.js"
import type { ExecOptions, Sandbox } from "../services/Sandbox.js"
import { acpWorkspacePath, SafeId, SandboxError, SandboxProvider, threadPaths } from "../services/Sandbox.js"
import * as Bash from "./sandbox/Bash.js"
import * as Cgroup from "./sandbox/Cgroup.js"
import * as Exec from "./sandbox/Exec.js"
import { codeOf } from "./sandbox/FsErrors.js"
import { makeKeyedLock } from "./sandbox/KeyedLock.js"
import * as Resolve from "./sandbox/Resolve.js"
import * as SafeIo from "./sandbox/SafeIo.js"
import * as McpRoots from "./sandbox/McpRoots.js"
import type { ExtraMount, SandboxSpec } from "./sandbox/SandboxState.js"
import * as SandboxState from "./sandbox/SandboxState.js"
import * as Walk from "./sandbox/Walk.js"
import * as SkillsDirectory from "./SkillsDirectory.js"

export { bashDisabledMessage } from "./sandbox/Exec.js"
export { fsError } from "./sandbox/FsErrors.js"
export { makeKeyedLock } from "./sandbox/KeyedLock.js"
export { limitsOf } from "./sandbox/Quota.js"
export { MAX_TEXT_BYTES } from "./sandbox/SafeIo.js"
export type { ExtraMount, SandboxSpec } from "./sandbox/SandboxState.js"
export { WORK_DIR } from "./sandbox/SandboxState.js"
export type { MountPoint, ParsedPath } from "./sandbox/VirtualPaths.js"
export {
  displayPath,
  HIDDEN_HOME,
  makeMask,
  OUTSIDE_PATH,
  parseVirtual,
  VIRTUAL_ROOTS_TEXT
} from "./sandbox/VirtualPaths.js"

/** Options of the local provider. */
export interface Options {
  /**
   * `"auto"` (default) uses bubblewrap when it is installed and works; `"off"` behaves as if it were not
   * installed (bash is then refused, or runs on the host with `sandbox.allow_host_bash: true`).
   */
  readonly bwrap?: "auto" | "off"
  /** How many thread sandboxes to keep cached (least recently used are dropped; they are re-made on use). */
  readonly maxCached?: number
  /** `"auto"` (default) gives each command a cgroup where one can be made; `"off"` never does. */
  readonly cgroup?: "auto" | "off"
  /**
   * Mounts that may change while the app runs, read before every sandbox operation: an enabled MCP filesystem
   * server's roots (`layer` takes them from the app's `Mcp` service when there is one).
   */
  readonly dynamicMounts?: Effect.Effect<ReadonlyArray<ExtraMount>> | undefined
}

/** Builds one thread's sandbox over existing directories. */
export const makeSandbox = (spec: SandboxSpec): Sandbox => {
  const state = SandboxState.make(spec)
  // Overlayfs work directories of an Antler process that died are removed when the sandbox is made.
  Exec.sweepWorkDirs(state.workRoot)
  // Every operation sees the mounts as they are now (an MCP filesystem server may have been switched off).
  const fresh = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.zipRight(state.refresh, effect)
  return {
    id: sandboxId(spec.userId, spec.threadId),
    threadId: spec.threadId,
    userId: spec.userId,
    paths: state.paths,
    usesThreadDataMounts: true,
    resolve: (input, access) =>
      fresh(Effect.map(Resolve.resolveParsed(state, input, access), ({ resolved }) => resolved.real)),
    mask: state.mask,
    // (a span per command: a process is started for each, which costs far more than the span)
    exec: Effect.fn("LocalSandbox.exec")(function*(command: string, options?: ExecOptions) {
      yield* Effect.annotateCurrentSpan({ thread: spec.threadId, user: spec.userId })
      yield* state.refresh
      return yield* Exec.exec(state, command, options)
    }),
    readText: (input) => fresh(SafeIo.readText(state, input)),
    writeText: (input, content, append) => fresh(SafeIo.writeText(state, input, content, append)),
    readBytes: (input, maxBytes) => fresh(SafeIo.readBytes(state, input, maxBytes)),
    stat: (input) => fresh(SafeIo.stat(state, input)),
    walk: (input, options) => fresh(Walk.walk(state, input, options)),
    withFileLock: <A, E, R>(input: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SandboxError, R> =>
      fresh(Effect.flatMap(Resolve.resolveParsed(state, input, "write"), ({ resolved }) =>
        spec.lock(resolved.real, effect)))
  }
}


const BWRAP_OFF: Bash.BwrapStatus = { available: false, reason: "bubblewrap is switched off for this provider" }

/** The id of a thread's local sandbox. */
export const sandboxId = (userId: string, threadId: string): string => `local:${userId}:${threadId}`

/**
 * The host skills directory mounted at `/mnt/skills`, if present: `skills.path` (relative to the config file's
 * directory), else `$DEER_FLOW_SKILLS_PATH` / `$ANTLER_SKILLS_PATH`, else `skills/` next to the config file.
 */
export const skillsDirectory = (config: AppConfigService["Type"]): string | undefined => SkillsDirectory.root(config)

const decodeId = Schema.decodeUnknownEither(SafeId)

/**
 * The local provider. `acquire` validates the ids, creates the thread's directories and caches the sandbox
 * (idempotent: the same sandbox for the same thread). `release` is a no-op: the directories are the
 * thread's data and outlive runs.
 */
export const make = (app: AppConfigService["Type"], options: Options = {}): SandboxProvider["Type"] => {
  const cache = new Map<string, Sandbox>()
  const maxCached = Math.max(1, options.maxCached ?? 1000)
  const lock = makeKeyedLock()
  const skills = skillsDirectory(app)
  const acp = Object.keys(app.config.acp_agents).length > 0
  const configMounts: ReadonlyArray<ExtraMount> = app.config.sandbox.mounts.map((m) => ({
    host: Path.resolve(m.host_path),
    virtual: m.container_path,
    writable: !m.read_only,
    origin: "config"
  }))
  // What the host offers is found out once per provider, on first use.
  const once = <A>(effect: Effect.Effect<A>): Effect.Effect<A> => {
    const semaphore = Effect.unsafeMakeSemaphore(1)
    let found: { readonly value: A } | undefined
    return semaphore.withPermits(1)(Effect.suspend(() =>
      found !== undefined ? Effect.succeed(found.value) : Effect.tap(effect, (value) => {
        found = { value }
      })
    ))
  }
  const bwrap = options.bwrap === "off" ? Effect.succeed(BWRAP_OFF) : once(Bash.probeBwrap)
  const cgroups = options.cgroup === "off"
    ? Effect.succeed<Cgroup.Availability>({ available: false, reason: "cgroups are switched off for this provider" })
    : once(Cgroup.detect())
  let rootLayout: Bash.RootLayout | undefined
  const layout = () => (rootLayout ??= Bash.hostRootLayout())
  const warned = new Set<string>()
  const warn = (key: string, message: string) =>
    Effect.suspend(() => {
      if (warned.has(key)) return Effect.void
      warned.add(key)
      return Effect.logWarning(message)
    })

  const touch = (id: string) => {
    const sandbox = cache.get(id)
    if (sandbox !== undefined) {
      cache.delete(id)
      cache.set(id, sandbox)
    }
    return sandbox
  }

  const acquire = (threadId: string, userId: string) =>
    Effect.suspend(() => {
      for (const [name, value] of [["thread", threadId], ["user", userId]] as const) {
        const decoded = decodeId(value)
        if (Either.isLeft(decoded)) {
          return Effect.fail(
            new SandboxError({
              reason: "invalid_id",
              message: `Invalid ${name} id ${JSON.stringify(value)}: ids must be 1-128 letters, digits, ` +
                "'.', '_' or '-', starting with a letter or digit"
            })
          )
        }
      }
      const id = sandboxId(userId, threadId)
      return Effect.try({
        try: () => {
          const cached = touch(id)
          // The directories are (re)made on every acquire: a host command may have removed one. Each is looked at
          // first: one `stat` when it is there (every tool call), where `mkdir -p` makes two system calls.
          const paths = cached?.paths ?? threadPaths(Path.resolve(app.home), userId, threadId)
          const acpWorkspace = acp ? acpWorkspacePath(Path.resolve(app.home), userId, threadId) : undefined
          for (const dir of [paths.workspace, paths.uploads, paths.outputs, ...(acpWorkspace ? [acpWorkspace] : [])]) {
            const there = Fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory() === true
            if (!there) Fs.mkdirSync(dir, { recursive: true })
          }
          if (cached !== undefined) return cached
          const sandbox = makeSandbox({
            threadId,
            userId,
            paths,
            skills,
            acpWorkspace,
            skillsContainer: app.config.skills.container_path,
            mounts: configMounts,
            dynamicMounts: options.dynamicMounts,
            home: Path.resolve(app.home),
            config: app.config.sandbox,
            bwrap,
            cgroups,
            layout,
            warn,
            lock
          })
          cache.set(id, sandbox)
          while (cache.size > maxCached) cache.delete(cache.keys().next().value!)
          return sandbox
        },
        catch: (cause) =>
          new SandboxError({
            reason: "io",
            message: `Could not create the thread's sandbox directories (${codeOf(cause) ?? "error"})`,
            cause
          })
      })
    })

  return SandboxProvider.of({
    acquire,
    current: (threadId, userId) => Effect.sync(() => Option.fromNullable(touch(sandboxId(userId, threadId)))),
    get: (id) => Effect.sync(() => Option.fromNullable(touch(id))),
    release: () => Effect.void
  })
}

/** How bash runs under a configuration: isolated by bubblewrap, on the host, or not at all (with why). */
export type BashMode =
  | { readonly mode: "bwrap"; readonly path: string }
  | { readonly mode: "host" }
  | { readonly mode: "disabled"; readonly message: string }

/** The bash mode for a configuration (probes bubblewrap once per process), e.g. for a startup notice. */
export const bashMode = (app: AppConfigService["Type"], options: Options = {}): Effect.Effect<BashMode> =>
  Effect.map(
    options.bwrap === "off" ? Effect.succeed(BWRAP_OFF) : Bash.probeBwrap,
    (status): BashMode =>
      status.available
        ? { mode: "bwrap", path: status.path }
        : app.config.sandbox.allow_host_bash
        ? { mode: "host" }
        : { mode: "disabled", message: Exec.bashDisabledMessage(status.reason) }
  )

/**
 * A layer of the local provider, reading the data directory and sandbox settings from AppConfigService, and, when
 * the app's `Mcp` service is in the context, the roots of its enabled filesystem servers (as they are now).
 */
export const layer = (options: Options = {}): Layer.Layer<SandboxProvider, never, AppConfigService> =>
  Layer.effect(
    SandboxProvider,
    Effect.gen(function*() {
      const app = yield* AppConfigService
      const mcp = yield* Effect.serviceOption(Mcp)
      const servers = Option.isSome(mcp) ? mcp.value.servers : undefined
      const dynamicMounts = options.dynamicMounts ?? (servers === undefined
        ? undefined
        : Effect.map(servers, (all) => McpRoots.filesystemMounts(all, app.config.skills.container_path)))
      return make(app, { ...options, dynamicMounts })
    })
  )
