/**
 * DeerFlow's `plugins:` list (Python packages whose `install(registry, config)` contributes middlewares, task and
 * model-call observers, services and HTTP routes). Antler does not load them: its own middlewares are
 * `extensions.middlewares` (JavaScript modules). An entry marked `required: true` (and not `enabled: false`) is
 * one its operator said the app must not start without: DeerFlow refuses to start when it cannot load one, and so
 * does Antler, which can load none. An entry with a key DeerFlow does not know (`require: true`) is refused as
 * DeerFlow refuses it, so a misspelt `required` is not read as optional. The other entries are named among the
 * keys Antler does not use.
 */
import { isRecord } from "../../state/Json.js"

/** The keys of one `plugins:` entry (DeerFlow's `ExtensionSpec`, which forbids others). */
export const ENTRY_KEYS: ReadonlySet<string> = new Set(["enabled", "name", "package", "use", "config", "required"])

// (shown in an error on a terminal: control characters are replaced)
const clip = (text: string, max = 80) =>
  (text.length > max ? `${text.slice(0, max - 3)}...` : text).replace(/[\u0000-\u001f\u007f-\u009f]/g, "?")

/** The problems of `raw`'s (a whole configuration value) `plugins:` list that stop the app starting. */
export const problems = (raw: unknown): ReadonlyArray<{ readonly path: string; readonly message: string }> => {
  if (!isRecord(raw) || !Array.isArray(raw.plugins)) return []
  const out: Array<{ path: string; message: string }> = []
  raw.plugins.forEach((entry: unknown, i) => {
    const path = `plugins[${i}]`
    if (!isRecord(entry)) {
      out.push({ path, message: "expected a mapping (use: module:install, required: true or false, ...)" })
      return
    }
    const unknown = Object.keys(entry).filter((key) => !ENTRY_KEYS.has(key))
    if (unknown.length > 0) {
      out.push({
        path,
        message: `unknown key${unknown.length === 1 ? "" : "s"} ${unknown.map((key) => clip(key, 40)).join(", ")} ` +
          `(a plugin entry takes ${[...ENTRY_KEYS].join(", ")})`
      })
      return
    }
    if (entry.required === true && entry.enabled !== false) {
      const use = typeof entry.use === "string" ? `"${clip(entry.use)}" ` : ""
      out.push({
        path: `${path}.required`,
        message: `the plugin ${use}is required, but Antler does not load DeerFlow's Python plugins, so it would ` +
          "start without it. Write its middlewares as extensions.middlewares (JavaScript modules), or set " +
          "required: false (or enabled: false) to start without it"
      })
    }
  })
  return out
}
