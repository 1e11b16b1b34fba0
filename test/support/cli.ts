/**
 * How tests start `antler` as a process: the bundle of the current sources made by the global setup
 * (test/support/cliBundle.ts), else the sources through tsx. Spread it after `process.execPath`.
 */
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const TSX = pathToFileURL(Path.join(ROOT, "node_modules/tsx/dist/loader.mjs")).href
const MAIN = Path.join(ROOT, "src/programs/main.ts")

/** The node arguments that run the CLI (before the CLI's own arguments). */
export const antlerCommand: ReadonlyArray<string> = process.env.ANTLER_TEST_CLI !== undefined
  ? [process.env.ANTLER_TEST_CLI]
  : ["--import", TSX, MAIN]

/**
 * The environment of an `antler` child: the caller's, without its OpenAI, Antler or DeerFlow settings, no colour,
 * and `extra` on top.
 */
export const childEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OPENAI_") && !key.startsWith("ANTLER_") && !key.startsWith("DEER_FLOW_")) env[key] = value
  }
  return { ...env, NO_COLOR: "1", ...extra }
}
