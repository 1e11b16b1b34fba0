/**
 * DeerMem's `patterns_dir` (DeerFlow's test_message_processing.py: a custom directory overrides the bundled
 * patterns; an explicit directory's missing file is reported): DeerMem's own seven files read from a directory find
 * what the built-in patterns find; a file replaces only its name's patterns; a file missing or refused leaves the
 * built-in ones with one warning naming the key, the file and why; a pattern file is untrusted (RE2: no pattern
 * backtracks for ever; look-arounds refused and said why; sizes and the text read bounded).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FC from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as PatternFiles from "../../../src/layers/memory/PatternFiles.js"
import { MemoryBackendConfig } from "../../../src/services/AppConfig.js"
import * as MemoryDoc from "../../../src/state/Memory.js"
import { tempDirs } from "../../support/fixtures.js"
import { captureLogs } from "../../support/logs.js"

const tempDir = tempDirs()
const DEERMEM = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../fixtures/deerflow/deermem")
const PATTERNS = Path.join(DEERMEM, "message_patterns")

const user = (text: string) => ({ role: "user" as const, text })

/** A directory with these pattern files (name to YAML text). */
const dirWith = (files: Record<string, string>) => {
  const dir = tempDir("antler-patterns-")
  for (const [name, text] of Object.entries(files)) Fs.writeFileSync(Path.join(dir, `${name}.yaml`), text)
  return dir
}

/** A directory with DeerMem's seven files, some replaced. */
const deerMemWith = (files: Record<string, string>) => {
  const dir = tempDir("antler-patterns-")
  for (const name of PatternFiles.PATTERN_NAMES) {
    Fs.copyFileSync(Path.join(PATTERNS, `${name}.yaml`), Path.join(dir, `${name}.yaml`))
  }
  for (const [name, text] of Object.entries(files)) Fs.writeFileSync(Path.join(dir, `${name}.yaml`), text)
  return dir
}

describe("DeerMem's own pattern files", () => {
  const { patterns, problems } = PatternFiles.readDir(PATTERNS)

  it("are all read, within the bounds", () => {
    assert.deepStrictEqual(problems, [])
    for (const name of PatternFiles.PATTERN_NAMES) {
      const found = name === "trivial" ? patterns.trivial : patterns.signals?.[name]
      assert.isAbove(found?.length ?? 0, 0, name)
    }
  })

  const WORDS = [
    "that's wrong", "That is incorrect", "you misunderstood", "try again", "redo", "不对", "改用", "yes, exactly",
    "perfect.", "keep doing that", "just like this", "对，就是这样", "I prefer", "I don't like", "my favorite",
    "我喜欢", "I am a data engineer", "I work as", "我是", "I plan to", "my goal is", "next I'll", "我打算",
    "let's use", "I'll go with", "we should pick", "就用", "ok", "thanks", "好的", "嗯", " ", ", ", "!", "x", "ab",
    "\n", "。"
  ]
  const Text = FC.array(FC.constantFrom(...WORDS), { maxLength: 6 }).map((parts) => parts.join(""))

  it.prop("find the signals the built-in patterns find (DeerMem's defaults, the same in both)", [
    FC.array(Text, { minLength: 1, maxLength: 4 })
  ], ([texts]) => {
    const turns = texts.map(user)
    assert.deepStrictEqual([...MemoryDoc.signalsOf(turns, patterns)].sort(), [...MemoryDoc.signalsOf(turns)].sort())
  })

  it.prop("find the acknowledgements the built-in patterns find", [Text], ([text]) => {
    // (the built-in list has three more: "thanks", "thank you", "cheers"; DeerMem's file does not)
    if (/thank|cheers/i.test(text)) return
    assert.strictEqual(MemoryDoc.isTrivial(text, patterns.trivial), MemoryDoc.isTrivial(text))
  })
})

describe("a patterns_dir", () => {
  it.effect("a file replaces its name's patterns only; the missing files keep the built-in ones, in one warning", () =>
    Effect.gen(function*() {
      const dir = dirWith({
        correction: "- pattern: '\\bnope\\b'\n  flags: [ignorecase]\n- '错了'\n",
        trivial: "- 'yo'\n"
      })
      const { capture, logged } = captureLogs()
      const patterns = yield* PatternFiles.load(dir).pipe(Effect.provide(capture))
      assert.lengthOf(logged, 1)
      assert.include(logged[0], `memory.backend_config.patterns_dir (${dir}): `)
      for (const name of ["reinforcement", "preference", "identity", "goal", "decision"]) {
        assert.include(logged[0], `${Path.join(dir, `${name}.yaml`)}: not found (built-in ${name} patterns used)`)
      }
      assert.notInclude(logged[0], "correction.yaml")
      const signals = (text: string) => [...MemoryDoc.signalsOf([user(text)], patterns)]
      assert.deepStrictEqual(signals("NOPE, do it differently"), ["correction"])
      assert.deepStrictEqual(signals("这个错了"), ["correction"])
      // the built-in correction patterns are replaced; the other signals' stay
      assert.deepStrictEqual(signals("that's wrong"), [])
      assert.deepStrictEqual(signals("I prefer tabs"), ["preference"])
      // the acknowledgements: DeerMem's fullmatch after trailing punctuation
      assert.isFalse(MemoryDoc.isTrivial("yo!"))
      assert.isTrue(MemoryDoc.isTrivial("yo!", patterns?.trivial))
      assert.isFalse(MemoryDoc.isTrivial("Yo!", patterns?.trivial))
      assert.isFalse(MemoryDoc.isTrivial("ok", patterns?.trivial))
      assert.isFalse(MemoryDoc.isTrivial("yo, and use uv", patterns?.trivial))
    }))

  it.effect("no directory: the built-in patterns, no warning", () =>
    Effect.gen(function*() {
      const { capture, logged } = captureLogs()
      assert.isUndefined(yield* PatternFiles.load(undefined).pipe(Effect.provide(capture)))
      assert.deepStrictEqual(logged, [])
    }))

  it("a file refused leaves its built-in patterns, saying why: YAML, not a list, a bad regex, a look-around", () => {
    const { patterns, problems } = PatternFiles.readDir(deerMemWith({
      correction: "- '[unclosed'\n",
      reinforcement: "pattern: x\n",
      preference: "- 'a\n  b: [\n",
      identity: "- '(?=I am)I'\n",
      goal: "- '(a)\\1'\n"
    }))
    const problem = (name: string) => problems.find((p) => p.includes(`${name}.yaml`)) ?? ""
    assert.lengthOf(problems, 5)
    assert.include(problem("correction"), "entry 0: invalid pattern \"[unclosed\": missing closing ]")
    assert.include(problem("reinforcement"), "must hold a list, not a mapping")
    assert.include(problem("preference"), "invalid YAML")
    assert.include(problem("identity"), "look-arounds and backreferences are refused")
    assert.include(problem("goal"), "look-arounds and backreferences are refused")
    for (const name of ["correction", "reinforcement", "preference", "identity", "goal"]) {
      assert.include(problem(name), `(built-in ${name} patterns used)`)
      assert.isUndefined(patterns.signals?.[name as MemoryDoc.Signal])
    }
    assert.isDefined(patterns.signals?.decision)
    assert.isDefined(patterns.trivial)
  })

  it("as DeerMem, a malformed entry is skipped and an unknown flag ignored, and both are said", () => {
    const { patterns, problems } = PatternFiles.readDir(deerMemWith({
      correction: "- 42\n- {flags: [ignorecase]}\n- pattern: 'wrong'\n  flags: [multiline, ignorecase]\n"
    }))
    const file = Path.join(Path.dirname(problems[0] ?? ""), "correction.yaml")
    assert.deepStrictEqual(problems, [
      `${file}: entry 0 skipped (not a string or a mapping); entry 1 skipped (no 'pattern'); entry 2: unknown flag ` +
      `"multiline" ignored`
    ])
    assert.deepStrictEqual([...MemoryDoc.signalsOf([user("WRONG")], patterns)], ["correction"])
  })
})

describe("an untrusted pattern file", () => {
  it("a pattern that backtracks for ever elsewhere runs in linear time here (RE2)", () => {
    const { patterns, problems } = PatternFiles.readDir(deerMemWith({ correction: "- '^(a+)+$'\n- '(x|x)*y'\n" }))
    assert.deepStrictEqual(problems, [])
    // (with a backtracking engine, either would take longer than the universe's age on these)
    assert.isFalse(patterns.signals!.correction!.some((p) => p.test(`${"a".repeat(50_000)}!`)))
    assert.isFalse(patterns.signals!.correction!.some((p) => p.test("x".repeat(50_000))))
  })

  it("too many entries, a pattern too long, or too much program are refused, naming the bound", () => {
    const many = Array.from({ length: PatternFiles.MAX_PATTERNS + 1 }, (_, i) => `- 'w${i}'`).join("\n")
    const long = `- '${"a".repeat(PatternFiles.MAX_PATTERN_CHARS + 1)}'`
    const heavy = Array.from({ length: 20 }, (_, i) => `- '[a-z]{100}${i}'`).join("\n")
    const { problems } = PatternFiles.readDir(deerMemWith({ correction: many, goal: long, decision: heavy }))
    const problem = (name: string) => problems.find((p) => p.includes(`${name}.yaml`)) ?? ""
    assert.include(problem("correction"), `holds ${PatternFiles.MAX_PATTERNS + 1} entries, over 200`)
    assert.include(problem("goal"), `entry 0: the pattern has 501 characters, over 500`)
    assert.include(problem("decision"), `compile to over ${PatternFiles.MAX_FILE_PROGRAM} instructions`)
  })

  it("all files together are bounded too: the file over the total keeps its built-in patterns", () => {
    const heavy = Array.from({ length: 9 }, (_, i) => `- '[a-z]{100}${i}'`).join("\n")
    const files = Object.fromEntries(PatternFiles.PATTERN_NAMES.map((name) => [name, heavy]))
    const { patterns, problems } = PatternFiles.readDir(dirWith(files))
    // each file is within its own bound; the first ones read fill the total, the others are refused
    const refused = PatternFiles.PATTERN_NAMES.filter((name) => problems.some((p) => p.includes(`/${name}.yaml`)))
    const names = PatternFiles.PATTERN_NAMES
    assert.deepStrictEqual(refused, names.slice(names.length - refused.length))
    assert.isTrue(refused.length > 0 && refused.length < PatternFiles.PATTERN_NAMES.length)
    assert.isTrue(problems.every((p) => p.includes(`together compile to over ${PatternFiles.MAX_PROGRAM}`)))
    assert.isDefined(patterns.signals?.correction)
    assert.isUndefined(patterns.trivial)
  })

  it.prop("a pattern reads at most MAX_MATCHED_CHARS of a message: its head and its tail", [
    FC.string({ maxLength: 3000, unit: "grapheme" })
  ], ([text]) => {
    const bounded = PatternFiles.boundedText(text)
    const chars = Array.from(text)
    if (chars.length <= PatternFiles.MAX_MATCHED_CHARS) return assert.strictEqual(bounded, text)
    const edge = PatternFiles.MAX_MATCHED_CHARS / 2
    assert.strictEqual(bounded, `${chars.slice(0, edge).join("")}\n${chars.slice(-edge).join("")}`)
  })

  it("a long message is read at its head and tail; it is never a pure acknowledgement", () => {
    const { patterns } = PatternFiles.readDir(dirWith({ correction: "- 'redo'\n", trivial: "- '.*'\n" }))
    const middle = `${"x".repeat(2000)} redo ${"x".repeat(2000)}`
    const correction = patterns.signals!.correction!
    assert.isFalse(correction.some((p) => p.test(middle)))
    assert.isTrue(correction.some((p) => p.test(`redo ${middle}`)))
    assert.isTrue(correction.some((p) => p.test(`${middle} redo`)))
    assert.isTrue(MemoryDoc.isTrivial("anything", patterns.trivial))
    assert.isFalse(MemoryDoc.isTrivial("x".repeat(PatternFiles.MAX_MATCHED_CHARS + 1), patterns.trivial))
  })

  it("its YAML is read bounded: a file over the size limit is refused, naming the limit", () => {
    const dir = deerMemWith({})
    Fs.writeFileSync(Path.join(dir, "goal.yaml"), `# ${"x".repeat(200 * 1024)}\n- 'a'\n`)
    const { problems } = PatternFiles.readDir(dir)
    assert.strictEqual(problems.length, 1)
    assert.include(problems[0], "goal.yaml: too large")
  })
})

describe("the config keys", () => {
  it("patterns_dir and prompts_dir are text or null; else the error names the key", () => {
    const decode = Schema.decodeUnknownEither(MemoryBackendConfig)
    assert.deepInclude(Either.getOrThrow(decode({})), { patterns_dir: null, prompts_dir: null })
    assert.deepInclude(Either.getOrThrow(decode({ patterns_dir: "p", prompts_dir: "" })), {
      patterns_dir: "p",
      prompts_dir: ""
    })
    const error = decode({ prompts_dir: 5 })
    assert.isTrue(Either.isLeft(error))
    if (Either.isLeft(error)) assert.include(String(error.left), "prompts_dir")
  })
})
