/**
 * The configuration of a long-running process as it is now. `antler serve` re-reads `config.yaml` when the file
 * changed (`layers/ConfigReload.ts`): runs started after an edit use the new configuration, runs under way keep
 * the one they started with. The sections that are read once when the process starts (`STARTUP_ONLY`) stay as
 * they were until a restart. An app that does not re-read its file provides no `LiveConfig`: its configuration
 * is the `AppConfigService` it started with.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { AppConfig, AppConfigService, ModelConfig } from "./AppConfig.js"
import type { ModelService } from "./ModelService.js"

/**
 * The sections of `config.yaml`, and the settings of a section (a dotted path), read once, when the process starts
 * (DeerFlow's reload boundary, `reload_boundary.STARTUP_ONLY_FIELDS`, in Antler's terms): the HTTP server and its
 * users (`gateway`), the thread store (`database`), traces (`tracing`), logs (`log_level`, `logging`: how much
 * is logged, and the request trace ids), the sandbox provider (`sandbox`), the skills directory and where the
 * sandbox shows it (`skills.path`, `skills.container_path`: the sandbox provider mounts it
 * when the process starts, and a run's prompt must name the folder its sandbox has), where memory is stored and by
 * which backend (the files of every user are open under that root: `memory.manager_class`,
 * `memory.backend_config.storage_path`, `storage_class` and `manifest_filename`), DeerMem's own prompt and pattern
 * files (`prompts_dir`, `patterns_dir`: read when the memory starts), the configured middlewares
 * (`extensions`), and role-based permissions (`authorization`: the gateway's routes and every run's tools keep
 * one policy). An edit of one of them takes effect on a restart; the rest takes effect at the next run, request
 * (an upload's limits, a skill's checks) or memory update.
 */
export const STARTUP_ONLY = [
  "gateway",
  "database",
  "tracing",
  "log_level",
  "logging",
  "sandbox",
  "skills.path",
  "skills.container_path",
  "memory.manager_class",
  "memory.backend_config.storage_path",
  "memory.backend_config.storage_class",
  "memory.backend_config.manifest_filename",
  "memory.backend_config.prompts_dir",
  "memory.backend_config.patterns_dir",
  "extensions",
  "authorization",
  "mcp_tasks"
] as const satisfies ReadonlyArray<keyof AppConfig | `${keyof AppConfig}.${string}`>

/** A section of `config.yaml`, or a setting of one (`section.key...`), that takes effect on a restart only. */
export type StartupOnly = (typeof STARTUP_ONLY)[number]

/** The configuration a run starts with. */
export interface Snapshot {
  /** The configuration (its startup-only sections and settings those the process started with). */
  readonly app: AppConfigService["Type"]
  /** The models runs choose from, the default first (the process's model choice over this configuration). */
  readonly models: ReadonlyArray<ModelConfig>
  /** The clients of those models. */
  readonly model: ModelService["Type"]
  /** 0 for the configuration the process started with, one more for each edit taken since. */
  readonly revision: number
}

/** The configuration as it is now (see the module header). */
export class LiveConfig extends Context.Tag("antler/LiveConfig")<
  LiveConfig,
  {
    /**
     * The last configuration that was taken: the file is looked at again (its size, time and inode) at most every
     * few seconds, and read only when it changed. An edit that cannot be used is refused with one warning.
     */
    readonly current: Effect.Effect<Snapshot>
  }
>() {}
