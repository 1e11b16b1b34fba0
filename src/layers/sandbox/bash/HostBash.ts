/**
 * Host bash, used only with `sandbox.allow_host_bash: true` and no bubblewrap: its command line, and a guard
 * against mistakes (not isolation) that checks the paths a command names and rewrites virtual roots to host
 * directories.
 */
import type { Limits } from "./Limits.js"
import { LIMITS_PRELUDE, ulimitArgs } from "./Limits.js"

/** The command line for host bash (no bubblewrap): the limits, then the command. */
export const hostBashArgs = (command: string, limits: Limits): Array<string> => {
  const [memory, fileSize, processes] = ulimitArgs(limits)
  return ["-c", LIMITS_PRELUDE, "antler-sandbox", memory!, fileSize!, processes!, command]
}

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
