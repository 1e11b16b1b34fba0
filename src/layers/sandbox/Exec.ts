/**
 * Running a command in a thread's sandbox: under bubblewrap (the thread's directories at their virtual paths,
 * staged through overlayfs where it can be), or, knowingly, on the host (`sandbox.allow_host_bash`), or not at
 * all (with how to enable it). Each command gets its own cgroup where one can be made and an overlayfs work
 * directory in the thread's directory (on the host, while a skill is disabled, a view of the enabled skills
 * instead: `SkillsView`), all removed when it ends; a guard stops it at the process cap or past the
 * disk quota, and its result carries notes on the limits it ran into.
 */
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import type { ExecOptions, ExecResult } from "../../services/Sandbox.js"
import * as SkillSecrets from "../../services/SkillSecrets.js"
import * as Redact from "../../state/Redact.js"
import { OUTPUTS, SandboxError, UPLOADS, WORKSPACE } from "../../services/Sandbox.js"
import * as Bash from "./Bash.js"
import * as Cgroup from "./Cgroup.js"
import { codeOf } from "./FsErrors.js"
import * as Quota from "./Quota.js"
import type { SandboxState } from "./SandboxState.js"
import { realOrSelf } from "./SandboxState.js"
import type { MountPoint } from "./VirtualPaths.js"
import { isInside, makeMask } from "./VirtualPaths.js"

/** The message bash gives when it cannot run (no bubblewrap, host bash not allowed). */
export const bashDisabledMessage = (reason: string): string =>
  `bash is unavailable: commands run only inside a bubblewrap sandbox, and ${reason}. ` +
  "To enable bash, install bubblewrap on the machine running the agent " +
  "(Debian/Ubuntu: `apt-get install bubblewrap`), " +
  "or set `sandbox.allow_host_bash: true` in config.yaml to run commands directly on the host without isolation " +
  "(only where you trust the agent with that machine). The file tools (read_file, write_file, str_replace, ls, " +
  "glob, grep) still work."

const execResult = (outcome: Bash.ProcessOutcome, timeoutMs: number): ExecResult => ({
  output: outcome.output,
  exitCode: outcome.timedOut || outcome.stopped !== undefined ? null : outcome.exitCode,
  timedOut: outcome.timedOut,
  timeoutMs
})

/** Removes the overlayfs work directories under `root` left by Antler processes that are no longer running. */
export const sweepWorkDirs = (root: string) => {
  let names: Array<string> = []
  try {
    names = Fs.readdirSync(root)
  } catch {
    return
  }
  for (const name of names) {
    const pid = Number(/^(\d+)-/.exec(name)?.[1])
    let alive = false
    try {
      process.kill(pid, 0)
      alive = true
    } catch (cause) {
      alive = codeOf(cause) === "EPERM"
    }
    if (!alive) Bash.removeTree(Path.join(root, name))
  }
}

/**
 * What one command holds while it runs: its cgroup, its overlayfs work directory, and on the host its view of the
 * enabled skills, when it has them.
 */
interface Resources {
  readonly group: Cgroup.Group | undefined
  readonly work: string | undefined
  readonly view: string | undefined
}

/** The skills host bash must not see: the skills' mount and the disabled folders in it, relative to it. */
interface HiddenSkills {
  readonly mount: MountPoint
  readonly hidden: ReadonlyArray<string>
}

const acquireResources = (
  state: SandboxState,
  groups: Cgroup.Availability,
  staged: boolean,
  skills: HiddenSkills | undefined
) =>
  Effect.gen(function*() {
    const { limits } = state.quota
    // First, so that a view that cannot be made leaves nothing else to release.
    let view: string | undefined
    if (skills !== undefined) {
      view = Path.join(state.workRoot, `${process.pid}-${randomBytes(6).toString("hex")}`)
      const made = view
      yield* Effect.try({
        try: () => Bash.buildSkillsView(skills.mount.host, made, skills.hidden),
        catch: (cause) => {
          Bash.removeTree(made)
          return new SandboxError({
            reason: "io",
            message: `The view of the enabled skills could not be made (${codeOf(cause) ?? "error"}); the command ` +
              "did not run.",
            cause
          })
        }
      })
    }
    let group: Cgroup.Group | undefined
    if (groups.available && (limits.processes > 0 || limits.memoryBytes > 0)) {
      const made = yield* Effect.either(
        Cgroup.create(groups.hierarchy, { processes: limits.processes, memoryBytes: limits.memoryBytes })
      )
      if (made._tag === "Right") group = made.right
      else yield* state.spec.warn("cgroup", `sandbox limits: ${made.left.message}; the command runs without it`)
    }
    let work: string | undefined
    if (staged) {
      try {
        work = Path.join(state.workRoot, `${process.pid}-${randomBytes(6).toString("hex")}`)
        for (const name of ["0", "1", "2"]) Fs.mkdirSync(Path.join(work, name), { recursive: true })
      } catch {
        work = undefined
      }
    }
    return { group, work, view } satisfies Resources
  })

const releaseResources = (resources: Resources) =>
  Effect.zipRight(
    resources.group?.destroy ?? Effect.void,
    Effect.sync(() => {
      if (resources.work !== undefined) Bash.removeTree(resources.work)
      if (resources.view !== undefined) Bash.removeTree(resources.view)
    })
  )

// The disabled skills' folders (virtual) inside the skills' mount, which host bash must not see.
const hiddenSkills = (state: SandboxState, folders: ReadonlyArray<string>): HiddenSkills | undefined => {
  const mount = state.mounts.find((m) => m.origin === "skills")
  if (mount === undefined) return undefined
  const hidden = folders.filter((dir) => isInside(dir, mount.virtual)).map((dir) =>
    Path.posix.relative(mount.virtual, dir)
  )
  return hidden.length === 0 ? undefined : { mount, hidden }
}

/** How the child process is started. */
interface Launch {
  readonly file: string
  readonly args: ReadonlyArray<string>
  /** Texts the process reads from fds 3, 4, ... */
  readonly inputs: ReadonlyArray<string>
  readonly statusFd: number | undefined
  readonly env: Record<string, string>
  readonly cwd: string | undefined
}

// Under bubblewrap: the thread's directories at their virtual paths, staged through overlayfs when `work` was
// made, the skills and the ACP workspace read-only, the other mounts (configured, MCP roots) read-only or bound
// directly when writable.
const bwrapLaunch = (
  state: SandboxState,
  bwrap: string,
  work: string | undefined,
  command: string,
  env: Record<string, string>,
  hidden: ReadonlyArray<string>
): Launch => {
  const { paths, spec } = state
  const { limits } = state.quota
  const stage = realOrSelf(state.threadDir)
  const writable = [[paths.workspace, WORKSPACE], [paths.uploads, UPLOADS], [paths.outputs, OUTPUTS]]
  const bwrapMounts: Array<Bash.Mount & { readonly work?: string }> = writable.map(([host, target], i) =>
    work === undefined
      ? { host: host!, target: target!, writable: true }
      : {
        host: realOrSelf(host!),
        target: target!,
        writable: true,
        work: Path.join(realOrSelf(work), `${i}`)
      }
  )
  for (const mount of state.mounts) {
    if (mount.origin === undefined) continue
    // A writable mount outside the thread's directory cannot be staged through overlayfs: bubblewrap binds it.
    bwrapMounts.push({ host: mount.real, target: mount.virtual, writable: mount.writable, direct: mount.writable })
  }
  // Staged only when every writable directory of the thread is inside the thread's directory (overlayfs needs
  // its work directory on the same mount); otherwise bind-mounted directly.
  const mode = work !== undefined &&
      bwrapMounts.every((m) => !m.writable || m.direct === true || (isInside(m.host, stage) && m.work !== undefined))
    ? "staged"
    : "direct"
  const invocation = Bash.bwrapInvocation({
    mode,
    layout: spec.layout(),
    mounts: bwrapMounts,
    // (only a directory inside a read-only mount: nothing the command writes is hidden from it)
    hidden: hidden.filter((dir) =>
      state.mounts.some((m) => !m.writable && isInside(dir, m.virtual) && dir !== m.virtual)
    ),
    stage,
    cwd: WORKSPACE,
    env: {
      PATH: Bash.SANDBOX_PATH,
      HOME: WORKSPACE,
      USER: Bash.SANDBOX_USER.name,
      LOGNAME: Bash.SANDBOX_USER.name,
      LANG: "C.UTF-8",
      TMPDIR: "/tmp",
      ...env
    },
    command,
    limits: {
      tmpBytes: limits.tmpBytes,
      memoryBytes: limits.memoryBytes,
      fileSizeBytes: limits.fileSizeBytes,
      processes: Quota.nprocPerNamespace() ? limits.processes : 0
    }
  })
  return {
    file: bwrap,
    args: invocation.argv,
    inputs: [invocation.options.join("\0"), ...invocation.files],
    statusFd: invocation.statusFd,
    env: { PATH: Bash.SANDBOX_PATH },
    cwd: undefined
  }
}

// On the host: the command (its virtual roots rewritten to host directories, the skills' to the view of the
// enabled ones when there is one) run from the workspace.
const hostLaunch = (
  state: SandboxState,
  command: string,
  env: Record<string, string>,
  view: string | undefined
): Launch => {
  const { paths } = state
  const { limits } = state.quota
  const rewritten = Bash.rewriteHostCommand(
    command,
    state.mounts.map((m) => [m.virtual, view !== undefined && m.origin === "skills" ? view : m.host] as const)
  )
  return {
    file: "/bin/bash",
    // RLIMIT_NPROC would count every process of the host user here, so it is not set.
    args: Bash.hostBashArgs(`cd ${Bash.shellQuote(paths.workspace)} && ${rewritten}`, {
      tmpBytes: 0,
      memoryBytes: limits.memoryBytes,
      fileSizeBytes: limits.fileSizeBytes,
      processes: 0
    }),
    inputs: [],
    statusFd: undefined,
    // Never the agent's own environment: it holds API keys.
    env: { PATH: Bash.SANDBOX_PATH, HOME: paths.workspace, LANG: "C.UTF-8", ...env },
    cwd: paths.workspace
  }
}

/** Runs a shell command in the thread's sandbox (see the module's comment for how). */
export const exec = (
  state: SandboxState,
  command: string,
  options: ExecOptions = {}
): Effect.Effect<ExecResult, SandboxError> =>
  Effect.gen(function*() {
    const { mounts, quota, spec } = state
    const { limits, usage } = quota
    const configuredMs = Math.round(spec.config.bash_command_timeout * 1000)
    const timeoutMs = Math.max(1, Math.min(options.timeoutMs ?? configuredMs, configuredMs))
    const maxOutputChars = options.maxOutputChars ?? spec.config.bash_output_max_chars
    const status = yield* spec.bwrap
    const env = { ...options.env }
    let skills: HiddenSkills | undefined
    if (!status.available) {
      if (!spec.config.allow_host_bash) {
        return yield* new SandboxError({ reason: "bash_disabled", message: bashDisabledMessage(status.reason) })
      }
      const problem = Bash.validateHostCommand(command, mounts.map((m) => m.virtual))
      if (problem !== undefined) {
        return yield* new SandboxError({ reason: "path_escape", message: `Command refused: ${problem}.` })
      }
      skills = hiddenSkills(state, options.hidden ?? [])
      const named = Bash.pathInFolders(command, (options.hidden ?? []).map((dir) => Path.posix.normalize(dir)))
      if (named !== undefined) {
        return yield* new SandboxError({
          reason: "permission",
          message: `Command refused: ${named.path} is in a disabled skill's folder (${named.folder}); access to its ` +
            "files is blocked. Enable the skill in settings before using it."
        })
      }
    } else if (status.warning !== undefined) {
      yield* spec.warn("bwrap", `bash sandbox: ${status.warning}`)
    }
    const groups = yield* spec.cgroups
    yield* Quota.warnUnenforced(quota, groups, spec.warn)
    const staged = status.available && status.mode === "staged"
    return yield* Effect.acquireUseRelease(
      acquireResources(state, groups, staged, skills),
      ({ group, view, work }) =>
        Effect.gen(function*() {
          const { args, cwd, env: childEnv, file, inputs, statusFd } = status.available
            ? bwrapLaunch(state, status.path, work, command, env, options.hidden ?? [])
            : hostLaunch(state, command, env, view)
          // The view's host path reads as the skills' virtual one, as the skills directory's does.
          const viewMask = view === undefined || skills === undefined
            ? undefined
            : makeMask([[view, skills.mount.virtual], [realOrSelf(view), skills.mount.virtual]])
          const paths = viewMask === undefined ? state.mask : (text: string) => state.mask(viewMask(text))
          // (a secret first, whole, before a host path inside it could be masked away from under it)
          const secrets = (options.masked ?? []).length === 0 ? undefined : SkillSecrets.mask(options.masked!)
          const mask = secrets === undefined ? paths : (text: string) => paths(secrets(text))
          // A command may shrink a thread that is over its quota, not grow it.
          let diskLimit = limits.diskQuotaBytes
          if (diskLimit > 0 && (yield* Effect.promise(() => usage.estimate())) > diskLimit) {
            diskLimit = Math.max(diskLimit, yield* Effect.promise(() => usage.exact()))
          }
          const launch = Bash.wrapped(group?.procs, inputs.length + (statusFd === undefined ? 0 : 1), file, args)
          const onOutput = options.onOutput
          const lines = new Bash.LineBuffer()
          // (a line longer than the buffer's comes in pieces: a secret split between two is held back until whole)
          const held = secrets === undefined ? undefined : Redact.make(options.masked).stream()
          const show = (text: string) => {
            if (onOutput === undefined || text === "") return
            const shown = held === undefined ? mask(text) : held.push(mask(text))
            if (shown !== "") onOutput(shown)
          }
          const outcome = yield* Bash.run({
            file: launch.file,
            args: launch.args,
            ...(cwd === undefined ? {} : { cwd }),
            env: childEnv,
            timeoutMs,
            maxOutputChars,
            mask,
            inputs,
            statusFd,
            ...(() => {
              const guard = Quota.guardOf(quota, group, diskLimit)
              return guard === undefined ? {} : { guard }
            })(),
            ...(onOutput === undefined ? {} : { onOutput: (chunk: string) => show(lines.push(chunk)) })
          })
          show(lines.end())
          const rest = held?.end() ?? ""
          if (onOutput !== undefined && rest !== "") onOutput(rest)
          const setup = Bash.parseSetupStatus(outcome.status)
          if (setup.bound.length > 0) {
            yield* spec.warn(
              "overlay",
              "bash sandbox: overlayfs could not be mounted for the thread's directories, so they are " +
                "bind-mounted and /proc/self/mountinfo in the sandbox shows their host paths"
            )
          }
          if (setup.failure !== undefined && outcome.exitCode === 125) {
            return yield* new SandboxError({
              reason: "io",
              message: `The sandbox could not be set up (${mask(setup.failure)}); the command did not run.`
            })
          }
          const notes = Quota.notesOf(quota, outcome, group, status.available)
          // A command that ends before the watcher's next look may have passed the quota all the same.
          if (diskLimit > 0 && outcome.stopped === undefined && !outcome.timedOut) {
            if ((yield* Effect.promise(() => usage.estimate())) > diskLimit) {
              const used = yield* Effect.promise(() => usage.exact())
              if (used > diskLimit) notes.push(`The thread's files now use ${Quota.quotaMessage(quota, used)}`)
            }
          }
          return {
            ...execResult(outcome, timeoutMs),
            ...(outcome.stopped === undefined ? {} : { stopped: outcome.stopped }),
            ...(notes.length === 0 ? {} : { notes })
          }
        }),
      releaseResources
    )
  })
