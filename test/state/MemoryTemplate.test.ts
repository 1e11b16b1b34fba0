/**
 * DeerMem's prompt templates (DeerFlow's test_prompt_external.py): Python's `str.format` rendering (`{name}`,
 * `{{`/`}}`), the chat form decoded as `load_prompt_messages` reads it, DeerMem's own `memory_update.chat.yaml`
 * accepted and rendered (system static, the five variables in the user message), and a template that drops the
 * update's protocol refused with what it lacks.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FC from "effect/FastCheck"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Yaml from "yaml"
import * as MemoryTemplate from "../../src/state/MemoryTemplate.js"

const FIXTURES = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/deerflow/deermem")
const deerMemTemplate = () =>
  Yaml.parse(Fs.readFileSync(Path.join(FIXTURES, "prompts", "memory_update.chat.yaml"), "utf8")) as unknown

const VARIABLES = {
  current_memory: "CM-VAL",
  conversation: "CONV-VAL",
  correction_hint: "CH-VAL",
  staleness_review_section: "SRS-VAL",
  consolidation_section: "CS-VAL"
}

const escape = (text: string) => text.replace(/\{/g, "{{").replace(/\}/g, "}}")

describe("render", () => {
  it("substitutes {name} and reads {{ }} as braces, as str.format does", () => {
    assert.deepStrictEqual(
      MemoryTemplate.render(`{{"id": "{who}"}} {who}{what}`, { who: "x", what: "{y}" }),
      Either.right(`{"id": "x"} x{y}`)
    )
  })

  it("refuses a lone brace, an unknown name, and conversions, formats or indexes, naming what", () => {
    const error = (template: string) => Either.getLeft(MemoryTemplate.render(template, { a: "1" })).pipe((o) =>
      o._tag === "Some" ? o.value : "rendered"
    )
    assert.include(error("a } b"), "single '}'")
    assert.include(error("a { b"), "single '{'")
    assert.include(error("{b}"), "unknown placeholder {b} (known: a)")
    assert.include(error("{a!r}"), "is not a plain {name}")
    assert.include(error("{a:>5}"), "is not a plain {name}")
    assert.include(error("{0}"), "is not a plain {name}")
    assert.include(error("{}"), "is not a plain {name}")
  })

  it.prop("any text escaped renders back to itself; values are never read as templates", [FC.string(), FC.string()], (
    [text, value]
  ) => {
    assert.deepStrictEqual(MemoryTemplate.render(escape(text), {}), Either.right(text))
    assert.deepStrictEqual(
      MemoryTemplate.render(`${escape(text)}{v}${escape(text)}`, { v: value }),
      Either.right(`${text}${value}${text}`)
    )
  })
})

describe("the memory update's template", () => {
  it("DeerMem's own memory_update.chat.yaml is accepted: a static system message, the values in the user's", () => {
    const template = Either.getOrThrow(
      Either.flatMap(MemoryTemplate.decodeChat(deerMemTemplate()), MemoryTemplate.checkUpdate)
    )
    const rendered = MemoryTemplate.renderUpdate(template, VARIABLES)
    const other = MemoryTemplate.renderUpdate(template, { ...VARIABLES, current_memory: "OTHER" })
    assert.include(rendered.system, "memory management system")
    assert.include(rendered.system, `"user": {`)
    assert.notInclude(rendered.system, "{{")
    assert.strictEqual(rendered.system, other.system)
    assert.lengthOf(rendered.user, 1)
    for (const value of Object.values(VARIABLES)) assert.include(rendered.user[0], value)
    assert.include(rendered.user[0], "<current_memory>")
  })

  it("the chat form as DeerMem reads it: format chat, a non-empty messages list, role user when not system", () => {
    const decode = (data: unknown) => MemoryTemplate.decodeChat(data)
    assert.deepStrictEqual(
      decode({ messages: [{ role: "system", content: "S" }, { content: "U" }, { role: "assistant", content: "A" }] }),
      Either.right({
        messages: [{ role: "system", content: "S" }, { role: "user", content: "U" }, { role: "user", content: "A" }]
      })
    )
    assert.deepStrictEqual(decode({ format: "text", template: "x" }), Either.left(`expected format 'chat', got "text"`))
    assert.deepStrictEqual(decode({ messages: [] }), Either.left("missing or empty 'messages'"))
    assert.deepStrictEqual(decode(null), Either.left("missing or empty 'messages'"))
    assert.deepStrictEqual(decode(["x"]), Either.left("expected a mapping with 'messages'"))
    assert.deepStrictEqual(decode({ messages: [{ content: 3 }] }), Either.left("messages[0].content is not text"))
  })

  it("a template without the protocol is refused with what it lacks (DeerFlow: an un-migrated one rejects all)", () => {
    const check = (system: string, user = "{current_memory}\n{conversation}") =>
      Either.flip(MemoryTemplate.checkUpdate({
        messages: [{ role: "system", content: system }, { role: "user", content: user }]
      })).pipe(Either.getOrElse(() => "accepted"))
    const full = `{{"user": {{}}, "history": {{}}, "newFacts": [{{"scope": "", "durability": "", "authority": ""}}], ` +
      `"factsToRemove": [], "shouldUpdate": true}}`
    assert.strictEqual(check(full), "accepted")
    // DeerFlow's old template, before the write gate's labels
    const unlabelled = `{{"user": {{}}, "history": {{}}, "newFacts": [], "factsToRemove": [], "shouldUpdate": true}}`
    assert.include(check(unlabelled), `does not name the answer's keys "scope", "durability", "authority"`)
    assert.include(check(full, "{conversation}"), "does not use {current_memory}")
    assert.include(check(full, "{current_memory} {conversation} {user_name}"), "unknown placeholder {user_name}")
    // a key given only by a value does not count: the template itself must name it
    assert.include(check("{correction_hint}"), `"newFacts"`)
    assert.strictEqual(
      Either.flip(MemoryTemplate.checkUpdate({ messages: [{ role: "system", content: full }] })).pipe(
        Either.getOrElse(() => "accepted")
      ),
      "it has no user message"
    )
    const copies = "{conversation}".repeat(MemoryTemplate.MAX_PLACEHOLDERS)
    assert.include(check(full, `{current_memory}${copies}`), `uses 17 placeholders, over 16`)
    assert.strictEqual(check(full, `{current_memory}${copies.slice("{conversation}".length)}`), "accepted")
    const huge = full + " ".repeat(MemoryTemplate.MAX_TEMPLATE_CHARS)
    assert.include(check(huge), `over ${MemoryTemplate.MAX_TEMPLATE_CHARS}`)
  })
})

describe("the sections' templates", () => {
  const problem = (data: unknown, protocol: MemoryTemplate.Protocol) =>
    Either.match(MemoryTemplate.decodeText(data, protocol), { onLeft: (p) => p, onRight: () => "accepted" })
  const STALE = MemoryTemplate.STALENESS_PROTOCOL
  const MERGE = MemoryTemplate.CONSOLIDATION_PROTOCOL

  it("are read as DeerMem's load_prompt reads them (format text, a non-empty template)", () => {
    assert.strictEqual(problem({ format: "chat", messages: [] }, STALE), `expected format 'text', got "chat"`)
    assert.strictEqual(problem({ template: "" }, STALE), "missing or empty 'template'")
    assert.strictEqual(problem("text", STALE), "expected a mapping with 'template'")
    assert.strictEqual(problem({ format: "text", template: `{stale_facts} "staleFactsToRemove"` }, STALE), "accepted")
  })

  it("must keep their protocol: their placeholders, the keys their answer is read by, the gate's labels", () => {
    assert.include(problem({ template: `{stale_facts} {other} "staleFactsToRemove"` }, STALE), "unknown placeholder")
    assert.include(problem({ template: `"staleFactsToRemove"` }, STALE), "does not use {stale_facts}")
    assert.include(problem({ template: "{stale_facts}" }, STALE), `the answer's keys "staleFactsToRemove"`)
    const keys = `"factsToConsolidate" "sourceIds" "consolidated" "scope" "durability" "authority"`
    assert.strictEqual(problem({ template: `{consolidation_groups} ${keys}` }, MERGE), "accepted")
    assert.include(problem({ template: `{max_groups} ${keys}` }, MERGE), "does not use {consolidation_groups}")
    assert.include(
      problem({ template: `{consolidation_groups} "factsToConsolidate" "sourceIds" "consolidated"` }, MERGE),
      `does not name the answer's keys "scope", "durability", "authority"`
    )
    assert.strictEqual(
      MemoryTemplate.renderText("{max_groups}: {consolidation_groups}", { consolidation_groups: "G", max_groups: "3" }),
      "3: G"
    )
  })
})
