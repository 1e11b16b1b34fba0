/**
 * One thread's sandbox as data: what it is made from (`SandboxSpec`) and what is worked out once when it is made
 * (the mount table, the access check, the mask, the limits and the disk meter, where overlayfs work directories
 * go). The path, I/O, walking and exec modules are functions over this record.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import type { AppConfig } from "../../services/AppConfig.js"
import type { ThreadPaths } from "../../services/Sandbox.js"
import { ACP_WORKSPACE, OUTPUTS, UPLOADS, USER_DATA, WORKSPACE } from "../../services/Sandbox.js"
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
  /** Where the model sees the skills (`skills.container_path`, normalised). */
  readonly skillsContainer: string
  /** Host directories shown at other paths (`sandbox.mounts`), checked when the configuration was loaded. */
  readonly mounts: ReadonlyArray<ExtraMount>
  /**
   * Mounts that may change while the app runs (an enabled MCP filesystem server's roots), read before every
   * operation (see `refresh`).
   */
  readonly dynamicMounts?: Effect.Effect<ReadonlyArray<ExtraMount>> | undefined
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

/** A host directory shown in the sandbox besides the thread's own and the skills. */
export interface ExtraMount {
  readonly host: string
  /** Where the model sees it (absolute, normalised). */
  readonly virtual: string
  readonly writable: boolean
  /** Where it comes from, for messages. */
  readonly origin: "config" | "mcp"
}

/** What a path is opened for: `write` is allowed under the writable mounts only. */
export type Access = "read" | "write"

/** One thread's sandbox: its spec and what is derived from it. */
export interface SandboxState {
  readonly spec: SandboxSpec
  readonly paths: ThreadPaths
  /**
   * The virtual roots: workspace, uploads, outputs (writable), user-data and skills (read-only), then the extra
   * mounts (as of the last `refresh`).
   */
  readonly mounts: ReadonlyArray<MountPoint>
  /** Reads the dynamic mounts again (before each operation): what changed shows from then on. */
  readonly refresh: Effect.Effect<void>
  /** Whether a real host path lies inside the directories open for `access`. */
  readonly allowed: (real: string, access: Access) => boolean
  /**
   * Whether a real host path reached from the mount `via` lies in the skills' directory while `via` is not the
   * skills' mount: a link from elsewhere into the skills, which the skills' gate (by virtual path under the skills'
   * mount) would not see, so a disabled or refused skill's files would be read through it.
   */
  readonly intoSkills: (real: string, via: MountPoint) => boolean
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

/** The mounts, the access check and the mask of one set of mounts. */
interface View {
  readonly mounts: ReadonlyArray<MountPoint>
  readonly allowed: (real: string, access: Access) => boolean
  readonly mask: (text: string) => string
}

/** Works out a thread's sandbox from its spec (resolves the mounts' real paths). */
export const make = (spec: SandboxSpec): SandboxState => {
  const { paths } = spec
  const mount = (virtual: string, host: string, writable: boolean, origin?: MountPoint["origin"]): MountPoint => ({
    virtual,
    host,
    real: realOrSelf(host),
    writable,
    ...(origin === undefined ? {} : { origin })
  })
  const own: Array<MountPoint> = [
    mount(WORKSPACE, paths.workspace, true),
    mount(UPLOADS, paths.uploads, true),
    mount(OUTPUTS, paths.outputs, true),
    mount(USER_DATA, paths.root, false)
  ]
  if (spec.skills !== undefined) own.push(mount(spec.skillsContainer, spec.skills, false, "skills"))
  const skillsReal = own.find((m) => m.origin === "skills")?.real
  if (spec.acpWorkspace !== undefined) own.push(mount(ACP_WORKSPACE, spec.acpWorkspace, false, "acp"))
  // The data directory itself is hidden too, so another thread's host path never shows either.
  const home = spec.home.replace(/\/+$/, "")
  const realHome = realOrSelf(home)
  const ownVirtuals = own.map((m) => m.virtual)

  const viewOf = (extra: ReadonlyArray<ExtraMount>): View => {
    const mounts = [...own]
    for (const e of extra) {
      const point = mount(e.virtual, e.host, e.writable, e.origin)
      // Never one over the thread's own paths or inside the data directory (other threads' files), nor one
      // inside another: the configuration refuses these, the MCP roots are only left out.
      const clash = ownVirtuals.some((v) => isInside(point.virtual, v) || isInside(v, point.virtual)) ||
        isInside(point.real, realHome) || isInside(realHome, point.real) ||
        mounts.some((m) => m.origin !== undefined && m.origin !== "skills" &&
          (isInside(point.virtual, m.virtual) || isInside(m.virtual, point.virtual)))
      if (!clash) mounts.push(point)
    }
    const writableRoots = mounts.filter((m) => m.writable).map((m) => m.real)
    const readableRoots = mounts.map((m) => m.real)
    const allowed = (real: string, access: Access) =>
      (access === "write" ? writableRoots : readableRoots).some((root) => isInside(real, root))
    const mask = makeMask([
      ...mounts.flatMap((m) => [[m.host, m.virtual], [m.real, m.virtual]] as const),
      [home, HIDDEN_HOME],
      [realHome, HIDDEN_HOME]
    ])
    return { mounts, allowed, mask }
  }

  let key = "[]"
  let view = viewOf(spec.mounts)
  const setExtra = (extra: ReadonlyArray<ExtraMount>) => {
    const next = JSON.stringify(extra)
    if (next !== key) {
      key = next
      view = viewOf([...spec.mounts, ...extra])
    }
  }
  const refresh = spec.dynamicMounts === undefined
    ? Effect.void
    : Effect.flatMap(spec.dynamicMounts, (extra) => Effect.sync(() => setExtra(extra)))
  const mask = (text: string) => view.mask(text)
  const show = (text: string) => displayPath(mask(text.replace(/\0/g, "\\0")), view.mounts)

  // Overlayfs work directories of running commands live next to user-data (same filesystem, not visible to the
  // model).
  const threadDir = Path.dirname(paths.root)
  return {
    spec,
    paths,
    get mounts() {
      return view.mounts
    },
    refresh,
    allowed: (real, access) => view.allowed(real, access),
    intoSkills: (real, via) => skillsReal !== undefined && via.origin !== "skills" && isInside(real, skillsReal),
    mask,
    show,
    quota: Quota.make(spec.config, paths.root),
    threadDir,
    workRoot: Path.join(threadDir, WORK_DIR),
    decoder: new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
  }
}
