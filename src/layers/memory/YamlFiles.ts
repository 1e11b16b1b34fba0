/**
 * DeerMem's own YAML files (`memory.backend_config.patterns_dir` and `prompts_dir`): where their directory is, and
 * one file read as YAML at the boundary, bounded in size (`TextFile`), its problems as a sentence naming it.
 */
import * as Either from "effect/Either"
import * as Path from "node:path"
import * as OnDemand from "../../internal/OnDemand.js"
import type { AppConfigService } from "../../services/AppConfig.js"
import * as TextFile from "../TextFile.js"

/** Bytes of one pattern or prompt file at most (DeerMem's largest, `memory_update.chat.yaml`, is about 13 KiB). */
export const MAX_YAML_BYTES = 128 * 1024

/**
 * The directory a `patterns_dir` or `prompts_dir` names: relative to the configuration file (as `storage_path`),
 * else to the working directory; undefined when it is empty, null or absent (DeerMem's built-in files).
 */
export const dirOf = (app: AppConfigService["Type"], dir: string | null | undefined): string | undefined => {
  if (dir === undefined || dir === null || dir.trim() === "") return undefined
  const base = app.source !== undefined ? Path.dirname(Path.resolve(app.source)) : process.cwd()
  return Path.resolve(base, dir)
}

/** One YAML file's value: absent (the file does not exist), or its value, or what is wrong with it. */
export type Read =
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Value"; readonly value: unknown }
  | { readonly _tag: "Invalid"; readonly problem: string }

/** A YAML file read and parsed (at most `MAX_YAML_BYTES`, 100 aliases): absent, its value, or why not. */
export const readYaml = (file: string): Read => {
  const text = TextFile.read(file, MAX_YAML_BYTES)
  if (Either.isLeft(text)) {
    return text.left.reason === "missing" ? { _tag: "Missing" } : { _tag: "Invalid", problem: text.left.problem }
  }
  const value = Either.try(() => OnDemand.yaml().parse(text.right, { maxAliasCount: 100 }) as unknown)
  if (Either.isLeft(value)) {
    const error = value.left
    const message = error instanceof Error ? error.message : String(error)
    return { _tag: "Invalid", problem: `invalid YAML: ${message.split("\n")[0]}` }
  }
  return { _tag: "Value", value: value.right }
}
