import { assert, describe, it } from "@effect/vitest"
import * as ShellLexer from "../../src/state/ShellLexer.js"

/** The words of each part, by value. */
const parts = (command: string) => ShellLexer.lex(command).parts.map((p) => p.words.map((w) => w.value))

describe("ShellLexer", () => {
  it("splits on every list and pipeline operator bash accepts", () => {
    assert.deepStrictEqual(parts("a;b&&c||d|e|&f&g\nh"), [["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"], ["h"]])
    assert.deepStrictEqual(parts("case x in x) a;; y) b;& z) c;;& esac"), [
      ["case", "x", "in", "x"],
      ["a"],
      ["y"],
      ["b"],
      ["z"],
      ["c"],
      ["esac"]
    ])
    assert.deepStrictEqual(parts("(a) && { b; }"), [["a"], ["{", "b"], ["}"]])
  })

  it("makes redirections words of their own, even without blanks", () => {
    const words = ShellLexer.lex("sh<<<'rm -rf /' 2>&1 >out").parts[0]!.words
    assert.deepStrictEqual(words.map((w) => [w.value, w.redirect]), [
      ["sh", undefined],
      ["rm -rf /", "<<<"],
      ["1", ">&"],
      ["out", ">"]
    ])
  })

  it("ends a command substitution where bash does: past case patterns, heredocs and comments", () => {
    for (const command of [
      "echo \"$(case x in x) rm -rf /;; esac)\"",
      "echo \"$(cat <<E\n)\nE\nrm -rf /)\"",
      "echo \"$(echo ')' # )\nrm -rf /)\""
    ]) {
      const lexed = ShellLexer.lex(command)
      assert.isTrue(lexed.balanced, command)
      const inner = lexed.substitutions[0]!.parts.map((p) => p.words.map((w) => w.value).join(" "))
      assert.include(inner, "rm -rf /", command)
    }
  })

  it("reads arithmetic also as commands, and an ambiguous reading as unbalanced", () => {
    const lexed = ShellLexer.lex("((echo a) && (rm -rf /))")
    assert.isTrue(lexed.balanced)
    assert.deepInclude(lexed.substitutions[0]!.parts.map((p) => p.words.map((w) => w.value)), ["rm", "-rf", "/"])
    assert.isTrue(ShellLexer.lex("echo $((1 << 4)) $(( (2 + 3) * x ))").balanced)
    assert.isFalse(ShellLexer.lex("echo \"$((cat <<E\n))\nE\n); rm -rf /)\"").balanced)
  })

  it("decodes ANSI-C strings", () => {
    assert.strictEqual(ShellLexer.decodeAnsiC(String.raw`\x72\x6d \055rf\t\u002f\'\\`), "rm -rf\t/'\\")
    assert.strictEqual(ShellLexer.decodeAnsiC(String.raw`\cA\e\q`), "\u0001\u001b\\q")
    assert.deepStrictEqual(parts("$'\\x72m' -rf $'/'"), [["rm", "-rf", "/"]])
  })

  it("expands unquoted brace lists, and only those", () => {
    assert.deepStrictEqual(ShellLexer.expandBraces("{rm,-rf,/}"), ["rm", "-rf", "/"])
    assert.deepStrictEqual(ShellLexer.expandBraces("a{b,c{d,e}}f"), ["abf", "acdf", "acef"])
    assert.deepStrictEqual(ShellLexer.expandBraces("f{,.bak}"), ["f", "f.bak"])
    for (const word of ["{a}", "{1..3}", "'{a,b}'", "${x,,}", "{a,b"]) assert.isUndefined(ShellLexer.expandBraces(word))
    assert.deepStrictEqual(parts("{rm,-rf,/}"), [["rm", "-rf", "/"]])
  })

  it("keeps the substitutions of ${…} and of double-quoted strings", () => {
    const lexed = ShellLexer.lex("echo ${x:-$(rm -rf ~)} \"a $(b) c\"")
    assert.deepStrictEqual(lexed.substitutions.map((s) => s.source), ["rm -rf ~", "b"])
  })
})
