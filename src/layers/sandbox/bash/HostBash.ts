/**
 * Host bash, used only with `sandbox.allow_host_bash: true` and no bubblewrap: its command line, and a guard
 * against mistakes (not isolation) that checks the paths a command names and rewrites virtual roots to host
 * directories.
 */
import * as Path from "node:path"
import type { Lexed, Part } from "../../../state/ShellLexer.js"
import { lex } from "../../../state/ShellLexer.js"
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

// Words that may come before a command's name in a part (DeerFlow's prefix and end keywords, its wrappers).
const PREFIX_WORDS: ReadonlySet<string> = new Set([
  "!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "select", "then", "time", "until",
  "while", "command", "builtin"
])
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*\+?=/
// Commands whose argument `/` would walk, list or change the host's root (DeerFlow's list, and a few more).
const ROOT_PATH_COMMANDS: ReadonlySet<string> = new Set([
  "awk", "cat", "chmod", "chown", "cp", "du", "find", "grep", "head", "less", "ln", "ls", "more", "mv", "rm", "rsync",
  "sed", "tail", "tar", "tree"
])

/**
 * Whether a `/…` fragment is text rather than a path (DeerFlow's shape rule): a first segment with non-ASCII
 * characters (`/端口`; DeerFlow lets any non-ASCII character through, but `/home/用户/...` is a real path), or
 * braces that are only `{identifier}` placeholders (`f'/{port}'`, `/devices/{id}/port`). Brace expansion
 * (`{a,b}`) and `${VAR}` expand to real paths, so they are not text.
 */
const isTextFragment = (fragment: string): boolean => {
  if (/[^\x00-\x7f]/.test(fragment.slice(1).split("/")[0]!)) return true
  if (!fragment.includes("{") && !fragment.includes("}")) return false
  if (fragment.includes("${")) return false
  const blocks = fragment.match(/\{[^{}]*\}/g) ?? []
  const count = (c: string) => fragment.split(c).length - 1
  return count("{") === blocks.length && count("}") === blocks.length &&
    blocks.every((block) => /^\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(block))
}

/** Why one simple command leaves the sandbox's directories (`cd $HOME`, `ls /`), or undefined. */
const partProblem = (part: Part, roots: ReadonlyArray<string>): string | undefined => {
  const words = part.words.filter((w) => w.redirect === undefined)
  let at = 0
  while (at < words.length && (PREFIX_WORDS.has(words[at]!.value) || ASSIGNMENT.test(words[at]!.raw))) at++
  // an unquoted `~` (also after `=`) is the home directory
  const home = part.words.map((w) => (w.redirect === undefined ? w.raw : w.value))
    .find((text) => /^~|^[A-Za-z_][A-Za-z0-9_]*=~/.test(text))
  if (home !== undefined) return `the path ${home} is in the home directory, outside the sandbox`
  const name = words[at]?.value.split("/").pop()
  if (name === undefined) return undefined
  const args = words.slice(at + 1).map((w) => w.value)
  if (ROOT_PATH_COMMANDS.has(name) && args.includes("/")) return "the path / is outside the sandbox"
  if (name !== "cd" && name !== "pushd") return undefined
  const target = args.find((arg) => !arg.startsWith("-") || arg === "-")
  const problem = target === undefined
    ? `${name} without a directory goes to the home directory`
    : target === "-" || /^[~$`]/.test(target) || target.includes("$") || target.includes("`")
    ? `${name} ${target} may leave the sandbox`
    : target.startsWith("/") && !roots.some((root) => target === root || target.startsWith(`${root}/`))
    ? `${name} ${target} is outside the sandbox`
    : undefined
  return problem === undefined ? undefined : `unsafe working directory change: ${problem}; use cd with a path under ` +
    `${roots.join(", ")} or a relative one`
}

/** The first problem of any simple command in a lexed command or in what it substitutes. */
const lexedProblem = (lexed: Lexed, roots: ReadonlyArray<string>, depth = 0): string | undefined => {
  for (const part of lexed.parts) {
    const problem = partProblem(part, roots)
    if (problem !== undefined) return problem
    for (const word of part.words) {
      for (const inner of word.substitutions) {
        const nested = depth < 16 ? lexedProblem(inner, roots, depth + 1) : undefined
        if (nested !== undefined) return nested
      }
    }
  }
  if (depth < 16) {
    for (const inner of lexed.substitutions) {
      const nested = lexedProblem(inner, roots, depth + 1)
      if (nested !== undefined) return nested
    }
  }
  return undefined
}

/**
 * Checks a command for host bash: absolute paths must be under a virtual root or a system prefix, no `..`
 * segments outside URLs, no `file://` URLs, no `cd`/`pushd` out of the virtual roots (to `$HOME`, `~`, `-`,
 * a variable or `/`), no `/` handed to `ls`, `cat`, `rm` and the like. A `/…` that is text (non-ASCII, or an
 * `{identifier}` template) is not a path. Returns the problem, or undefined. A guard against mistakes, not
 * isolation (DeerFlow's `validate_local_bash_command_paths`).
 */
export const validateHostCommand = (command: string, roots: ReadonlyArray<string>): string | undefined => {
  if (/\bfile:\/\//i.test(command)) return "file:// URLs are not allowed in commands"
  if (command.includes("\0")) return "the command contains a NUL byte"
  // global copies made here: a module-level global regex would carry its lastIndex from one caller to the next
  const withoutUrls = command.replace(new RegExp(URL, "g"), " ")
  if (DOTDOT.test(withoutUrls)) return "'..' path segments are not allowed in commands; use absolute virtual paths"
  for (const match of withoutUrls.matchAll(new RegExp(ABSOLUTE, "g"))) {
    const path = match[2]!
    // a lone `/` is division or text unless a command takes it as a path (checked on the lexed command below)
    if (path === "/" || isTextFragment(path)) continue
    const allowed = roots.some((root) => path === root || path.startsWith(`${root}/`)) ||
      SYSTEM_PREFIXES.some((prefix) => path.startsWith(prefix) || `${path}/` === prefix)
    if (!allowed) return `the path ${path} is outside the sandbox (allowed: ${roots.join(", ")} and system binaries)`
  }
  return lexedProblem(lex(command), roots)
}

/**
 * The first absolute path a host command names inside one of `folders` (the disabled skills' virtual folders),
 * with that folder, or undefined. Doubled slashes and `.` segments are read as the shell reads them; a path the
 * command builds (a glob, a variable, a `cd` then a relative path) is not seen here (host bash hides the folders
 * from those through a view of the skills: `SkillsView`).
 */
export const pathInFolders = (
  command: string,
  folders: ReadonlyArray<string>
): { readonly path: string; readonly folder: string } | undefined => {
  if (folders.length === 0) return undefined
  const withoutUrls = command.replace(new RegExp(URL, "g"), " ")
  for (const match of withoutUrls.matchAll(new RegExp(ABSOLUTE, "g"))) {
    const path = match[2]!
    const normal = Path.posix.normalize(path)
    const folder = folders.find((dir) => normal === dir || normal.startsWith(`${dir}/`))
    if (folder !== undefined) return { path, folder }
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
