/**
 * One thread's sandbox as data: what it is made from (`SandboxSpec`) and what is worked out once when it is made
 * (the mount table, the access check, the mask, the limits and the disk meter, where overlayfs work directories
 * go). The path, I/O, walking and exec modules are functions over this record.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import type * as Effect from "effect/Effect"
import type { AppConfig } from "../../services/AppConfig.js"
import type { ThreadPaths } from "../../services/Sandbox.js"
import { ACP_WORKSPACE, OUTPUTS, SKILLS, UPLOADS, USER_DATA, WORKSPACE } from "../../services/Sandbox.js"
import type * as Bash from "./Bash.js"
import type * as Cgroup from "./Cgroup.js"
import type { KeyedLock } from "./KeyedLock.js"
import * as Quota from "./Quota.js"
import type { MountPoint } from "./VirtualPaths.js"
import { displayPath, HIDDEN_HOME, isInside, makeMask } from "./VirtualPaths.js"

/** Everything a thread's sandbox is made from. */
export interface SandboxSpec {
  readonly threadId: string
  readonly userId: string
  readonly paths: ThreadPaths
  /** The host skills directory, when configured and present. */
  readonly skills: string | undefined
  /** The thread's ACP workspace (mounted read-only at `/mnt/acp-workspace`), when ACP agents are configured. */
  readonly acpWorkspace?: string | undefined
  /** The data directory, hidden from messages. */
  readonly home: string
  readonly config: AppConfig["sandbox"]
  readonly bwrap: Effect.Effect<Bash.BwrapStatus>
  /** Where command cgroups can be made (detected once per provider). */
  readonly cgroups: Effect.Effect<Cgroup.Availability>
  readonly layout: () => Bash.RootLayout
  /** Logs a warning once per provider and key. */
  readonly warn: (key: string, message: string) => Effect.Effect<void>
  readonly lock: KeyedLock
}

/** What a path is opened for: `write` is allowed under the writable mounts only. */
export type Access = "read" | "write"

/** One thread's sandbox: its spec and what is derived from it. */
export interface SandboxState {
  readonly spec: SandboxSpec
  readonly paths: ThreadPaths
  /** The virtual roots: workspace, uploads, outputs (writable), user-data and skills (read-only). */
  readonly mounts: ReadonlyArray<MountPoint>
  /** Whether a real host path lies inside the directories open for `access`. */
  readonly allowed: (real: string, access: Access) => boolean
  /** Replaces host directories (the thread's and the data directory) in text with virtual roots. */
  readonly mask: (text: string) => string
  /** How a path argument is echoed in messages: masked, NULs escaped, never a host path. */
  readonly show: (text: string) => string
  readonly quota: Quota.Quota
  /** The thread's directory (the parent of `user-data`). */
  readonly threadDir: string
  /** Where overlayfs work directories of running commands are made (`WORK_DIR` in the thread's directory). */
  readonly workRoot: string
  /** Decodes file contents as UTF-8, failing on anything else. */
  readonly decoder: InstanceType<typeof TextDecoder>
}

/** Where overlayfs work directories of running commands are made, inside the thread's directory. */
export const WORK_DIR = ".sandbox-work"

/** The real path (symlinks resolved), or the path itself when it cannot be resolved. */
export const realOrSelf = (path: string) => {
  try {
    return Fs.realpathSync(path)
  } catch {
    return path
  }
}

/** Works out a thread's sandbox from its spec (resolves the mounts' real paths). */
export const make = (spec: SandboxSpec): SandboxState => {
  const { paths } = spec
  const mount = (virtual: string, host: string, writable: boolean): MountPoint => ({
    virtual,
    host,
    real: realOrSelf(host),
    writable
  })
  const mounts: Array<MountPoint> = [
    mount(WORKSPACE, paths.workspace, true),
    mount(UPLOADS, paths.uploads, true),
    mount(OUTPUTS, paths.outputs, true),
    mount(USER_DATA, paths.root, false)
  ]
  if (spec.skills !== undefined) mounts.push(mount(SKILLS, spec.skills, false))
  if (spec.acpWorkspace !== undefined) mounts.push(mount(ACP_WORKSPACE, spec.acpWorkspace, false))
  const writableRoots = mounts.filter((m) => m.writable).map((m) => m.real)
  const readableRoots = mounts.map((m) => m.real)
  const allowed = (real: string, access: Access) =>
    (access === "write" ? writableRoots : readableRoots).some((root) => isInside(real, root))

  // The data directory itself is hidden too, so another thread's host path never shows either.
  const home = spec.home.replace(/\/+$/, "")
  const mask = makeMask([
    ...mounts.flatMap((m) => [[m.host, m.virtual], [m.real, m.virtual]] as const),
    [home, HIDDEN_HOME],
    [realOrSelf(home), HIDDEN_HOME]
  ])
  const show = (text: string) => displayPath(mask(text.replace(/\0/g, "\\0")))

  // Overlayfs work directories of running commands live next to user-data (same filesystem, not visible to the
  // model).
  const threadDir = Path.dirname(paths.root)
  return {
    spec,
    paths,
    mounts,
    allowed,
    mask,
    show,
    quota: Quota.make(spec.config, paths.root),
    threadDir,
    workRoot: Path.join(threadDir, WORK_DIR),
    decoder: new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
  }
}
