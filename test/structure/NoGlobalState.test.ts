/**
 * No process-global mutable state in src/: what several runs share (limiters, caches, locks) is a service or
 * lives in a layer built once per app or agent, never in a module. Checked on the syntax of every source file:
 * no module-level `let`/`var`, no module-level `WeakMap`/`WeakSet`, no `Map`/`Set` that is not typed read-only
 * (constant lookup tables are fine), no `unsafeMake*` (FiberRef, Ref, semaphore...) evaluated when a
 * module loads, none of these hidden in a function invoked where it is written (`const next = (() => { let n = 0;
 * return () => n++ })()`: its locals live on in the closure it returns), and no module-level regular expression
 * with the `g` or `y` flag (`exec` and `test` move its `lastIndex`, which the next caller starts from).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const SRC = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../src")

const sources = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(Path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [Path.join(dir, entry.name)]
      : []
  )

/** A function called where it is written: `(() => ...)()`, `(function () { ... })()`, `(function () {}).call(this)`. */
interface Invoked {
  readonly call: ts.CallExpression
  /** `let`/`var` statements of its body (not of functions inside it). */
  readonly lets: Array<ts.VariableStatement>
  /** Whether a function is made inside it: a closure that may keep its locals alive after the call. */
  closures: boolean
}

/** What a module evaluates when it loads, found by `eager`. */
interface Eager {
  /** Calls and `new` expressions, with the immediately invoked function they run in, if any. */
  readonly calls: Array<{ readonly node: ts.CallExpression | ts.NewExpression; readonly within?: Invoked }>
  readonly regexes: Array<ts.RegularExpressionLiteral>
  readonly invoked: Array<Invoked>
}

const unparenthesized = (node: ts.Expression): ts.Expression =>
  ts.isParenthesizedExpression(node) ? unparenthesized(node.expression) : node

const invokedFunction = (call: ts.CallExpression): ts.FunctionExpression | ts.ArrowFunction | undefined => {
  let callee = unparenthesized(call.expression)
  if (ts.isPropertyAccessExpression(callee) && (callee.name.text === "call" || callee.name.text === "apply")) {
    callee = unparenthesized(callee.expression)
  }
  return ts.isFunctionExpression(callee) || ts.isArrowFunction(callee) ? callee : undefined
}

/**
 * Walks what runs when the module loads: not the bodies of functions, except those of functions invoked where
 * they are written, whose bodies run at load time too (and whose locals live on in the closures they return).
 */
const eager = (node: ts.Node, found: Eager, within?: Invoked): void => {
  if (ts.isFunctionLike(node) || ts.isClassDeclaration(node)) {
    if (within !== undefined) within.closures = true
    return
  }
  if (ts.isCallExpression(node)) {
    const fn = invokedFunction(node)
    if (fn !== undefined) {
      const invoked: Invoked = { call: node, lets: [], closures: false }
      found.invoked.push(invoked)
      for (const parameter of fn.parameters) eager(parameter, found, within)
      eager(fn.body, found, invoked)
      for (const argument of node.arguments) eager(argument, found, within)
      return
    }
  }
  if (ts.isCallExpression(node) || ts.isNewExpression(node)) found.calls.push(within ? { node, within } : { node })
  if (ts.isRegularExpressionLiteral(node)) found.regexes.push(node)
  if (within !== undefined && ts.isVariableStatement(node) && (node.declarationList.flags & ts.NodeFlags.Const) === 0) {
    within.lets.push(node)
  }
  ts.forEachChild(node, (child) => eager(child, found, within))
}

/** The flags of a regular expression made by a literal or by `RegExp(...)` with literal flags ("" when none). */
const regexFlags = (node: ts.Node, source: ts.SourceFile): string | undefined => {
  if (ts.isRegularExpressionLiteral(node)) return node.text.slice(node.text.lastIndexOf("/") + 1)
  if ((ts.isNewExpression(node) || ts.isCallExpression(node)) && node.expression.getText(source) === "RegExp") {
    const flags = node.arguments?.[1]
    return flags === undefined ? "" : ts.isStringLiteralLike(flags) ? flags.text : undefined
  }
  return undefined
}

/** Problems with the module-level statements of one file. */
export const problems = (file: string, text: string): Array<string> => {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true)
  const out: Array<string> = []
  const where = (node: ts.Node) => `${Path.relative(SRC, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`
  const check = (expression: ts.Node, typed: string) => {
    const found: Eager = { calls: [], regexes: [], invoked: [] }
    eager(expression, found)
    for (const { node: call, within } of found.calls) {
      const callee = call.expression.getText(source)
      const hidden = within?.closures === true ? ", kept by the closure of an immediately invoked function" : ""
      // the type of the variable it initialises, where it has one (a local of an invoked function), else the module's
      const declared = ts.isVariableDeclaration(call.parent) ? call.parent.type?.getText(source) : undefined
      if (ts.isNewExpression(call) && /^Weak(Map|Set)$/.test(callee)) {
        out.push(`${where(call)}: a module-level ${callee} (a cache shared by every run of the process)${hidden}`)
      } else if (
        ts.isNewExpression(call) && /^(Map|Set)$/.test(callee) && !/Readonly(Set|Map)</.test(declared ?? typed)
      ) {
        out.push(`${where(call)}: a module-level ${callee} not typed Readonly${callee}${hidden} (shared by every run)`)
      } else if (/\bunsafeMake/.test(callee)) {
        out.push(`${where(call)}: ${callee} evaluated when the module loads`)
      }
    }
    for (const node of [...found.regexes, ...found.calls.map((call) => call.node)]) {
      const flags = regexFlags(node, source)
      if (flags !== undefined && /[gy]/.test(flags)) {
        out.push(
          `${where(node)}: a module-level regular expression with the ${flags.includes("g") ? "g" : "y"} flag (its ` +
            "lastIndex is state shared by every caller: make it local or drop the flag)"
        )
      }
    }
    for (const invoked of found.invoked) {
      if (!invoked.closures) continue
      for (const statement of invoked.lets) {
        const kind = statement.declarationList.flags & ts.NodeFlags.Let ? "let" : "var"
        out.push(`${where(statement)}: a ${kind} kept by the closure of an immediately invoked function (module level)`)
      }
    }
  }
  for (const statement of source.statements) {
    if (ts.isExpressionStatement(statement)) check(statement.expression, "")
    if (ts.isExportAssignment(statement)) check(statement.expression, "")
    if (!ts.isVariableStatement(statement)) continue
    const flags = statement.declarationList.flags
    if ((flags & ts.NodeFlags.Let) !== 0 || (flags & (ts.NodeFlags.Const | ts.NodeFlags.Using)) === 0) {
      out.push(`${where(statement)}: a module-level ${flags & ts.NodeFlags.Let ? "let" : "var"}`)
      continue
    }
    for (const declaration of statement.declarationList.declarations) {
      if (declaration.initializer !== undefined) check(declaration.initializer, declaration.type?.getText(source) ?? "")
    }
  }
  return out
}

describe("no process-global mutable state in src/", () => {
  it("the checker sees each kind of global it forbids", () => {
    const bad = [
      "let counter = 0",
      "var legacy = 1",
      "const cache = new WeakMap<object, number>()",
      "const registry = new Map()",
      "const names = new Set([\"a\"])",
      "export const sink = FiberRef.unsafeMake(undefined)",
      "const lock = Effect.unsafeMakeSemaphore(1)",
      "const next = (() => { let n = 0; return () => n++ })()",
      "export const nextId = (function () { var n = 0; return function () { return n++ } })()",
      "(function () { let calls = 0; globalThis.count = () => calls++ })()",
      "const lookup = (() => { const cache = new WeakMap<object, number>(); return (o: object) => cache.get(o) })()",
      "const seen = (() => { const names = new Set<string>(); return (name: string) => names.add(name) })()",
      "const WORD = /\\w+/g",
      "export const STICKY = /a/y",
      "const PATTERNS = { word: /\\w+/gu }",
      "const DIGITS = new RegExp(\"[0-9]+\", \"g\")",
      "const next = (() => { const re = /a/g; return (s: string) => re.exec(s) })()"
    ]
    for (const line of bad) assert.lengthOf(problems(Path.join(SRC, "x.ts"), line), 1, line)
    const fine = [
      "const NAMES: ReadonlySet<string> = new Set([\"a\"])",
      "const CODES: ReadonlyMap<string, number> = new Map([[\"a\", 1]])",
      "export const make = () => { let n = 0; const cache = new Map(); return () => cache.get(n++) }",
      "const limit = 5",
      "export class Tag extends Context.Tag(\"x\")<Tag, number>() { static readonly make = () => new Map() }",
      "const TABLE = (() => { let total = 0; for (const n of [1, 2]) total += n; return total })()",
      "const WORDS: ReadonlySet<string> = (() => new Set([\"a\", \"b\"]))()",
      "const WORD = /\\w+/u",
      "const DIGITS = new RegExp(\"[0-9]+\", \"i\")",
      "export const words = (text: string) => text.match(/\\w+/g) ?? []",
      "const make = () => { const re = /a/g; let n = 0; return () => re.exec(String(n++)) }",
      "const get = (() => { const t: ReadonlyMap<string, number> = new Map(); return (w: string) => t.get(w) })()"
    ]
    for (const line of fine) assert.deepStrictEqual(problems(Path.join(SRC, "x.ts"), line), [], line)
  })

  it("src/ has none", () => {
    const found = sources(SRC).flatMap((file) => problems(file, Fs.readFileSync(file, "utf8")))
    assert.deepStrictEqual(found, [])
  })
})
