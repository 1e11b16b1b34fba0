/**
 * The system view a sandbox reproduces from the host: the top-level system paths (merged /usr or not), the `/etc`
 * entries programs need, and the sandbox's own account database, host name, user and PATH.
 */
import * as Fs from "node:fs"

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
