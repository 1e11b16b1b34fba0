/**
 * Whether bubblewrap can be used here, and how: finds `bwrap` and checks that it can really build a staged
 * sandbox (else a direct one) on this host, where user namespaces or overlayfs may be unavailable.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Effect from "effect/Effect"
import type { BwrapMode } from "./Bwrap.js"
import { bwrapInvocation } from "./Bwrap.js"
import { NO_LIMITS } from "./Limits.js"
import { run } from "./Process.js"
import { parseSetupStatus, removeTree } from "./Setup.js"
import { hostRootLayout, SANDBOX_PATH, SANDBOX_USER } from "./SystemView.js"

/** Whether bubblewrap can be used here (and how), and why not when it cannot. */
export type BwrapStatus =
  | { readonly available: true; readonly path: string; readonly mode: BwrapMode; readonly warning?: string }
  | { readonly available: false; readonly reason: string }

const findExecutable = (name: string): string | undefined => {
  const dirs = [...(process.env.PATH ?? "").split(":"), ...SANDBOX_PATH.split(":")].filter((dir) => dir.startsWith("/"))
  for (const dir of dirs) {
    const candidate = `${dir}/${name}`
    try {
      Fs.accessSync(candidate, Fs.constants.X_OK)
      if (Fs.statSync(candidate).isFile()) return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/**
 * Finds `bwrap` and checks that it can really build the sandbox here (user namespaces may be disabled, e.g.
 * in some containers): it runs a staged sandbox over a scratch directory, and a direct one if that fails.
 */
export const probeBwrap: Effect.Effect<BwrapStatus> = Effect.suspend(() => {
  const path = findExecutable("bwrap")
  if (path === undefined) {
    return Effect.succeed<BwrapStatus>({ available: false, reason: "`bwrap` was not found on PATH" })
  }
  const layout = hostRootLayout()
  const attempt = (mode: BwrapMode) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        const stage = Fs.mkdtempSync(`${Os.tmpdir()}/antler-probe-`)
        for (const dir of ["data", "work"]) Fs.mkdirSync(`${stage}/${dir}`)
        return stage
      }),
      (stage) => {
        const invocation = bwrapInvocation({
          mode,
          layout,
          mounts: [{ host: `${stage}/data`, target: "/mnt/probe", writable: true, work: `${stage}/work` }],
          stage,
          cwd: "/mnt/probe",
          env: { PATH: SANDBOX_PATH, HOME: "/mnt/probe" },
          command: "echo probe > file && test \"$(id -u)\" = " + SANDBOX_USER.uid,
          limits: NO_LIMITS
        })
        return run({
          file: path,
          args: invocation.argv,
          inputs: [invocation.options.join("\0"), ...invocation.files],
          statusFd: invocation.statusFd,
          env: { PATH: SANDBOX_PATH },
          timeoutMs: 10_000,
          maxOutputChars: 2000
        }).pipe(
          Effect.map((outcome) => {
            const status = parseSetupStatus(outcome.status)
            const wrote = Fs.existsSync(`${stage}/data/file`)
            if (outcome.exitCode === 0 && wrote && status.failure === undefined) {
              return { ok: true as const, bound: status.bound.length > 0 }
            }
            const detail = status.failure ?? outcome.output.trim().slice(0, 500)
            return { ok: false as const, detail: detail || `exit ${outcome.exitCode ?? outcome.signal}` }
          }),
          Effect.catchAll((error) => Effect.succeed({ ok: false as const, detail: error.message }))
        )
      },
      (stage) => Effect.sync(() => removeTree(stage))
    )
  return Effect.gen(function*() {
    const staged = yield* attempt("staged")
    if (staged.ok) {
      return staged.bound
        ? {
          available: true,
          path,
          mode: "staged",
          warning: "overlayfs cannot be mounted in the sandbox here, so the thread's directories are bind-mounted " +
            "and /proc/self/mountinfo inside the sandbox shows their host paths"
        }
        : { available: true, path, mode: "staged" }
    }
    const direct = yield* attempt("direct")
    if (direct.ok) {
      return {
        available: true,
        path,
        mode: "direct",
        warning: `the staged sandbox could not be built (${staged.detail}), so commands run in a plain bubblewrap ` +
          "sandbox whose /proc/self/mountinfo shows the host paths of the thread's directories"
      }
    }
    return {
      available: false,
      reason: `\`bwrap\` is installed but cannot create a sandbox here (${direct.detail})`
    }
  })
})
