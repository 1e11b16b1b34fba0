/**
 * Per-command control groups, which give the sandbox a process cap that RLIMIT_NPROC cannot (that limit counts
 * every process of the host user, and root is exempt from it) and, with cgroup v2, a memory cap for the whole
 * command. Each command gets a child group of Antler's own cgroup: in cgroup v2 (needs the `pids` controller
 * delegated to Antler's group, e.g. at the root of a container's cgroup namespace) or in the cgroup v1 `pids`
 * hierarchy. The group is emptied and removed when the command ends, however it ends; groups left by an
 * Antler process that died are removed on the next detection.
 *
 * Cgroup v1's memory controller is not used: its groups sit under whatever the service manager (or session
 * machinery) made for Antler, and the per-process address-space limit stands in for it there.
 */
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Effect from "effect/Effect"

/** Where command groups are made. */
export interface Hierarchy {
  readonly version: 1 | 2
  /** Antler's own cgroup in the hierarchy (command groups are its children). */
  readonly dir: string
  /** Whether command groups get a memory limit (cgroup v2 with the memory controller). */
  readonly memory: boolean
}

/** Whether command groups can be made here, and why not when they cannot. */
export type Availability =
  | { readonly available: true; readonly hierarchy: Hierarchy }
  | { readonly available: false; readonly reason: string }

/** Antler's own cgroup directories, found from /proc/self/mountinfo and /proc/self/cgroup (pure). */
export interface Candidates {
  readonly v2?: string
  readonly v1Pids?: string
}

// mountinfo escapes spaces, tabs, newlines and backslashes as octal.
const unescape = (field: string) =>
  field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))

const under = (mountpoint: string, root: string, path: string): string | undefined => {
  if (root === "/") return path === "/" ? mountpoint : `${mountpoint.replace(/\/$/, "")}${path}`
  if (path === root) return mountpoint
  if (path.startsWith(`${root}/`)) return `${mountpoint.replace(/\/$/, "")}${path.slice(root.length)}`
  return undefined
}

/** Finds Antler's cgroup directories in a v2 hierarchy and in the v1 `pids` hierarchy, where mounted. */
export const locate = (mountinfo: string, selfCgroup: string): Candidates => {
  let v2Path: string | undefined
  let pidsPath: string | undefined
  for (const line of selfCgroup.split("\n")) {
    const match = /^(\d+):([^:]*):(.*)$/.exec(line.trim())
    if (match === null) continue
    if (match[1] === "0" && match[2] === "") v2Path = match[3]
    else if (match[2]!.split(",").includes("pids")) pidsPath = match[3]
  }
  let v2: string | undefined
  let v1Pids: string | undefined
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ")
    if (left === undefined || right === undefined) continue
    const fields = left.split(" ")
    const [fstype, , superOptions] = right.split(" ")
    const root = unescape(fields[3] ?? "")
    const mountpoint = unescape(fields[4] ?? "")
    if (fstype === "cgroup2" && v2Path !== undefined) v2 ??= under(mountpoint, root, v2Path)
    if (fstype === "cgroup" && pidsPath !== undefined && (superOptions ?? "").split(",").includes("pids")) {
      v1Pids ??= under(mountpoint, root, pidsPath)
    }
  }
  return { ...(v2 === undefined ? {} : { v2 }), ...(v1Pids === undefined ? {} : { v1Pids }) }
}

const read = (path: string) => {
  try {
    return Fs.readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

const codeOf = (cause: unknown) => (cause as NodeJS.ErrnoException | undefined)?.code ?? String(cause)

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (cause) {
    return codeOf(cause) === "EPERM"
  }
}

const groupName = () => `antler-${process.pid}-${randomBytes(4).toString("hex")}`

// Makes and removes a child group, checking that the pids limit can be written.
const tryChild = (dir: string): string | undefined => {
  const child = `${dir}/${groupName()}`
  try {
    Fs.mkdirSync(child)
  } catch (cause) {
    return `cannot create groups in ${dir} (${codeOf(cause)})`
  }
  try {
    Fs.writeFileSync(`${child}/pids.max`, "max")
    return undefined
  } catch (cause) {
    return `cannot set pids.max in ${dir} (${codeOf(cause)})`
  } finally {
    try {
      Fs.rmdirSync(child)
    } catch {
      // swept later
    }
  }
}

const usableV2 = (dir: string): { readonly hierarchy: Hierarchy } | { readonly reason: string } => {
  const controllers = (read(`${dir}/cgroup.controllers`) ?? "").trim().split(/\s+/)
  if (!controllers.includes("pids")) return { reason: `cgroup v2 (${dir}) has no pids controller for Antler` }
  const enabled = () => (read(`${dir}/cgroup.subtree_control`) ?? "").trim().split(/\s+/)
  for (const controller of ["pids", "memory"]) {
    if (!controllers.includes(controller) || enabled().includes(controller)) continue
    try {
      Fs.writeFileSync(`${dir}/cgroup.subtree_control`, `+${controller}`)
    } catch (cause) {
      if (controller === "pids") {
        return {
          reason: `cannot enable the pids controller for groups under ${dir} (${codeOf(cause)}; run Antler in ` +
            "a cgroup of its own with pids delegated)"
        }
      }
    }
  }
  const problem = tryChild(dir)
  if (problem !== undefined) return { reason: problem }
  return { hierarchy: { version: 2, dir, memory: enabled().includes("memory") } }
}

const killMembers = (dir: string, version: 1 | 2) => {
  if (version === 2) {
    try {
      Fs.writeFileSync(`${dir}/cgroup.kill`, "1")
      return
    } catch {
      // before Linux 5.14: one by one
    }
  }
  for (const pid of (read(`${dir}/cgroup.procs`) ?? "").split("\n")) {
    if (pid === "") continue
    try {
      process.kill(Number(pid), "SIGKILL")
    } catch {
      // gone
    }
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

// Kills what is left in a group and removes it, retrying while the kernel tears the processes down.
const removeGroup = async (dir: string, version: 1 | 2): Promise<void> => {
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      Fs.rmdirSync(dir)
      return
    } catch (cause) {
      if (codeOf(cause) === "ENOENT") return
    }
    killMembers(dir, version)
    await sleep(Math.min(50, 2 ** attempt))
  }
}

// Removes the groups of Antler processes that are gone (they died before cleaning up).
const sweep = (hierarchy: Hierarchy) =>
  Effect.promise(async () => {
    let names: Array<string> = []
    try {
      names = Fs.readdirSync(hierarchy.dir)
    } catch {
      return
    }
    for (const name of names) {
      const match = /^antler-(\d+)-[0-9a-f]+$/.exec(name)
      if (match === null || alive(Number(match[1]))) continue
      await removeGroup(`${hierarchy.dir}/${name}`, hierarchy.version)
    }
  })

/**
 * Finds where command groups can be made: cgroup v2 first, then the v1 `pids` hierarchy. Reads the process's
 * own mountinfo and cgroup unless given them.
 */
export const detect = (
  sources: { readonly mountinfo: string; readonly selfCgroup: string } | undefined = undefined
): Effect.Effect<Availability> =>
  Effect.suspend(() => {
    const mountinfo = sources?.mountinfo ?? read("/proc/self/mountinfo") ?? ""
    const selfCgroup = sources?.selfCgroup ?? read("/proc/self/cgroup") ?? ""
    const candidates = locate(mountinfo, selfCgroup)
    const reasons: Array<string> = []
    let found: Hierarchy | undefined
    if (candidates.v2 !== undefined) {
      const v2 = usableV2(candidates.v2)
      if ("hierarchy" in v2) found = v2.hierarchy
      else reasons.push(v2.reason)
    }
    if (found === undefined && candidates.v1Pids !== undefined) {
      const problem = tryChild(candidates.v1Pids)
      if (problem === undefined) found = { version: 1, dir: candidates.v1Pids, memory: false }
      else reasons.push(problem)
    }
    if (found === undefined) {
      if (reasons.length === 0) reasons.push("no cgroup hierarchy with the pids controller is mounted")
      return Effect.succeed<Availability>({ available: false, reason: reasons.join("; ") })
    }
    const hierarchy = found
    return Effect.as(sweep(hierarchy), { available: true, hierarchy } as Availability)
  })

/** One command's group. */
export interface Group {
  /** The group's `cgroup.procs`: a process writes its pid there to join (see `Bash.wrapped`). */
  readonly procs: string
  /** How many forks the pids limit refused so far. */
  readonly forkFailures: () => number
  /** How many processes the memory limit killed so far (cgroup v2). */
  readonly oomKills: () => number
  /** Kills whatever is left in the group and removes it. */
  readonly destroy: Effect.Effect<void>
}

const counter = (path: string, key: string) => () => {
  const match = new RegExp(`^${key} (\\d+)$`, "m").exec(read(path) ?? "")
  return match === null ? 0 : Number(match[1])
}

/** Limits of a command group (0 = none). */
export interface GroupLimits {
  readonly processes: number
  readonly memoryBytes: number
}

/** Makes a command's group with its limits. */
export const create = (hierarchy: Hierarchy, limits: GroupLimits): Effect.Effect<Group, Error> =>
  Effect.try({
    try: () => {
      const dir = `${hierarchy.dir}/${groupName()}`
      Fs.mkdirSync(dir)
      try {
        if (limits.processes > 0) Fs.writeFileSync(`${dir}/pids.max`, String(limits.processes))
        if (hierarchy.memory && limits.memoryBytes > 0) {
          Fs.writeFileSync(`${dir}/memory.max`, String(limits.memoryBytes))
          try {
            Fs.writeFileSync(`${dir}/memory.swap.max`, "0")
          } catch {
            // no swap accounting
          }
        }
      } catch (cause) {
        Fs.rmdirSync(dir)
        throw cause
      }
      return {
        procs: `${dir}/cgroup.procs`,
        forkFailures: counter(`${dir}/pids.events`, "max"),
        oomKills: counter(`${dir}/memory.events`, "oom_kill"),
        destroy: Effect.promise(() => removeGroup(dir, hierarchy.version))
      } satisfies Group
    },
    catch: (cause) => new Error(`could not create the command's cgroup (${codeOf(cause)})`)
  })
