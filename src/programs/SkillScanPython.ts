/**
 * SkillScan's Python rules (DeerFlow's), read from the tokens of the source rather than from a syntax tree: what
 * is in strings and comments is never code, imports are followed (`import x as y`, `from m import n`), and a call
 * is named as DeerFlow's analyzer names it (`subprocess.run`, `os.system`...). It reports dynamic execution, shell
 * execution (`shell=` anything but a literal `False`, or `**kwargs`, counts as a shell), subprocess use, dynamic
 * imports, unsafe deserialisation, reverse-shell shapes, and a sensitive path or a bulk environment read in a
 * file that also reaches the network. Network clients built in one place and used in another
 * (`s = requests.Session()` ... `s.post(...)`) are followed within one function (or the module), by their simple
 * name, as DeerFlow's does; a name rebound, or bound in the function to something else, is no client.
 */
import type { SecurityFinding } from "./SkillScanRules.js"
import { finding, httpHost, LOCAL_HOSTS, SENSITIVE_PATH } from "./SkillScanRules.js"

interface Token {
  readonly kind: "name" | "str" | "op" | "num"
  readonly text: string
  readonly line: number
  /** A string's text without its prefix and quotes; a bytes literal is not text. */
  readonly value?: string | undefined
}

interface Line {
  readonly indent: number
  readonly tokens: ReadonlyArray<Token>
}

/** The logical lines of a Python source (brackets and `\` joining physical lines), comments left out. */
const tokenize = (text: string): Array<Line> => {
  const lines: Array<Line> = []
  const name = /[\p{L}_][\p{L}\p{N}_]*/uy
  const number = /\.?\d[\w.]*/y
  const op = /\*\*=?|\/\/=?|>>=?|<<=?|:=|->|\.\.\.|[=!<>+\-*/%&|^@]=|[^\s]/y
  const quote = /([rRbBuUfF]{0,2})('''|"""|'|")/y
  let tokens: Array<Token> = []
  let indent = 0
  let depth = 0
  let lineNo = 1
  let start = true
  let i = 0
  const flush = () => {
    if (tokens.length > 0) lines.push({ indent, tokens })
    tokens = []
  }
  while (i < text.length) {
    if (start) {
      let width = 0
      while (text[i] === " " || text[i] === "\t") width += text[i++] === "\t" ? 8 - (width % 8) : 1
      indent = width
      start = false
      continue
    }
    const c = text[i]!
    if (c === "\n") {
      lineNo++
      i++
      if (depth === 0) {
        flush()
        start = true
      }
      continue
    }
    if (c === "\\" && text[i + 1] === "\n") {
      lineNo++
      i += 2
      continue
    }
    if (c === " " || c === "\t" || c === "\r" || c === "\f") {
      i++
      continue
    }
    if (c === "#") {
      while (i < text.length && text[i] !== "\n") i++
      continue
    }
    quote.lastIndex = i
    const q = quote.exec(text)
    if (q !== null) {
      const line = lineNo
      const close = q[2]!
      let j = i + q[0].length
      const from = j
      while (j < text.length && !text.startsWith(close, j)) {
        if (text[j] === "\\") j++
        else if (text[j] === "\n" && close.length === 1) break
        if (text[j] === "\n") lineNo++
        j++
      }
      const value = /b/i.test(q[1]!) ? undefined : text.slice(from, j)
      tokens.push({ kind: "str", text: text.slice(i, j + close.length), line, value })
      i = Math.min(text.length, j + close.length)
      continue
    }
    for (const [kind, re] of [["name", name], ["num", number], ["op", op]] as const) {
      re.lastIndex = i
      const m = re.exec(text)
      if (m === null) continue
      tokens.push({ kind, text: m[0], line: lineNo })
      if (kind === "op") depth = Math.max(0, depth + ("([{".includes(c) ? 1 : ")]}".includes(c) ? -1 : 0))
      i += m[0].length
      break
    }
  }
  flush()
  return lines
}

const COMPOUND: ReadonlySet<string> = new Set([
  "if", "elif", "else", "while", "for", "with", "try", "except", "finally", "async"
])

/** Calls `visit` with each token outside brackets (the brackets themselves left out), in order. */
const eachTopLevel = (texts: ReadonlyArray<string>, visit: (text: string, k: number) => void) => {
  let depth = 0
  texts.forEach((t, k) => {
    if ("([{".includes(t)) depth++
    else if (")]}".includes(t)) depth = Math.max(0, depth - 1)
    else if (depth === 0) visit(t, k)
  })
}

/** A logical line's statements: split at `;` and after a compound statement's header (`if x: y()`). */
const statements = (tokens: ReadonlyArray<Token>): Array<ReadonlyArray<Token>> => {
  const out: Array<ReadonlyArray<Token>> = []
  let from = 0
  let header = COMPOUND.has(tokens[0]?.text ?? "")
  eachTopLevel(tokens.map((t) => t.text), (t, k) => {
    if (t !== ";" && !(t === ":" && header)) return
    out.push(tokens.slice(from, t === ":" ? k + 1 : k))
    from = k + 1
    header = COMPOUND.has(tokens[from]?.text ?? "")
  })
  if (from < tokens.length) out.push(tokens.slice(from))
  return out
}

/** The dotted names bound by an import statement, and what each stands for. */
const importsOf = (s: ReadonlyArray<Token>): Array<readonly [string, string]> => {
  const texts = s.map((t) => t.text)
  const out: Array<readonly [string, string]> = []
  const dotted = (k: number): readonly [string, number] => {
    let name = texts[k] ?? ""
    while (texts[k + 1] === "." && s[k + 2]?.kind === "name") {
      name += `.${texts[k + 2]}`
      k += 2
    }
    return [name, k + 1]
  }
  if (texts[0] === "import") {
    for (let k = 1; k < texts.length;) {
      const [module, next] = dotted(k)
      if (texts[next] === "as" && texts[next + 1] !== undefined) {
        out.push([texts[next + 1]!, module])
        k = next + 3
      } else {
        // (`import a.b` binds `a`)
        const top = module.split(".")[0]!
        out.push([top, top])
        k = next + 1
      }
    }
  } else if (texts[0] === "from") {
    let k = 1
    while (texts[k] === "." || texts[k] === "...") k++
    if (s[k]?.kind !== "name" || texts[k] === "import") return out
    const [module, next] = dotted(k)
    for (let j = next + 1; j < texts.length; j++) {
      if (s[j]!.kind !== "name" || texts[j - 1] === "as") continue
      const alias = texts[j + 1] === "as" && texts[j + 2] !== undefined ? texts[j + 2]! : texts[j]!
      out.push([alias, `${module}.${texts[j]}`])
    }
  }
  return out
}

/** The names an assignment-like statement binds (`a = b = ...`, `x, y = ...`, `for i in`, `with ... as f`...). */
const boundNames = (s: ReadonlyArray<Token>): Array<string> => {
  const texts = s.map((t) => t.text)
  const out: Array<string> = []
  const namesIn = (from: number, to: number) => {
    for (let k = from; k < to; k++) {
      if (s[k]!.kind === "name" && texts[k - 1] !== "." && texts[k + 1] !== "." && texts[k + 1] !== "[") {
        out.push(texts[k]!)
      }
    }
  }
  for (let k = 0; k < texts.length; k++) if (texts[k] === ":=" && s[k - 1]?.kind === "name") out.push(texts[k - 1]!)
  const head = texts[0] === "async" ? 1 : 0
  if (texts[head] === "def" || texts[head] === "class") return [...out, texts[head + 1] ?? ""]
  if (texts[0] === "import" || texts[0] === "from") return [...out, ...importsOf(s).map(([n]) => n)]
  if (texts[head] === "for") namesIn(head + 1, Math.max(head + 1, texts.indexOf("in")))
  for (let k = 0; k < texts.length; k++) if (texts[k] === "as" && s[k + 1]?.kind === "name") out.push(texts[k + 1]!)
  let from = 0
  eachTopLevel(texts, (t, k) => {
    if (t !== "=" && !/^[^=!<>:]+=$|^(\*\*|\/\/|>>|<<)=$/.test(t)) return
    namesIn(from, texts[from + 1] === ":" ? from + 1 : k)
    from = k + 1
  })
  return out
}

interface ClientSpec {
  readonly methods: ReadonlySet<string>
  readonly context: "sync" | "async" | "none"
}

const spec = (methods: string, context: ClientSpec["context"] = "none"): ClientSpec => ({
  methods: new Set(methods.split(" ")),
  context
})
const HTTP_VERBS = "request get post put patch delete head options"
const CLIENTS: ReadonlyMap<string, ClientSpec> = new Map([
  ["http.client.HTTPConnection", spec("request connect send")],
  ["http.client.HTTPSConnection", spec("request connect send")],
  ["requests.Session", spec(`${HTTP_VERBS} send`, "sync")],
  ["urllib3.PoolManager", spec("request urlopen", "sync")],
  ["aiohttp.ClientSession", spec(HTTP_VERBS, "async")]
])

const NETWORK_SINKS: ReadonlySet<string> = new Set([
  ...HTTP_VERBS.split(" ").map((verb) => `requests.${verb}`),
  ...`${HTTP_VERBS} stream`.split(" ").map((verb) => `httpx.${verb}`),
  "urllib.request.urlopen",
  "urllib.request.urlretrieve",
  "socket.socket",
  "socket.create_connection"
])

const isOutboundUrl = (value: string) => /^https?:\/\//.test(value) && !LOCAL_HOSTS.has(httpHost(value) ?? "")

interface Call {
  /** The index of the call's first token. */
  readonly start: number
  readonly name: string
  readonly parts: ReadonlyArray<string>
  readonly line: number
  /** The call's arguments at the top level, each its tokens. */
  readonly args: ReadonlyArray<ReadonlyArray<Token>>
  /** The index of the token after the closing parenthesis. */
  readonly end: number
}

/** The calls of a statement, each named by its dotted name (the first part resolved through `aliases`). */
const callsOf = (s: ReadonlyArray<Token>, aliases: ReadonlyMap<string, string>): Array<Call> => {
  // each bracket's partner, found once: a call's arguments are then read without reading what they nest
  const partner = new Int32Array(s.length).fill(s.length)
  const open: Array<number> = []
  s.forEach((t, k) => {
    if ("([{".includes(t.text)) open.push(k)
    else if (")]}".includes(t.text) && open.length > 0) partner[open.pop()!] = k
  })
  const calls: Array<Call> = []
  for (let k = 0; k < s.length; k++) {
    if (s[k]!.kind !== "name" || (s[k - 1]?.text === "." && s[k - 2]?.kind === "name")) continue
    const parts = [s[k]!.text]
    let j = k
    while (s[j + 1]?.text === "." && s[j + 2]?.kind === "name") {
      parts.push(s[j + 2]!.text)
      j += 2
    }
    if (s[j + 1]?.text !== "(") continue
    const end = partner[j + 1]!
    // (an argument's first tokens are all a rule reads: `shell=False`, `mode="exec"`, `Loader=yaml.SafeLoader`)
    const args: Array<Array<Token>> = [[]]
    for (let a = j + 2; a < end; a++) {
      const t = s[a]!
      if (t.text === ",") args.push([])
      else if (args.at(-1)!.length < 32) args.at(-1)!.push(t)
      if ("([{".includes(t.text)) a = partner[a]!
    }
    // (after `.`, as `f().get(`, the name is the attribute alone, as DeerFlow's analyzer names it)
    const first = s[k - 1]?.text === "." ? parts[0]! : aliases.get(parts[0]!) ?? parts[0]!
    calls.push({
      start: k,
      name: [first, ...parts.slice(1)].join("."),
      parts,
      line: s[k]!.line,
      args: args.filter((a) => a.length > 0),
      end: end + 1
    })
  }
  return calls
}

const keywordOf = (arg: ReadonlyArray<Token>) =>
  arg[0]?.kind === "name" && arg[1]?.text === "=" ? arg[0].text : arg[0]?.text === "**" ? null : undefined
const isString = (arg: ReadonlyArray<Token> | undefined, value?: string) =>
  arg !== undefined && arg.length > 0 && arg.every((t) => t.kind === "str") &&
  (value === undefined || arg.map((t) => t.value ?? "").join("") === value)

// `shell=` is safe only as a literal False; a `**mapping` may hold anything (DeerFlow fails closed on both)
const shellMayBeTrue = (call: Call) =>
  call.args.some((arg) => {
    const keyword = keywordOf(arg)
    return keyword === null || (keyword === "shell" && !(arg.length === 3 && arg[2]!.text === "False"))
  })

const compileExec = (call: Call) => {
  const positional = call.args.filter((arg) => keywordOf(arg) === undefined)
  return isString(positional[2], "exec") ||
    call.args.some((arg) => keywordOf(arg) === "mode" && isString(arg.slice(2), "exec"))
}

const safeYaml = (call: Call) =>
  call.args.some((arg) => {
    const keyword = keywordOf(arg)
    return (keyword === "Loader" || keyword === "loader") && arg.slice(2).some((t) => t.text.includes("SafeLoader"))
  })

interface Scope {
  readonly indent: number
  readonly handles: Map<string, string>
  /** Names imported in this function (or, for the module, imported and not rebound since). */
  readonly imports: Map<string, string>
  /** Names bound anywhere in this function: they shadow the module's imports for the whole function. */
  readonly locals: Set<string>
}

/** The longest Python source read (in characters): the analysis costs about a second a megabyte. */
export const MAX_SOURCE_CHARS = 2 * 1024 * 1024

/** SkillScan's Python findings on `text` (the file `file` of a skill); throws on a source over the limit. */
export const scan = (file: string, text: string): Array<SecurityFinding> => {
  if (text.length > MAX_SOURCE_CHARS) {
    throw new Error(`Python source of ${text.length} characters not analysed (at most ${MAX_SOURCE_CHARS})`)
  }
  const lines = tokenize(text)
  const aliases = new Map<string, string>()
  for (const line of lines) {
    for (const s of statements(line.tokens)) for (const [alias, target] of importsOf(s)) aliases.set(alias, target)
  }
  // which function each line belongs to (by indentation), and what each function binds
  const scopeOf: Array<number> = []
  const headers: Array<{ indent: number; locals: Set<string> }> = [{ indent: -1, locals: new Set() }]
  const stack = [0]
  for (const line of lines) {
    while (stack.length > 1 && line.indent <= headers[stack.at(-1)!]!.indent) stack.pop()
    scopeOf.push(stack.at(-1)!)
    const texts = line.tokens.map((t) => t.text)
    for (const s of statements(line.tokens)) for (const n of boundNames(s)) headers[stack.at(-1)!]!.locals.add(n)
    const head = texts[0] === "async" ? 1 : texts[0] === "@" ? -1 : 0
    if (head >= 0 && (texts[head] === "def" || texts[head] === "class")) {
      headers.push({ indent: line.indent, locals: new Set() })
      stack.push(headers.length - 1)
    }
  }

  const findings: Array<SecurityFinding> = []
  const at = (id: string, line: number, evidence: string) => findings.push(finding(id, file, line, evidence))
  let sensitive: number | undefined
  let environ: number | undefined
  let network: number | undefined
  let reverse: number | undefined
  const shape = new Set<string>()
  const moduleImports = new Map(aliases)
  const scopes = new Map<number, Scope>()
  const scopeFor = (id: number): Scope => {
    const found = scopes.get(id)
    if (found !== undefined) return found
    const made: Scope = {
      indent: headers[id]!.indent,
      handles: new Map(),
      imports: id === 0 ? moduleImports : new Map(),
      locals: id === 0 ? new Set() : headers[id]!.locals
    }
    scopes.set(id, made)
    return made
  }
  const constructorOf = (scope: Scope, call: Call) => {
    const first = call.parts[0]!
    const base = scope.imports.get(first) ?? (scope.locals.has(first) ? undefined : moduleImports.get(first))
    if (base === undefined) return undefined
    const name = [base, ...call.parts.slice(1)].join(".")
    return CLIENTS.has(name) ? name : undefined
  }

  lines.forEach((line, index) => {
    const scope = scopeFor(scopeOf[index]!)
    for (const s of statements(line.tokens)) {
      for (const t of s) {
        if (t.kind !== "str" || t.value === undefined) continue
        if (SENSITIVE_PATH.test(t.value)) sensitive ??= t.line
        if (isOutboundUrl(t.value)) network ??= t.line
      }
      // (an import of os.environ is no read of it: its first use is, as in DeerFlow's syntax tree)
      const importing = s[0]?.text === "import" || s[0]?.text === "from"
      for (let k = 0; k < s.length; k++) {
        if (s[k]!.kind !== "name" || s[k - 1]?.text === ".") continue
        const base = aliases.get(s[k]!.text) ?? s[k]!.text
        const dotted = s[k + 1]?.text === "." && s[k + 2]?.kind === "name" ? `${base}.${s[k + 2]!.text}` : base
        if (!importing && (dotted === "os.environ" || base === "os.environ")) environ ??= s[k]!.line
        // a client's method on the simple name it was bound to in this function
        const client = scope.handles.get(s[k]!.text)
        if (client !== undefined && s[k + 1]?.text === "." && s[k + 3]?.text === "(") {
          if (CLIENTS.get(client)!.methods.has(s[k + 2]!.text)) network ??= s[k]!.line
        }
      }
      const calls = callsOf(s, aliases)
      for (const call of calls) {
        const name = call.name
        if (name === "eval" || name === "exec" || (name === "compile" && compileExec(call))) {
          at("python-dynamic-exec", call.line, name)
        } else if (
          name === "os.system" || name === "os.popen" || (name.startsWith("subprocess.") && shellMayBeTrue(call))
        ) {
          at("python-shell-exec", call.line, name)
        } else if (name.startsWith("subprocess.")) {
          at("python-subprocess", call.line, name)
        } else if (name === "__import__" || name === "importlib.import_module") {
          if (!isString(call.args[0])) at("python-dynamic-import", call.line, name)
        } else if (name === "pickle.load" || name === "pickle.loads" || (name === "yaml.load" && !safeYaml(call))) {
          at("python-unsafe-deserialization", call.line, name)
        }
        if (NETWORK_SINKS.has(name)) network ??= call.line
        if (name === "os.dup2") {
          shape.add("dup2")
          reverse ??= call.line
        } else if (name === "socket.socket" || name === "socket.create_connection") shape.add("socket")
        else if (name.startsWith("subprocess.") || name === "os.system" || name === "os.popen") shape.add("subprocess")
      }
      // what the statement binds: a client built here, or a name that is no longer one
      const texts = s.map((t) => t.text)
      /** The client class that tokens from..to construct, when they are exactly a call of one. */
      const built = (from: number, to: number) => {
        const call = calls.find((c) => c.start === from && c.end === to)
        return call === undefined ? undefined : constructorOf(scope, call)
      }
      // the last `=` outside brackets (`conn = HTTPConnection(host, timeout=5)`: not the keyword's)
      let eq = -1
      eachTopLevel(texts, (t, k) => {
        if (t === "=") eq = k
      })
      // a client handle given another name (`s = session`), read before the statement rebinds anything
      const renamed = eq > 0 && eq === s.length - 2 && s[eq + 1]!.kind === "name"
        ? scope.handles.get(texts[eq + 1]!)
        : undefined
      const bound = boundNames(s)
      for (const n of bound) scope.handles.delete(n)
      if (texts[0] === "import" || texts[0] === "from") {
        for (const [alias, target] of importsOf(s)) scope.imports.set(alias, target)
      } else if (scope === scopes.get(0)) {
        for (const n of bound) moduleImports.delete(n)
      }
      const client = renamed ?? (eq > 0 && texts.indexOf("(", eq) > eq ? built(eq + 1, s.length) : undefined)
      if (client !== undefined) {
        for (let k = 0; k < eq; k++) {
          if (s[k]!.kind === "name" && (texts[k + 1] === "=" || k + 1 === eq)) scope.handles.set(texts[k]!, client)
        }
      }
      const withAt = texts.indexOf("with")
      if (withAt === 0 || (withAt === 1 && texts[0] === "async")) {
        for (let k = withAt + 1; k < texts.length; k++) {
          if (texts[k] !== "as" || s[k + 1]?.kind !== "name") continue
          let from = k - 1
          for (let depth = 0; from > withAt; from--) {
            if (")]}".includes(texts[from]!)) depth++
            else if ("([{".includes(texts[from]!)) depth--
            else if (depth === 0 && texts[from] === ",") break
          }
          const client = built(from + 1, k)
          const context = client !== undefined ? CLIENTS.get(client)!.context : "none"
          if (context === (withAt === 1 ? "async" : "sync")) scope.handles.set(texts[k + 1]!, client!)
        }
      }
    }
  })

  if (shape.has("dup2") && shape.has("socket") && shape.has("subprocess")) {
    at("python-reverse-shell", reverse ?? 1, "socket + dup2 + subprocess")
  }
  if (sensitive !== undefined && network !== undefined) {
    at("python-sensitive-exfil", sensitive, "sensitive read + network sink")
  } else if (sensitive !== undefined) at("python-sensitive-path-read", sensitive, "sensitive path read")
  if (environ !== undefined && network !== undefined) {
    at("python-env-dump-exfil", environ, "environment dump + network sink")
  }
  return findings
}
