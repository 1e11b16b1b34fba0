/**
 * The code a shell command holds inside it, as bash would run it (for SandboxAudit): the word in command position
 * (after reserved words, assignments, redirections and wrappers such as `env`, `sudo`, `timeout`, `xargs`), the
 * scripts it hands to a shell (`sh -c`, `eval`, `su -c`, `env -S`, `trap`, `watch`, `alias`, what a shell or `source`
 * reads from a heredoc, a here-string or a process substitution that prints code), and the code it hands to an
 * interpreter of another language (Python, Perl, Ruby, Node, PHP), which cannot be lexed as shell.
 */
import type { Lexed, Part, Word } from "./ShellLexer.js"
import * as ShellLexer from "./ShellLexer.js"

// Words that keep the next word in command position: reserved words that open or join a command.
const KEYWORDS: ReadonlySet<string> = new Set([
  "if",
  "then",
  "do",
  "else",
  "elif",
  "while",
  "until",
  "!",
  "{",
  "}",
  "fi",
  "done",
  "esac",
  "time",
  "coproc"
])
/** Wrappers that keep the next word in command position, with their options that take an argument. */
const WRAPPERS: Record<string, ReadonlySet<string>> = {
  env: new Set(["-u", "--unset", "-C", "--chdir", "-S", "--split-string"]),
  command: new Set(),
  builtin: new Set(),
  exec: new Set(["-a"]),
  nohup: new Set(),
  time: new Set(["-f", "--format", "-o", "--output"]),
  sudo: new Set(["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-R", "-T"]),
  doas: new Set(["-u", "-C"]),
  nice: new Set(["-n", "--adjustment"]),
  setsid: new Set(),
  timeout: new Set(["-s", "--signal", "-k", "--kill-after"]),
  xargs: new Set(["-I", "-i", "-n", "-P", "-L", "-l", "-s", "-d", "-E", "-e", "-a", "--arg-file", "--delimiter"]),
  stdbuf: new Set(["-i", "-o", "-e"]),
  ionice: new Set(["-c", "-n", "-p", "-P", "-u"]),
  strace: new Set(["-e", "-o", "-p", "-s", "-u", "-E"]),
  unshare: new Set()
}
const SHELLS: ReadonlySet<string> = new Set(["sh", "bash", "dash", "ksh", "zsh", "ash", "mksh", "yash", "posh"])
/** A shell named by a variable: `$SHELL -c …`, `"${BASH}" -c …`. */
const SHELL_VARIABLE = /^\$\{?(?:SHELL|BASH|0)\}?$/
/** Commands other than shells that run a string argument through a shell, and the flags that give it. */
const STRING_RUNNERS: Record<string, ReadonlySet<string>> = {
  su: new Set(["-c", "--command"]),
  runuser: new Set(["-c", "--command"]),
  script: new Set(["-c", "--command"]),
  flock: new Set(["-c", "--command"]),
  env: new Set(["-S", "--split-string"])
}
const SHELL_SCRIPT_FLAG: ReadonlySet<string> = new Set(["-c"])
const SHELL_OPTIONS_WITH_ARGUMENT: ReadonlySet<string> = new Set(["-o", "+o", "-O", "+O", "--rcfile", "--init-file"])
const NONE: ReadonlySet<string> = new Set()
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=/

const basename = (word: string) => word.slice(word.lastIndexOf("/") + 1)

const isShell = (word: Word) => SHELLS.has(basename(word.value)) || SHELL_VARIABLE.test(word.value)

/** The index of the word in command position: after keywords, assignments, redirections and wrappers. */
export const commandIndex = (words: ReadonlyArray<Word>): number => {
  let i = 0
  for (let guard = 0; i < words.length && guard < 64; guard++) {
    const word = words[i]!
    if (word.redirect !== undefined || ASSIGNMENT.test(word.raw)) {
      i++
      continue
    }
    if (KEYWORDS.has(word.raw)) {
      // `coproc NAME { …; }` names the coprocess before its command.
      i += word.raw === "coproc" && words[i + 2]?.raw === "{" ? 2 : 1
      continue
    }
    if (word.raw === "function") {
      i += 2 // `function NAME { …; }`: the body follows the name
      continue
    }
    const name = basename(word.value)
    const withArgument = WRAPPERS[name]
    if (withArgument === undefined) break
    i++
    while (i < words.length && words[i]!.value.startsWith("-") && words[i]!.value.length > 1) {
      const flag = words[i]!.value
      i += withArgument.has(flag) ? 2 : 1
      if (flag === "--") break
    }
    if (name === "timeout" && i < words.length) i++ // the duration
  }
  return i
}

/** The value of the option `flags` (`-c x`, `-lc x`, `--command x`, `--command=x`) in `words` from `from`. */
const optionValue = (
  words: ReadonlyArray<Word>,
  from: number,
  flags: ReadonlySet<string>,
  stopAtOperand: boolean,
  withArgument: ReadonlySet<string> = NONE
): string | undefined => {
  const short = [...flags].filter((f) => f.length === 2).map((f) => f[1]!)
  for (let k = from; k < words.length; k++) {
    const word = words[k]!
    if (word.redirect !== undefined) continue
    const flag = word.value
    if (flags.has(flag)) return words[k + 1]?.value
    if (withArgument.has(flag)) {
      k++
      continue
    }
    if (/^\+[A-Za-z]+$/.test(flag)) continue // `+o`, `+e`: options turned off
    const long = [...flags].find((f) => f.startsWith("--") && flag.startsWith(`${f}=`))
    if (long !== undefined) return flag.slice(long.length + 1)
    if (/^-[A-Za-z]+$/.test(flag) && short.some((f) => flag.includes(f))) {
      // A cluster (`-lc`, `-ec`): the argument is the next word; attached (`-Scmd`) for env.
      const at = flag.indexOf(short.find((f) => flag.includes(f))!)
      return at === flag.length - 1 ? words[k + 1]?.value : flag.slice(at + 1)
    }
    if (flag === "--" || (stopAtOperand && !flag.startsWith("-"))) return undefined
  }
  return undefined
}

const ECHO_FLAGS = /^-[neE]+$/

/**
 * The code a command prints, when its output is run by a shell (`source <(echo …)`, `bash <(printf …)`):
 * the arguments of `echo` and `printf` and the heredocs and here-strings of `cat`.
 */
const printedCode = (lexed: Lexed): Array<string> => {
  const out: Array<string> = []
  for (const part of lexed.parts) {
    const index = commandIndex(part.words)
    const name = basename(part.words[index]?.value ?? "")
    const args = part.words.slice(index + 1).filter((w) => w.redirect === undefined)
    if (name === "echo") {
      let k = 0
      while (k < args.length && ECHO_FLAGS.test(args[k]!.value)) k++
      out.push(args.slice(k).map((w) => w.value).join(" "))
    } else if (name === "printf" && args.length > 0) {
      // The format with its arguments in place (`printf '%s\n' 'cmd'`, `printf 'rm -rf %s' /`).
      const values = args.slice(1).map((w) => w.value)
      let next = 0
      const filled = ShellLexer.decodeAnsiC(args[0]!.value)
        .replace(/%[-+ #0-9.]*[sbqdiouxXcfeEgG]/g, () => values[next++] ?? "")
      out.push([filled, ...values.slice(next)].join(" "))
    }
    else if (name === "cat") {
      for (const doc of part.heredocs) out.push(doc.body)
      for (const word of part.words) if (word.redirect === "<<<") out.push(word.value)
    }
  }
  return out
}

/**
 * The shell code a part hands to a shell as text, to be audited as commands: `eval`'s arguments, the script
 * of `sh|bash|… -c` (wherever the shell appears: `xargs sh -c`, `find -exec bash -c`), `su -c`, `env -S`,
 * `trap`'s action, `watch`'s command, an `alias` value, and what a shell or `source` reads from a heredoc,
 * a here-string or a process substitution printing code.
 */
export const scriptsOf = (part: Part): Array<string> => {
  const words = part.words
  const scripts: Array<string> = []
  const index = commandIndex(words)
  const command = words[index]
  const name = command === undefined ? "" : basename(command.value)
  const rest = words.slice(index + 1).filter((w) => w.redirect === undefined)
  if (name === "eval") scripts.push(rest.map((w) => w.value).join(" "))
  else if (name === "trap") {
    const action = rest.find((w) => !w.value.startsWith("-"))
    if (action !== undefined && rest.length > 1) scripts.push(action.value)
  } else if (name === "watch") {
    let k = 0
    while (k < rest.length && rest[k]!.value.startsWith("-")) {
      k += /^(?:-n|--interval|-d|-q|--equexit)$/.test(rest[k]!.value) ? 2 : 1
    }
    scripts.push(rest.slice(k).map((w) => w.value).join(" "))
  } else if (name === "alias") {
    for (const word of rest) {
      const at = word.value.indexOf("=")
      if (at > 0) scripts.push(word.value.slice(at + 1))
    }
  }
  // `$(printf 'cmd')` as the command: what the substitution prints is run.
  if (command !== undefined && /^"?(?:\$\(|`)/.test(command.raw)) {
    for (const sub of command.substitutions) scripts.push(...printedCode(sub))
  }
  let readsStdin = name === "source" || name === "."
  for (let k = 0; k < words.length; k++) {
    const word = words[k]!
    if (word.redirect !== undefined) continue
    if (isShell(word)) {
      const script = optionValue(words, k + 1, SHELL_SCRIPT_FLAG, true, SHELL_OPTIONS_WITH_ARGUMENT)
      if (script !== undefined) scripts.push(script)
      else readsStdin = true
      continue
    }
    const runner = STRING_RUNNERS[basename(word.value)]
    if (runner !== undefined) {
      const script = optionValue(words, k + 1, runner, false)
      if (script !== undefined) scripts.push(script)
    }
  }
  if (readsStdin) {
    for (const doc of part.heredocs) scripts.push(doc.body)
    for (const word of words) {
      if (word.redirect === "<<<") scripts.push(word.value)
      const input = word.redirect === "<" || (word.redirect === undefined && word.raw.startsWith("<("))
      if (input) for (const sub of word.substitutions) scripts.push(...printedCode(sub))
    }
  }
  return scripts
}

/** Interpreters of other languages than shell, with the flags that hand them code as an argument. */
const CODE_FLAGS: ReadonlyArray<readonly [RegExp, ReadonlySet<string>]> = [
  [/^python[\d.]*$/, new Set(["-c"])],
  [/^perl[\d.]*$/, new Set(["-e", "-E"])],
  [/^ruby[\d.]*$/, new Set(["-e"])],
  [/^node(?:js)?$/, new Set(["-e", "--eval", "-p", "--print"])],
  [/^php[\d.]*$/, new Set(["-r"])]
]

/**
 * The code a part hands to an interpreter of another language (Python, Perl, Ruby, Node, PHP): its code-string
 * argument (`python3 -c …`, `perl -e …`), or the heredoc or here-string it reads. It cannot be lexed as shell,
 * so it is checked as text, as DeerFlow checks every command: `python3 <<EOF` with `os.system("cat /etc/shadow")`
 * in it is blocked.
 */
export const interpreterCodeOf = (part: Part): Array<string> => {
  const code: Array<string> = []
  const words = part.words
  for (let k = 0; k < words.length; k++) {
    const word = words[k]!
    if (word.redirect !== undefined) continue
    const flags = CODE_FLAGS.find(([name]) => name.test(basename(word.value)))?.[1]
    if (flags === undefined) continue
    const script = optionValue(words, k + 1, flags, true)
    if (script !== undefined) code.push(script)
    else {
      for (const doc of part.heredocs) code.push(doc.body)
      for (const w of words) if (w.redirect === "<<<") code.push(w.value)
    }
  }
  return code
}
