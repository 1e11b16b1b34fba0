/**
 * The process runner behind the sandbox's `bash`: bubblewrap isolation (the system view, the setup script that
 * mounts the thread's directories and drops to the unprivileged sandbox user, resource limits, and a probe),
 * the host-bash guard used when isolation is knowingly switched off, and a runner that spawns a real child
 * process, captures stdout and stderr together, enforces a timeout that kills the whole process tree, stops it
 * when a guard (a resource limit) says so, and kills it too when the calling fiber is interrupted.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import { StringDecoder } from "node:string_decoder"
import * as Effect from "effect/Effect"
import { SandboxError } from "../../services/Sandbox.js"

// ---------------------------------------------------------------------------------------------------------
// Output

/** The marker put where the middle of a long output was cut (SPEC §7.2). */
export const middleMarker = (skipped: number): string => `\n... [middle truncated: ${skipped} chars skipped] ...\n`

/**
 * Middle-truncates from the first and last parts of a text of `total` chars (`head` holds at least the
 * first `max` chars, `tail` at least the last `max`): half head, half tail, marker between, at most `max`
 * chars in all. `max = 0` means unlimited.
 */
export const middleTruncateParts = (head: string, tail: string, total: number, max: number): string => {
  if (max <= 0 || total <= max) return head
  // The marker is sized for the worst case (every char skipped) so the result never exceeds `max`.
  const kept = Math.max(0, max - middleMarker(total).length)
  if (kept === 0) return head.slice(0, max)
  const headLength = Math.floor(kept / 2)
  const tailLength = kept - headLength
  return head.slice(0, headLength) + middleMarker(total - kept) + (tailLength > 0 ? tail.slice(-tailLength) : "")
}

/** Middle-truncates a text to `max` chars (0 = unlimited) with `middleMarker`. */
export const middleTruncate = (text: string, max: number): string =>
  middleTruncateParts(text, text, text.length, max)

/** What the runner keeps of an unlimited output (0 = unlimited still needs a bound on memory). */
export const UNLIMITED_OUTPUT_CHARS = 32 * 1024 * 1024

/** Keeps the first and the last `cap` chars of a stream of text, and counts the rest. */
export class OutputCollector {
  head = ""
  tail = ""
  total = 0
  constructor(readonly cap: number) {}
  push(chunk: string): void {
    if (chunk.length === 0) return
    this.total += chunk.length
    if (this.head.length < this.cap) this.head += chunk.slice(0, this.cap - this.head.length)
    this.tail = (this.tail + chunk).slice(-this.cap)
  }
  /** The collected text, masked, then middle-truncated to `max` (0 = unlimited, bounded by the cap). */
  render(max: number, mask: (text: string) => string = (text) => text): string {
    if (this.total <= this.cap) {
      const text = mask(this.head)
      return middleTruncate(text, max)
    }
    // Masking shortens host paths, so the parts are masked first and the total adjusted by what it removed.
    const head = mask(this.head)
    const tail = mask(this.tail)
    const total = this.total - (this.head.length - head.length) - (this.tail.length - tail.length)
    return middleTruncateParts(head, tail, total, max > 0 ? max : this.cap)
  }
}

/**
 * Cuts a stream of text into lines for showing it as it comes: `push` returns the complete lines (each with
 * its `\n` or `\r`) and, past `max` chars without a line end, the pending text; `end` returns what is left.
 * Lines are what masking needs: a host path is never split between two pieces, unless a line is that long.
 */
export class LineBuffer {
  private pending = ""
  constructor(readonly max = 4096) {}
  push(chunk: string): string {
    const text = this.pending + chunk
    const cut = Math.max(text.lastIndexOf("\n"), text.lastIndexOf("\r")) + 1
    if (text.length - cut > this.max) {
      this.pending = ""
      return text
    }
    this.pending = text.slice(cut)
    return text.slice(0, cut)
  }
  end(): string {
    const rest = this.pending
    this.pending = ""
    return rest
  }
}

// ---------------------------------------------------------------------------------------------------------
// bubblewrap

/** A host directory shown in the sandbox at `target`. */
export interface Mount {
  readonly host: string
  readonly target: string
  readonly writable: boolean
}

/** One entry of the host's root or `/etc` as the sandbox reproduces it. */
export type LayoutEntry =
  | { readonly path: string; readonly kind: "symlink"; readonly target: string }
  | { readonly path: string; readonly kind: "directory" | "file" }

/** How the host's root is laid out: the top-level system paths (merged /usr or not) and what of `/etc` to show. */
export interface RootLayout {
  readonly entries: ReadonlyArray<LayoutEntry>
  /** The host `/etc` entries programs need and that name no host account or host name. */
  readonly etc: ReadonlyArray<LayoutEntry>
}

const ROOT_PATHS = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]

// What programs read from /etc: the dynamic linker's cache, Debian's alternatives (`awk`, `python`...), time
// zone, certificates, MIME and magic databases, protocol and service names, interpreter and font settings.
// Not the account databases, the host's names, its network or package-manager settings (npmrc and pip.conf may
// hold tokens), nor machine-id.
const ETC_NAMES = [
  "alternatives",
  "bash.bashrc",
  "ca-certificates",
  "ca-certificates.conf",
  "debian_version",
  "ethertypes",
  "fonts",
  "gai.conf",
  "inputrc",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "locale.alias",
  "localtime",
  "magic",
  "magic.mime",
  "matplotlibrc",
  "mime.types",
  "os-release",
  "perl",
  "protocols",
  "R",
  "rpc",
  "services",
  "ssl/certs",
  "ssl/openssl.cnf",
  "texmf",
  "timezone",
  "vim"
]
const ETC_PATTERNS = [/^python3(\.\d+)?$/, /^java-[\w.-]+$/, /^ImageMagick-\d+$/]

const layoutEntry = (path: string): LayoutEntry | undefined => {
  try {
    const stat = Fs.lstatSync(path)
    if (stat.isSymbolicLink()) return { path, kind: "symlink", target: Fs.readlinkSync(path) }
    if (stat.isDirectory()) return { path, kind: "directory" }
    if (stat.isFile()) return { path, kind: "file" }
  } catch {
    // absent on this host
  }
  return undefined
}

/** Reads the host's root layout (merged-/usr symlinks, the `/etc` entries to show). */
export const hostRootLayout = (): RootLayout => {
  let names: Array<string> = []
  try {
    names = Fs.readdirSync("/etc").filter((name) => ETC_PATTERNS.some((pattern) => pattern.test(name)))
  } catch {
    // no /etc
  }
  const present = (paths: ReadonlyArray<string>) =>
    paths.map(layoutEntry).filter((entry): entry is LayoutEntry => entry !== undefined)
  return {
    entries: present(ROOT_PATHS).filter((entry) => entry.kind !== "file"),
    etc: present([...ETC_NAMES, ...names.sort()].map((name) => `/etc/${name}`))
  }
}

/** The PATH inside the sandbox (and for host bash). */
export const SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/** The sandbox's own user (the conventional overflow id, owning nothing on the host). */
export const SANDBOX_USER = { name: "sandbox", uid: 65534, gid: 65534 } as const

/** The sandbox's host name. */
export const SANDBOX_HOSTNAME = "sandbox"

/**
 * The sandbox's own account database and names (its `/etc` has no host account and no host name): one user,
 * `sandbox`, whose home is `home`.
 */
export const etcFiles = (home: string): ReadonlyArray<readonly [path: string, content: string]> => {
  const { name, uid, gid } = SANDBOX_USER
  return [
    ["/etc/passwd", `${name}:x:${uid}:${gid}:${name}:${home}:/bin/bash\n`],
    ["/etc/group", `${name}:x:${gid}:\n`],
    ["/etc/hostname", `${SANDBOX_HOSTNAME}\n`],
    ["/etc/hosts", `127.0.0.1\tlocalhost\n127.0.1.1\t${SANDBOX_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n`],
    [
      "/etc/nsswitch.conf",
      "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\n" +
      "services: files\nethers: files\nrpc: files\n"
    ],
    ["/etc/resolv.conf", ""]
  ]
}

/** Resource limits of one command (0 = none). */
export interface Limits {
  /** Size of `/tmp` and of `/dev/shm`, each. */
  readonly tmpBytes: number
  /** Address space of each process (RLIMIT_AS). */
  readonly memoryBytes: number
  /** The largest file a process may write (RLIMIT_FSIZE). */
  readonly fileSizeBytes: number
  /** Tasks of the sandbox's user (RLIMIT_NPROC: a per-sandbox cap only when not running as root). */
  readonly processes: number
}

/** No limits. */
export const NO_LIMITS: Limits = { tmpBytes: 0, memoryBytes: 0, fileSizeBytes: 0, processes: 0 }

/** `ulimit` arguments for limits (bash: -v and -f in KiB), core dumps always off. */
const ulimitArgs = (limits: Limits): Array<string> => {
  const kib = (bytes: number) => String(Math.max(1, Math.floor(bytes / 1024)))
  return [
    limits.memoryBytes > 0 ? kib(limits.memoryBytes) : "",
    limits.fileSizeBytes > 0 ? kib(limits.fileSizeBytes) : "",
    limits.processes > 0 ? String(limits.processes) : ""
  ]
}

// Sets hard and soft limits (a process without CAP_SYS_RESOURCE cannot raise them again), then runs the
// command in a fresh bash, so its line numbers and `$0` are its own. Arguments: memory KiB, file KiB, tasks
// (empty = none), command.
const LIMITS_PRELUDE = `limit() { [ -z "$2" ] || ulimit -H -S "$1" "$2"; }
ulimit -H -S -c 0 && limit -v "$1" && limit -f "$2" && limit -u "$3" ||
  { echo "antler: could not apply the sandbox's resource limits" >&2; exit 126; }
exec /bin/bash -c "$4" 2>&1`

/**
 * The first command of a staged sandbox, run as root of the sandbox's user namespace (capabilities over that
 * namespace only). It mounts each of the thread's directories from the staging area with overlayfs, so
 * /proc/self/mountinfo shows a mount whose source is `/.stage/...` instead of the host path (a bind mount shows
 * the directory's path on the host filesystem, whatever else is done); falls back to a bind mount where overlayfs
 * cannot be used (reported on the status descriptor); detaches the staging area; allows no further user
 * namespaces (the one made next is the last); makes /proc/sys read-only; applies the limits; and finally runs
 * the command as the unprivileged `sandbox` user of a nested user namespace (no capabilities anywhere).
 * Arguments: status fd, working directory, memory KiB, file KiB, tasks, command, mount count, then per mount:
 * rw|ro, source, target, overlay work directory.
 */
export const SETUP_SCRIPT = `set -u
status=$1 cwd=$2 mem=$3 fsize=$4 nproc=$5 cmd=$6 n=$7
shift 7
fail() { echo "fail $*" >&"$status"; exit 125; }
overlay() { command -p mount -t overlay overlay -o "nosuid,nodev,userxattr,index=off,$1" "$2" 2>/dev/null; }
bind() { command -p mount --bind -o "$1" "$2" "$3" 2>/dev/null && echo "bind $3" >&"$status"; }
while [ "$n" -gt 0 ]; do
  kind=$1 src=$2 dst=$3 work=$4
  shift 4
  n=$((n - 1))
  if [ "$kind" = rw ]; then
    overlay "lowerdir=/.stage/empty,upperdir=$src,workdir=$work" "$dst" || bind nosuid,nodev "$src" "$dst" ||
      fail "could not mount $dst"
  else
    overlay "ro,lowerdir=$src:/.stage/empty" "$dst" || bind ro,nosuid,nodev "$src" "$dst" ||
      fail "could not mount $dst"
  fi
done
command -p umount -l /.stage 2>/dev/null || fail "could not detach the staging area"
echo 1 2>/dev/null >/proc/sys/user/max_user_namespaces || fail "could not limit user namespaces"
command -p mount --bind -o ro /proc/sys /proc/sys 2>/dev/null || fail "could not make /proc/sys read-only"
limit() { [ -z "$2" ] || ulimit -H -S "$1" "$2"; }
ulimit -H -S -c 0 && limit -v "$mem" && limit -f "$fsize" && limit -u "$nproc" ||
  fail "could not apply the resource limits"
cd "$cwd" 2>/dev/null || fail "could not enter $cwd"
unshare=$(command -p -v unshare) || fail "unshare (util-linux) is missing"
exec {status}>&-
exec "$unshare" --user --map-user=${SANDBOX_USER.uid} --map-group=${SANDBOX_USER.gid} -- /bin/bash -c "$cmd" 2>&1`

/** Where a staged sandbox sees its staging area (detached before the command runs). */
export const STAGE = "/.stage"

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
  } else {
    if (spec.stage === undefined) throw new Error("a staged sandbox needs a stage directory")
    const stage = spec.stage.replace(/\/+$/, "")
    const inside = (host: string) => {
      if (host !== stage && !host.startsWith(`${stage}/`)) throw new Error(`${host} is not inside the stage`)
      return `${STAGE}/thread${host.slice(stage.length)}`
    }
    options.push("--tmpfs", STAGE, "--dir", `${STAGE}/empty`, "--bind", stage, `${STAGE}/thread`)
    spec.mounts.forEach((mount, i) => {
      if (mount.writable) {
        if (mount.work === undefined) throw new Error(`${mount.target} needs an overlay work directory`)
        staged.push("rw", inside(mount.host), mount.target, inside(mount.work))
      } else {
        options.push("--ro-bind", mount.host, `${STAGE}/ro${i}`)
        staged.push("ro", `${STAGE}/ro${i}`, mount.target, "")
      }
    })
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
    if (/^(BASH_ENV|ENV|SHELLOPTS|BASHOPTS|BASH_FUNC_.*|LD_.*)$/.test(key)) continue
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

/** The command line for host bash (no bubblewrap): the limits, then the command. */
export const hostBashArgs = (command: string, limits: Limits): Array<string> => {
  const [memory, fileSize, processes] = ulimitArgs(limits)
  return ["-c", LIMITS_PRELUDE, "antler-sandbox", memory!, fileSize!, processes!, command]
}

/** What a staged setup reported: targets that fell back to bind mounts, and why it failed (if it did). */
export const parseSetupStatus = (
  text: string
): { readonly bound: ReadonlyArray<string>; readonly failure?: string } => {
  const bound: Array<string> = []
  let failure: string | undefined
  for (const line of text.split("\n")) {
    if (line.startsWith("bind ")) bound.push(line.slice(5))
    else if (line.startsWith("fail ")) failure ??= line.slice(5)
  }
  return failure === undefined ? { bound } : { bound, failure }
}

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
 * How a command is started (in its own process group): a bash wrapper closes every descriptor it inherited
 * beyond stdio and the `keep` descriptors meant for the program (Antler may itself have inherited descriptors
 * without close-on-exec, which the sandbox must not get), raises the OOM score (the kernel's OOM killer then
 * picks sandboxed processes first), joins the command's cgroup when there is one (`procs`, the group's
 * `cgroup.procs`, before anything is forked, so every descendant is in it), lowers the CPU priority, and execs
 * the program.
 */
export const wrapped = (
  procs: string | undefined,
  keep: number,
  file: string,
  args: ReadonlyArray<string>
) => ({
  file: "/bin/bash",
  args: [
    "-c",
    `for fd in /proc/self/fd/*; do
  fd=\${fd##*/}
  [ "$fd" -le 2 ] || [ "$fd" -lt "$1" ] || eval "exec $fd>&-" 2>/dev/null
done
echo 1000 2>/dev/null >/proc/self/oom_score_adj
if [ -n "$2" ]; then echo $$ >"$2" || { echo "antler: could not join the command's cgroup" >&2; exit 125; }; fi
shift 2
exec nice -n 10 "$@"`,
    "antler-sandbox",
    String(3 + keep),
    procs ?? "",
    file,
    ...args
  ]
})

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

/** Removes a directory tree that may hold overlayfs work directories (mode 000 when made by a non-root user). */
export const removeTree = (path: string): void => {
  try {
    Fs.rmSync(path, { recursive: true, force: true })
  } catch {
    try {
      const chmod = (dir: string) => {
        Fs.chmodSync(dir, 0o700)
        for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
          if (entry.isDirectory()) chmod(`${dir}/${entry.name}`)
        }
      }
      chmod(path)
      Fs.rmSync(path, { recursive: true, force: true })
    } catch {
      // left behind; swept later
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Host bash (only with `sandbox.allow_host_bash: true` and no bubblewrap)

/** System prefixes an absolute path in a host command may use besides the virtual roots (SPEC §7.2). */
export const SYSTEM_PREFIXES = ["/bin/", "/usr/bin/", "/usr/sbin/", "/sbin/", "/opt/homebrew/bin/", "/dev/"]

// An absolute path starts a word: at the start, or after whitespace, a quote, `=`, `:`, a redirection or an
// operator. URLs are taken out first so their `//host/path` is not read as a path.
const BOUNDARY = String.raw`(^|[\s"'\x60=:(<>|;&])`
const ABSOLUTE = new RegExp(`${BOUNDARY}(/[^\\s"'\\x60;&|<>()]*)`)
const URL = /\b[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^\s"'`;&|<>()]*/
const DOTDOT = /(^|[\s/"'`=:(<>|;&])\.\.(?=$|[\s/"'`;&|<>)])/

/**
 * Checks a command for host bash: absolute paths must be under a virtual root or a system prefix, no `..`
 * segments, no `file://` URLs. Returns the problem, or undefined. A guard against mistakes, not isolation.
 */
export const validateHostCommand = (command: string, roots: ReadonlyArray<string>): string | undefined => {
  if (/\bfile:\/\//i.test(command)) return "file:// URLs are not allowed in commands"
  if (command.includes("\0")) return "the command contains a NUL byte"
  if (DOTDOT.test(command)) return "'..' path segments are not allowed in commands; use absolute virtual paths"
  // global copies made here: a module-level global regex would carry its lastIndex from one caller to the next
  const withoutUrls = command.replace(new RegExp(URL, "g"), " ")
  for (const match of withoutUrls.matchAll(new RegExp(ABSOLUTE, "g"))) {
    const path = match[2]!
    if (path === "/") return "the path / is outside the sandbox"
    const allowed = roots.some((root) => path === root || path.startsWith(`${root}/`)) ||
      SYSTEM_PREFIXES.some((prefix) => path.startsWith(prefix) || `${path}/` === prefix)
    if (!allowed) return `the path ${path} is outside the sandbox (allowed: ${roots.join(", ")} and system binaries)`
  }
  return undefined
}

/** Rewrites virtual roots at the start of words to host directories (longest root first). */
export const rewriteHostCommand = (command: string, mapping: ReadonlyArray<readonly [string, string]>): string => {
  const sorted = [...mapping].sort((a, b) => b[0].length - a[0].length)
  const roots = sorted.map(([root]) => root.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")
  const pattern = new RegExp(`${BOUNDARY}(${roots})(?=$|[/\\s"'\\x60;&|<>()])`, "g")
  const hosts = new Map(sorted)
  return command.replace(pattern, (_, before: string, root: string) => `${before}${shellQuote(hosts.get(root)!)}`)
}

/** Quotes a string for bash. */
export const shellQuote = (value: string): string => /^[A-Za-z0-9_./:@%+=,-]+$/.test(value)
  ? value
  : `'${value.replace(/'/g, `'\\''`)}'`

// ---------------------------------------------------------------------------------------------------------
// Running

/** Checked while a process runs: returns why to stop it now, or undefined to let it go on. */
export interface Guard {
  readonly intervalMs: number
  readonly check: () => Promise<string | undefined>
}

/** One process to run. */
export interface ProcessSpec {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly cwd?: string
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMs: number
  /** Output cap in chars (0 = unlimited, bounded by `UNLIMITED_OUTPUT_CHARS`). */
  readonly maxOutputChars: number
  /** Applied to the output before truncation (masks host paths). */
  readonly mask?: (text: string) => string
  /** Texts the process reads from fds 3, 4, ... (each written, then closed). */
  readonly inputs?: ReadonlyArray<string>
  /** A further fd (right after the inputs) whose text is collected into `status`. */
  readonly statusFd?: number | undefined
  /** Stops the process (and its group) when its check gives a reason. */
  readonly guard?: Guard
  /** Called with each piece of output (stdout or stderr, decoded) as it arrives; not masked, not capped. */
  readonly onOutput?: (chunk: string) => void
}

/** What a process did. */
export interface ProcessOutcome {
  readonly output: string
  readonly exitCode: number | null
  readonly signal: string | null
  readonly timedOut: boolean
  /** Why the guard stopped it, if it did. */
  readonly stopped?: string
  /** What the process wrote on `statusFd`. */
  readonly status: string
}

// After the main process exits, how long to wait for its pipes to close before giving up on them.
const PIPE_GRACE_MS = 500
// A status channel holds a few short lines; more is not read.
const STATUS_MAX_CHARS = 64 * 1024

const killGroup = (pid: number | undefined) => {
  if (pid === undefined) return
  try {
    process.kill(-pid, "SIGKILL")
  } catch {
    // already gone
  }
}

/**
 * Runs a process in its own process group, stdout and stderr captured together (the sandbox's command writes both
 * to one pipe, so they keep the order the command wrote them in). On timeout, when the guard
 * says so, on interruption of the fiber and after the main process exits, the whole group is killed (under
 * bwrap the PID namespace then takes every descendant with it, including `setsid`/`nohup` children).
 */
export const run = (spec: ProcessSpec): Effect.Effect<ProcessOutcome, SandboxError> =>
  Effect.async<ProcessOutcome, SandboxError>((resume) => {
    const collector = new OutputCollector(spec.maxOutputChars > 0 ? spec.maxOutputChars : UNLIMITED_OUTPUT_CHARS)
    const inputs = spec.inputs ?? []
    if (spec.statusFd !== undefined && spec.statusFd !== 3 + inputs.length) {
      resume(Effect.die(new Error(`the status fd must be ${3 + inputs.length}`)))
      return
    }
    let child: ChildProcess.ChildProcess
    try {
      child = ChildProcess.spawn(spec.file, spec.args, {
        cwd: spec.cwd,
        env: { ...spec.env },
        detached: true,
        stdio: [
          "ignore",
          "pipe",
          "pipe",
          ...inputs.map(() => "pipe" as const),
          ...(spec.statusFd === undefined ? [] : ["pipe" as const])
        ]
      })
    } catch (cause) {
      resume(Effect.fail(new SandboxError({ reason: "io", message: "Could not start the command", cause })))
      return
    }
    inputs.forEach((text, i) => {
      const stream = child.stdio[3 + i] as NodeJS.WritableStream | null
      // The process may die before reading (EPIPE): that shows in its exit, not here.
      ;(stream as unknown as { on: (event: string, f: () => void) => void } | null)?.on("error", () => undefined)
      stream?.end(text)
    })
    let status = ""
    if (spec.statusFd !== undefined) {
      const stream = child.stdio[spec.statusFd] as NodeJS.ReadableStream | null
      stream?.on("error", () => undefined)
      stream?.on("data", (chunk: Buffer) => {
        if (status.length < STATUS_MAX_CHARS) status += chunk.toString("utf8")
      })
    }
    let timedOut = false
    let stopped: string | undefined
    let finished = false
    let exit: { code: number | null; signal: string | null } | undefined
    let grace: NodeJS.Timeout | undefined
    let guardTimer: NodeJS.Timeout | undefined
    const decoders = [new StringDecoder("utf8"), new StringDecoder("utf8")] as const
    const collect = (text: string) => {
      collector.push(text)
      if (spec.onOutput !== undefined && text !== "") spec.onOutput(text)
    }
    child.stdout!.on("data", (chunk: Buffer) => collect(decoders[0].write(chunk)))
    child.stderr!.on("data", (chunk: Buffer) => collect(decoders[1].write(chunk)))
    const timer = setTimeout(() => {
      timedOut = true
      killGroup(child.pid)
    }, spec.timeoutMs)

    const guard = spec.guard
    if (guard !== undefined) {
      const tick = () => {
        guardTimer = setTimeout(() => {
          guard.check().then(
            (reason) => {
              if (finished || exit !== undefined) return
              if (reason !== undefined && !timedOut) {
                stopped = reason
                killGroup(child.pid)
              } else {
                tick()
              }
            },
            () => {
              if (!finished && exit === undefined) tick()
            }
          )
        }, guard.intervalMs)
      }
      tick()
    }

    const stopTimers = () => {
      clearTimeout(timer)
      if (guardTimer !== undefined) clearTimeout(guardTimer)
    }
    const finish = () => {
      if (finished) return
      finished = true
      stopTimers()
      if (grace !== undefined) clearTimeout(grace)
      collect(decoders[0].end())
      collect(decoders[1].end())
      const output = collector.render(spec.maxOutputChars, spec.mask)
      resume(Effect.succeed({
        output,
        exitCode: exit?.code ?? null,
        signal: exit?.signal ?? null,
        timedOut,
        status,
        ...(stopped === undefined ? {} : { stopped })
      }))
    }
    child.once("error", (cause) => {
      if (finished) return
      finished = true
      stopTimers()
      resume(Effect.fail(new SandboxError({ reason: "io", message: `Could not start the command (${cause.message})` })))
    })
    child.once("exit", (code, signal) => {
      exit = { code, signal }
      if (guardTimer !== undefined) clearTimeout(guardTimer)
      // Whatever the command left running in its group goes too; then wait (briefly) for the pipes.
      killGroup(child.pid)
      grace = setTimeout(() => {
        for (const stream of child.stdio) stream?.destroy()
        finish()
      }, PIPE_GRACE_MS)
    })
    child.once("close", (code, signal) => {
      exit ??= { code, signal }
      finish()
    })

    return Effect.async<void>((done) => {
      if (finished || exit !== undefined) {
        killGroup(child.pid)
        done(Effect.void)
        return
      }
      finished = true
      stopTimers()
      // Wait for the kill to land, so an interrupted call leaves nothing running behind it.
      const fallback = setTimeout(() => done(Effect.void), 5_000)
      child.once("exit", () => {
        clearTimeout(fallback)
        done(Effect.void)
      })
      killGroup(child.pid)
    })
  })
