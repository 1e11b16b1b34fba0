/**
 * `config.yaml` re-read while the process runs (`antler serve`), as DeerFlow's `get_app_config()` re-reads it for
 * the next request when it changed. The file is looked at (its inode, size and times, never its text) at most once
 * every `recheckMs` when a run asks for the configuration, and read and decoded only when that changed. An edit
 * that decodes and whose models can be used is taken: runs started after it use it (`LiveConfig`), runs under way
 * keep theirs. The sections and settings read once at the start (`STARTUP_ONLY`) keep the values the process
 * started with, and an edit of one of them is named in a warning (it takes effect on a restart). An edit that cannot
 * be used (a YAML or schema error, a removed file, a model choice it breaks) is refused with one warning naming the
 * file and what is wrong, and the last configuration taken stays in use. Keys of an edit that Antler does not read
 * (a typo) are named in a warning.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SynchronizedRef from "effect/SynchronizedRef"
import * as Fs from "node:fs"
import type { AppConfig, AppConfigService, ModelConfig } from "../services/AppConfig.js"
import type { Snapshot } from "../services/LiveConfig.js"
import { LiveConfig, STARTUP_ONLY } from "../services/LiveConfig.js"
import { ModelService } from "../services/ModelService.js"
import * as ConfigFile from "./ConfigFile.js"

/** How often, at most, the configuration file is looked at for an edit (when a run asks for the configuration). */
export const RECHECK_MS = 2_000

/** What a configuration's models are, for the process (its model choice over them). */
export type Models = Omit<Snapshot, "app" | "revision">

/** How a process takes edits of its configuration file. */
export interface Watch {
  /**
   * The models and clients of an edited configuration, or why it cannot be used (the `--model` of the command no
   * longer names a model...). Called before any run uses the configuration (a gateway learns its secrets here).
   */
  readonly prepare: (app: AppConfigService["Type"]) => Effect.Effect<Models, string>
  /** Default `RECHECK_MS`. */
  readonly recheckMs?: number | undefined
}

/** Options of `make`. */
export interface Options extends Partial<Watch> {
  /** The configuration the process started with, its models and their clients (revision 0). */
  readonly initial: Omit<Snapshot, "revision">
}

/** A version of the file as its metadata tell it (device, inode, size, modification and change times), or why not. */
export const stampOf = (file: string): string => {
  try {
    const stat = Fs.statSync(file, { bigint: true })
    return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`
  } catch (cause) {
    return `error:${(cause as NodeJS.ErrnoException).code ?? String(cause)}`
  }
}

// (secrets compared too: a `Redacted` value's JSON hides it, so the holder's raw value is read)
function reveal(this: unknown, key: string, value: unknown): unknown {
  const raw = (this as Record<string, unknown>)[key]
  return Redacted.isRedacted(raw) ? Redacted.value(raw) : value
}

const same = (a: unknown, b: unknown): boolean =>
  JSON.stringify(a ?? null, reveal) === JSON.stringify(b ?? null, reveal)

// the value at a dotted path of a configuration (undefined when a step is missing)
const at = (config: unknown, path: ReadonlyArray<string>): unknown =>
  path.reduce<unknown>(
    (value, key) => (typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined),
    config
  )

// a configuration with the value at a dotted path replaced (copied along the path, the rest shared)
const put = (config: unknown, path: ReadonlyArray<string>, value: unknown): unknown => {
  if (path.length === 0) return value
  const [key, ...rest] = path as [string, ...Array<string>]
  const holder = typeof config === "object" && config !== null ? (config as Record<string, unknown>) : {}
  return { ...holder, [key]: put(holder[key], rest, value) }
}

/**
 * `edited` with the startup-only sections and settings of `running` (`STARTUP_ONLY`, a setting as a dotted path),
 * and the names of those the edit changed.
 */
export const withStartupSections = (
  edited: AppConfig,
  running: AppConfig
): { readonly config: AppConfig; readonly held: ReadonlyArray<string> } => {
  const paths = STARTUP_ONLY.map((name) => name.split("."))
  const held = STARTUP_ONLY.filter((_, i) => !same(at(edited, paths[i]!), at(running, paths[i]!)))
  const config = paths.reduce<unknown>((kept, path) => put(kept, path, at(running, path)), edited)
  return { config: config as AppConfig, held }
}

interface State {
  readonly snapshot: Snapshot
  /** The file's `stampOf` when it was last looked at. */
  readonly stamp: string
  readonly checkedAt: number
}

/**
 * The `LiveConfig` of the configuration file the process started with (`initial.app.source`): with `prepare`, its
 * edits are taken; without it (or without a file), the configuration of the start is the only one.
 */
export const make = (options: Options): Effect.Effect<LiveConfig["Type"]> =>
  Effect.gen(function*() {
    const file = options.initial.app.source
    const first: Snapshot = { ...options.initial, revision: 0 }
    const prepare = options.prepare
    if (file === undefined || prepare === undefined) return LiveConfig.of({ current: Effect.succeed(first) })
    const recheckMs = options.recheckMs ?? RECHECK_MS
    const ref = yield* SynchronizedRef.make<State>({
      snapshot: first,
      stamp: stampOf(file),
      checkedAt: yield* Clock.currentTimeMillis
    })

    const refuse = (problem: string) =>
      Effect.logWarning(
        `${file} changed but was not taken; runs go on with the configuration taken before it: ${problem}`
      )

    // the edited file as the next runs' configuration (or the snapshot they had, with one warning saying why)
    const take = (running: Snapshot): Effect.Effect<Snapshot> =>
      Effect.gen(function*() {
        const read = yield* Effect.either(ConfigFile.loadFile(file, running.app.home))
        if (Either.isLeft(read)) return yield* Effect.as(refuse(read.left.message), running)
        // (a key mistyped in the edit is said, as the start says the keys it does not read)
        const unread = read.right.ignored.filter((key) => !running.app.ignored.includes(key))
        if (unread.length > 0) {
          yield* Effect.logWarning(`${file}: the edit has keys Antler does not read: ${unread.join(", ")}`)
        }
        const { config, held } = withStartupSections(read.right.config, running.app.config)
        // (a section, or a setting of one: `memory.backend_config.storage_path`)
        const noun = held.every((name) => !name.includes(".")) ? "section" : "setting"
        const restart = held.length === 0 ? Effect.void : Effect.logWarning(
          `${file}: ${held.join(", ")} changed; ${held.length === 1 ? `that ${noun} is` : `these ${noun}s are`} ` +
            "read when the process starts, so the edit takes effect on a restart"
        )
        if (same(config, running.app.config)) return yield* Effect.as(restart, running)
        const app = { ...running.app, config, ignored: read.right.ignored, written: read.right.written }
        const models = yield* Effect.either(prepare(app))
        if (Either.isLeft(models)) return yield* Effect.as(refuse(models.left), running)
        yield* restart
        yield* Effect.logInfo(`${file} changed: the runs started from now on use it`)
        return { app, ...models.right, revision: running.revision + 1 }
      })

    const look = SynchronizedRef.modifyEffect(ref, (state) =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        if (at - state.checkedAt < recheckMs) return [state.snapshot, state] as const
        const stamp = stampOf(file)
        if (stamp === state.stamp) return [state.snapshot, { ...state, checkedAt: at }] as const
        const snapshot = yield* take(state.snapshot)
        return [snapshot, { snapshot, stamp, checkedAt: at }] as const
      }))

    // (most runs come within `recheckMs` of the last look: they read the snapshot without waiting for the lock)
    const current = Effect.flatMap(
      Effect.zip(Clock.currentTimeMillis, SynchronizedRef.get(ref)),
      ([at, state]) => (at - state.checkedAt < recheckMs ? Effect.succeed(state.snapshot) : look)
    )
    return LiveConfig.of({ current })
  })

/**
 * A layer providing `LiveConfig` (see `make`) over the configuration `app` the process started with, its `models`
 * and the app's `ModelService` (their clients).
 */
export const layer = (
  options: Partial<Watch> & { readonly app: AppConfigService["Type"]; readonly models: ReadonlyArray<ModelConfig> }
): Layer.Layer<LiveConfig, never, ModelService> =>
  Layer.effect(
    LiveConfig,
    Effect.flatMap(ModelService, (model) => {
      const { app, models, ...watch } = options
      return make({ ...watch, initial: { app, models, model } })
    })
  )
