/**
 * bubblewrap's arguments for one command: the system view, the thread's directories (bound directly, or staged
 * for the setup script), the namespaces, the user, the environment and the limits. Its options go through a
 * descriptor, so no host path is on its command line.
 */
import { UNSAFE_ENV_NAME } from "../../../services/Sandbox.js"
import type { Limits } from "./Limits.js"
import { LIMITS_PRELUDE, ulimitArgs } from "./Limits.js"
import { SETUP_SCRIPT, STAGE } from "./Setup.js"
import type { LayoutEntry, RootLayout } from "./SystemView.js"
import { etcFiles, SANDBOX_HOSTNAME, SANDBOX_USER } from "./SystemView.js"

/** A host directory shown in the sandbox at `target`. */
export interface Mount {
  readonly host: string
  readonly target: string
  readonly writable: boolean
  /** Bound by bubblewrap itself in staged mode too (a writable directory outside the stage). */
  readonly direct?: boolean | undefined
}

/**
 * How the sandbox is built. `staged`: bubblewrap prepares the system view and the setup script mounts the
 * thread's directories through overlayfs and drops to the sandbox user (needs util-linux `mount`, `umount` and
 * `unshare`); `direct`: bubblewrap alone bind-mounts them and runs the command as the sandbox user (a bind
 * mount's host path then shows in /proc/self/mountinfo).
 */
export type BwrapMode = "staged" | "direct"

/** What one sandboxed command needs. */
export interface BwrapSpec {
  readonly mode: BwrapMode
  readonly layout: RootLayout
  /**
   * Shown at their targets (created as directories), writable ones first. In staged mode every writable
   * mount must lie inside `stage.host` and have a fresh, empty `work` directory there (overlayfs's work
   * directory, on the same filesystem).
   */
  readonly mounts: ReadonlyArray<Mount & { readonly work?: string }>
  /** Directories inside read-only mounts shown empty and read-only (a disabled skill's folder). */
  readonly hidden?: ReadonlyArray<string>
  /** Staged mode: the host directory that holds the writable mounts (bound at `/.stage/thread` during setup). */
  readonly stage?: string
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly command: string
  readonly limits: Limits
}

/** A bubblewrap command: its options go through a descriptor, so no host path is on its command line. */
export interface BwrapInvocation {
  /** The options bwrap reads from fd 3 (`--args 3`), NUL-separated. */
  readonly options: ReadonlyArray<string>
  /** bwrap's command line after `bwrap` (no host paths: the sandbox can read it at /proc/1/cmdline). */
  readonly argv: ReadonlyArray<string>
  /** The contents of fds 4, 5, ... (the sandbox's generated `/etc` files). */
  readonly files: ReadonlyArray<string>
  /** Staged mode: the fd the setup script reports on (`bind TARGET` for a fallback, `fail WHY`). */
  readonly statusFd?: number
}

// Writable /proc entries that concern the whole machine. bubblewrap itself covers irq, bus and sysrq-trigger
// when it finds them writable, but not /proc/sys (its directory is never writable, its files are).
const PROC_COVERS = [
  "/proc/sysrq-trigger",
  "/proc/irq",
  "/proc/bus",
  "/proc/fs",
  "/proc/acpi",
  "/proc/driver",
  "/proc/scsi",
  "/proc/mtrr",
  "/proc/pressure"
]

/**
 * bubblewrap's invocation for one command (ECOSYSTEM §6). The system view: `/usr` and the merged-/usr symlinks
 * read-only, a minimal `/etc` of its own (generated accounts and names plus the host entries in `layout.etc`),
 * a fresh `/dev` (read-only but for a size-capped `/dev/shm`), a fresh `/proc` with its machine-wide writable
 * parts read-only, a size-capped private `/tmp`, the thread's directories at their virtual paths, and the rest
 * of the root read-only (nothing there can fill memory). Every namespace is unshared (no network, own PIDs),
 * it dies with its parent, runs in a new session (no terminal injection) with a cleared environment, and the
 * command runs as the unprivileged sandbox user with no capabilities and no way to make user namespaces.
 */
export const bwrapInvocation = (spec: BwrapSpec): BwrapInvocation => {
  const options: Array<string> = ["--ro-bind", "/usr", "/usr"]
  const place = (entry: LayoutEntry) => {
    if (entry.kind === "symlink") options.push("--symlink", entry.target, entry.path)
    else options.push("--ro-bind", entry.path, entry.path)
  }
  for (const entry of spec.layout.entries) place(entry)
  options.push("--dir", "/etc")
  for (const entry of spec.layout.etc) place(entry)
  options.push("--symlink", "../proc/self/mounts", "/etc/mtab")
  const etc = etcFiles(spec.env.HOME ?? spec.cwd)
  etc.forEach(([path], i) => options.push("--perms", "0644", "--file", String(4 + i), path))
  const sized = (path: string) => {
    if (spec.limits.tmpBytes > 0) options.push("--size", String(spec.limits.tmpBytes))
    options.push("--tmpfs", path)
  }
  options.push("--dev", "/dev")
  sized("/dev/shm")
  options.push("--remount-ro", "/dev", "--proc", "/proc")
  for (const path of PROC_COVERS) options.push("--ro-bind-try", path, path)
  if (spec.mode === "direct") options.push("--ro-bind", "/proc/sys", "/proc/sys")
  sized("/tmp")
  for (const mount of spec.mounts) options.push("--dir", mount.target)
  const staged: Array<string> = []
  if (spec.mode === "direct") {
    for (const mount of spec.mounts) options.push(mount.writable ? "--bind" : "--ro-bind", mount.host, mount.target)
    for (const dir of spec.hidden ?? []) options.push("--size", "4096", "--tmpfs", dir, "--remount-ro", dir)
  } else {
    if (spec.stage === undefined) throw new Error("a staged sandbox needs a stage directory")
    const stage = spec.stage.replace(/\/+$/, "")
    const inside = (host: string) => {
      if (host !== stage && !host.startsWith(`${stage}/`)) throw new Error(`${host} is not inside the stage`)
      return `${STAGE}/thread${host.slice(stage.length)}`
    }
    options.push("--tmpfs", STAGE, "--dir", `${STAGE}/empty`, "--bind", stage, `${STAGE}/thread`)
    spec.mounts.forEach((mount, i) => {
      if (mount.direct === true) {
        options.push(mount.writable ? "--bind" : "--ro-bind", mount.host, mount.target)
      } else if (mount.writable) {
        if (mount.work === undefined) throw new Error(`${mount.target} needs an overlay work directory`)
        staged.push("rw", inside(mount.host), mount.target, inside(mount.work))
      } else {
        options.push("--ro-bind", mount.host, `${STAGE}/ro${i}`)
        staged.push("ro", `${STAGE}/ro${i}`, mount.target, "")
      }
    })
    for (const dir of spec.hidden ?? []) staged.push("hide", "", dir, "")
  }
  options.push("--remount-ro", "/", "--unshare-all", "--unshare-user", "--hostname", SANDBOX_HOSTNAME)
  if (spec.mode === "direct") {
    options.push(
      "--uid",
      String(SANDBOX_USER.uid),
      "--gid",
      String(SANDBOX_USER.gid),
      "--disable-userns",
      "--cap-drop",
      "ALL"
    )
  } else {
    // Root of the sandbox's own user namespace, for the setup script only (see SETUP_SCRIPT).
    options.push("--uid", "0", "--gid", "0", "--cap-add", "ALL")
  }
  options.push("--die-with-parent", "--new-session", "--clearenv")
  for (const [key, value] of Object.entries(spec.env)) {
    // Variables that would make bash (the setup script is bash) or the dynamic linker run other code.
    if (UNSAFE_ENV_NAME.test(key)) continue
    options.push("--setenv", key, value)
  }
  options.push("--chdir", spec.mode === "direct" ? spec.cwd : "/")
  const [memory, fileSize, processes] = ulimitArgs(spec.limits)
  const files = etc.map(([, content]) => content)
  if (spec.mode === "direct") {
    return {
      options,
      argv: ["--args", "3", "--", "/bin/bash", "-c", LIMITS_PRELUDE, "antler-sandbox", memory!, fileSize!,
        processes!, spec.command],
      files
    }
  }
  const statusFd = 4 + files.length
  return {
    options,
    argv: ["--args", "3", "--", "/bin/bash", "-c", SETUP_SCRIPT, "antler-setup", String(statusFd), spec.cwd,
      memory!, fileSize!, processes!, spec.command, String(staged.length / 4), ...staged],
    files,
    statusFd
  }
}
