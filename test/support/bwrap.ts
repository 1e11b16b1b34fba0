/**
 * Whether the bubblewrap suites (the real, isolated `bash`) run here. Where `bwrap` is not installed at all they
 * are skipped; installed but broken fails them (they run, and say why). With `ANTLER_REQUIRE_BWRAP=1` (set by
 * `.ci/run`, beside ANTLER_REQUIRE_POSTGRES and ANTLER_REQUIRE_CHROMIUM) a bubblewrap that is missing, or that
 * cannot build the sandbox here (Antler's own probe: user namespaces disabled, for instance), is an error when
 * the suite loads, so CI never skips them silently.
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Bash from "../../src/layers/sandbox/Bash.js"

/** Whether a `bwrap` file is in one of the directories of `path` (a PATH value). */
export const onPath = (path: string | undefined): boolean =>
  (path ?? "").split(":").some((dir) => Fs.existsSync(Path.join(dir, "bwrap")))

/**
 * Whether the bubblewrap suites run: `bwrap` is on PATH. Under `ANTLER_REQUIRE_BWRAP=1`, fails instead when it
 * is not, or when `probe` (Antler's check that it can build a sandbox) says it cannot.
 */
export const installed = async (
  env: NodeJS.ProcessEnv = process.env,
  probe: Effect.Effect<Bash.BwrapStatus> = Bash.probeBwrap
): Promise<boolean> => {
  const found = onPath(env.PATH)
  if (env.ANTLER_REQUIRE_BWRAP !== "1") return found
  if (!found) throw new Error("bubblewrap is required here (ANTLER_REQUIRE_BWRAP=1): `bwrap` was not found on PATH")
  const status = await Effect.runPromise(probe)
  if (!status.available) {
    throw new Error(`bubblewrap is required here (ANTLER_REQUIRE_BWRAP=1) but cannot build a sandbox: ${status.reason}`)
  }
  return true
}
