/**
 * Safety detectors of the operator's own (DeerFlow loads any class path in `safety_finish_reason.detectors`): a
 * JavaScript module named `module:Export` as `extensions.middlewares` are (a path relative to `config.yaml`, an
 * absolute path, or a package found from its folder; see `UserModule`):
 *
 *   safety_finish_reason:
 *     detectors:
 *       - use: openai_compatible_content_filter
 *       - use: ./my-detector.mjs:GatewayFilter
 *         config: { values: [sensitive] }     # given to the detector when it is created
 *
 * The export is a class (`new GatewayFilter(config)`), a function (`GatewayFilter(config)`) or an object; what it
 * gives has `detect(message)`, called synchronously on its own copy of each inspected AI message, answering
 * `null` (no signal) or `{ reason_field, reason_value, detector?, extras? }`, and may have a `name` (default: the
 * export's name). A detector that throws, or answers anything else (a promise included), counts as no hit, as
 * DeerFlow treats a raising detector. An entry whose module part is a Python path (DeerFlow's) is resolved to a
 * built-in detector by its class name, as before.
 */
import * as Effect from "effect/Effect"
import * as UserModule from "../internal/UserModule.js"
import type { SafetyFinishReasonConfig } from "../services/AppConfig.js"
import type { JsonObject } from "../state/Message.js"
import { type Detector, resolveDetector, SafetyDetectorConfigError } from "./SafetyFinishReason.js"

/** Whether a `use` names a JavaScript module (`./x.mjs:X`, `/abs/x.js:X`, `@scope/pkg:X`), not a built-in. */
export const isModuleEntry = UserModule.isScriptEntry

const errorText = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/** A JSON copy of a detector's extras; anything but a plain object is none. */
const extrasOf = (value: unknown): JsonObject => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return {}
  try {
    return JSON.parse(JSON.stringify(value)) as JsonObject
  } catch {
    return {}
  }
}

/** The detector over an object and its `detect`; an answer that is not a signal throws (no hit, see `detect`). */
export const adapt = (name: string, instance: object, detect: (message: unknown) => unknown): Detector => ({
  name,
  detect: (message) => {
    const hit = detect.call(instance, structuredClone(message))
    if (hit === null || hit === undefined) return undefined
    const { detector, extras, reason_field, reason_value } = hit as Record<string, unknown>
    if (typeof reason_field !== "string" || typeof reason_value !== "string" || reason_field === "") {
      throw new Error(`detector '${name}' answered something that is not a safety signal`)
    }
    return {
      detector: typeof detector === "string" && detector !== "" ? detector : name,
      reason_field,
      reason_value,
      extras: extrasOf(extras)
    }
  }
})

/** The detector of a module entry (at `path` of the config), created with its `config` (a copy). */
export const load = (
  entry: { readonly use: string; readonly config?: Readonly<Record<string, unknown>> | null | undefined },
  path: string,
  baseDir: string
): Effect.Effect<Detector, SafetyDetectorConfigError> =>
  Effect.gen(function*() {
    const use = entry.use
    const fail = (reason: SafetyDetectorConfigError["reason"], detail: string) =>
      new SafetyDetectorConfigError({ reason, path, use, detail })
    const parsed = UserModule.split(use)
    if (parsed === undefined) return yield* fail("unknown_detector", "not a module:Export entry")
    const exported = yield* UserModule.load(path, use, parsed, baseDir).pipe(
      // the loader's message names the path and the entry already; the error's own message adds them again
      Effect.mapError((error) => fail(error.reason, error.message.slice(`${path}: "${use}": `.length)))
    )
    const copy = structuredClone(entry.config ?? {})
    const created = yield* Effect.try({
      try: () =>
        typeof exported !== "function"
          ? exported
          : UserModule.isClass(exported)
          ? Reflect.construct(exported, [copy])
          : (exported as (config: unknown) => unknown)(copy),
      catch: (cause) => fail("init_failed", `failed when created: ${errorText(cause)}`)
    })
    const detect = typeof created === "object" && created !== null
      ? (created as { detect?: unknown }).detect
      : undefined
    if (typeof detect !== "function") {
      return yield* fail(
        "not_detector",
        `did not give a safety detector (an object with a detect(message) method); export a class or function ` +
          `taking the detector's config`
      )
    }
    const own = (created as { name?: unknown }).name
    const name = typeof own === "string" && own.trim() !== "" ? own : parsed.exportName
    return adapt(name, created as object, detect as (message: unknown) => unknown)
  })

/**
 * The detectors of a config when it names a detector module (each entry in order: a built-in resolved as
 * `SafetyFinishReason` does, a module loaded from `baseDir`, the folder of `config.yaml`); `undefined` when the
 * guard is off or names only built-ins (`SafetyFinishReason` resolves those itself).
 */
export const fromConfig = (
  config: SafetyFinishReasonConfig,
  baseDir: string
): Effect.Effect<ReadonlyArray<Detector> | undefined, SafetyDetectorConfigError> => {
  const entries = config.detectors
  if (!config.enabled || entries == null || !entries.some((e) => isModuleEntry(e.use))) {
    return Effect.succeed(undefined)
  }
  return Effect.forEach(entries, (entry, i) => {
    const path = `safety_finish_reason.detectors[${i}]`
    return isModuleEntry(entry.use) ? load(entry, path, baseDir) : resolveDetector(entry, path)
  })
}
