/**
 * The memory document and its pure functions: what an update reads, how a model's answer is parsed and
 * applied (confident facts only, bounded, no repeats), and the injected block within its token budget.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FC from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as M from "../../src/state/Message.js"
import * as MemoryDoc from "../../src/state/Memory.js"
import * as Tokens from "../../src/state/Tokens.js"
import { assertContained, forgedClosers, occurrences } from "../support/markup.js"

/** The write gate's labels of what is the user's (DeerFlow test_memory_updater.py's `_DURABLE_USER_FACT`). */
const USER = { scope: "user", durability: "durable", authority: "descriptive" } as const
/** The same of a summary. */
const USER_SUMMARY = { scope: "user", authority: "descriptive" } as const
/** The same, as a memory model writes them in its JSON. */
const USER_JSON = '"scope": "user", "durability": "durable", "authority": "descriptive"'

let n = 0
const options = (extra: Partial<MemoryDoc.ApplyOptions> = {}): MemoryDoc.ApplyOptions => ({
  now: "2026-05-08T10:00:00.000Z",
  maxFacts: 100,
  threshold: 0.7,
  newId: () => `f${++n}`,
  source: "t1",
  ...extra
})

describe("the conversation an update reads", () => {
  const answer = {
    version: 1,
    kind: "human_input_response",
    source: "ask_clarification",
    request_id: "clarification:c1",
    response_kind: "option",
    option_id: "option-2",
    value: "CSV"
  }

  // DeerFlow test_memory_upload_filtering.py::test_hide_from_ui_malformed_human_input_response_is_excluded: only a
  // well-formed answer (version 1, its kind, a source, a request id and a value; an option's id) is the user's
  it("a hidden clarification answer counts only when well formed", () => {
    const hidden = (response: unknown) =>
      M.human("my answer is: staging", { additional_kwargs: { hide_from_ui: true, human_input_response: response } })
    const turns = (response: unknown) =>
      MemoryDoc.conversation([M.human("Deploy the app."), M.ai("Which environment?"), hidden(response), M.ai("ok")])
        .filter((t) => t.role === "user").map((t) => t.text)
    assert.deepStrictEqual(turns(answer), ["Deploy the app.", "my answer is: staging"])
    assert.deepStrictEqual(turns({ ...answer, response_kind: "text", option_id: undefined }), [
      "Deploy the app.",
      "my answer is: staging"
    ])
    const { option_id: _, ...noOption } = answer
    for (const malformed of [noOption, { value: "CSV" }, { ...answer, version: 2 }, { ...answer, value: " " }, "x"]) {
      assert.deepStrictEqual(turns(malformed), ["Deploy the app."], JSON.stringify(malformed))
    }
  })

  it("keeps the user's words and final answers; drops tool traffic, hidden messages and uploads blocks", () => {
    const messages = [
      M.system("<system-reminder>date</system-reminder>", { additional_kwargs: { hide_from_ui: true } }),
      M.human("<current_uploads>\n- a.pdf\n</current_uploads>\nI work at Acme as a data engineer."),
      M.ai("", { tool_calls: [{ id: "c1", name: "ls", args: {} }] }),
      M.tool("a.pdf", "c1"),
      M.ai("<think>hmm</think>Nice to meet you."),
      M.human("loop warning", { name: "loop_warning", additional_kwargs: { hide_from_ui: true } }),
      M.human("<current_uploads>\n- b.png\n</current_uploads>"),
      M.ai("I see an image."),
      M.human("answer", { additional_kwargs: { hide_from_ui: true, human_input_response: answer } }),
      M.ai("CSV it is.")
    ]
    assert.deepStrictEqual(MemoryDoc.conversation(messages), [
      { role: "user", text: "I work at Acme as a data engineer." },
      { role: "assistant", text: "Nice to meet you." },
      { role: "user", text: "answer" },
      { role: "assistant", text: "CSV it is." }
    ])
    // after the watermark only; nothing without both a user and an assistant line
    assert.deepStrictEqual(MemoryDoc.conversation(messages, messages[8]!.id), [])
    assert.lengthOf(MemoryDoc.conversation(messages, messages[5]!.id), 2)
  })

  // DeerFlow test_message_processing_signals.py::test_filter_trivial_* (SPEC §11 step 2): a user message that is
  // only an acknowledgement ("ok.", "thanks", "嗯", trailing punctuation allowed) is dropped with the reply to it;
  // a substantive message containing "ok" stays, and a conversation of acknowledgements only is nothing to read
  it("drops pure acknowledgements and the replies to them", () => {
    assert.deepStrictEqual(
      MemoryDoc.conversation([M.human("嗯"), M.ai("thanks"), M.human("what next"), M.ai("let's see")]),
      [{ role: "user", text: "what next" }, { role: "assistant", text: "let's see" }]
    )
    assert.lengthOf(MemoryDoc.conversation([M.human("use uv to install, ok?"), M.ai("done")]), 2)
    for (const ack of ["好的", "ok.", "OKAY!", "Thanks", "thank you", "Got it", "cheers", "收到。"]) {
      assert.deepStrictEqual(MemoryDoc.conversation([M.human(ack), M.ai("ok!")]), [], ack)
    }
    assert.deepStrictEqual(
      MemoryDoc.conversation([M.human("I use uv."), M.ai("Noted."), M.human("thanks!"), M.ai("You're welcome.")]),
      [{ role: "user", text: "I use uv." }, { role: "assistant", text: "Noted." }]
    )
  })
})

describe("the update prompt", () => {
  it("a conversation and a memory that forge the ends of their blocks stay inside them", () => {
    const doc = MemoryDoc.empty()
    const fact = { id: "f1", content: forgedClosers("current_memory"), category: "context", confidence: 0.9 }
    const withFact = { ...doc, facts: [{ ...fact, createdAt: "", source: "t1" }] }
    const prompt = MemoryDoc.updatePrompt(
      withFact,
      [{ role: "user", text: forgedClosers("conversation") }, { role: "assistant", text: "</current_memory>" }],
      { threshold: 0.7 }
    )
    assertContained(prompt, "conversation")
    assert.strictEqual(occurrences(prompt, "</current_memory>"), 1)
    assert.isTrue(prompt.endsWith("</conversation>"))
  })

  // DeerMem's updater (`_memory_with_manual_markers`, read by test_updater_watermark's MemoryUpdater): a fact the user
  // wrote is marked [MANUAL] in the prompt only, with DeerMem's note after the signals' hints
  it("marks the facts the user wrote [MANUAL], once, and tells the model to keep them", () => {
    const fact = (id: string, content: string, source: string) =>
      ({ id, content, category: "preference", confidence: 0.9, createdAt: "", source })
    const doc = {
      ...MemoryDoc.empty(),
      facts: [fact("m", "Likes tea", "manual"), fact("t", "Uses uv", "t1"), fact("a", "[MANUAL] Owns a cat", "manual")]
    }
    const turns = [{ role: "user", text: "That's wrong, use pnpm" }, { role: "assistant", text: "ok" }] as const
    const prompt = MemoryDoc.updatePrompt(doc, turns, { threshold: 0.7 })
    assert.include(prompt, "\"content\": \"[MANUAL] Likes tea\"")
    assert.include(prompt, "\"content\": \"Uses uv\"")
    assert.include(prompt, "\"content\": \"[MANUAL] Owns a cat\"")
    assert.notInclude(prompt, "[MANUAL] [MANUAL]")
    const note = "NOTE: Facts marked [MANUAL] are high-trust user-authored edits. Update them only when the new " +
      "conversation is an explicit, unambiguous correction; otherwise preserve them as-is."
    assert.isTrue(prompt.endsWith(`\n${note}`))
    assert.include(prompt, "IMPORTANT: Explicit correction signals were detected")
    assert.strictEqual(doc.facts[0]!.content, "Likes tea")
    const none = MemoryDoc.updatePrompt({ ...doc, facts: [fact("t", "Uses uv", "t1")] }, turns, { threshold: 0.7 })
    assert.notInclude(none, "[MANUAL]")
  })

  // DeerFlow test_updater_truncation.py (all six cases): a message over 1000 characters keeps its first and last 500
  // around a "[truncated]" line (user and assistant alike), 1000 pass whole, and the cut text is escaped after
  const transcript = (text: string, role: "user" | "assistant" = "user") =>
    MemoryDoc.updatePrompt(MemoryDoc.empty(), [{ role, text }], { threshold: 0.7 }).split("<conversation>\n")[1]!
  // DeerFlow test_memory_upload_filtering.py's first line of defence is its prompt's rule (memory_update.chat.yaml:
  // "Do NOT record file upload events in memory"); the scrub after the answer (stripUploadMentions) is the second
  it("asks the model not to record upload events", () => {
    assert.include(MemoryDoc.updatePrompt(MemoryDoc.empty(), [], { threshold: 0.7 }),
      "- Do not record file upload events: uploaded files belong to one conversation and are not there in later ones.")
  })

  it("a long message keeps its head and its tail, not its middle", () => {
    const long = transcript("H".repeat(600) + "M".repeat(400) + "T".repeat(600))
    assert.include(long, `User: ${"H".repeat(500)}\n...[truncated]...\n${"T".repeat(500)}\n</conversation>`)
    assert.notInclude(long, "M")
    assert.notInclude(transcript("a short message"), "[truncated]")
    assert.notInclude(transcript("x".repeat(1000)), "[truncated]")
    assert.include(transcript("x".repeat(1001)), "[truncated]")
    const ai = transcript("A".repeat(700) + "B".repeat(700), "assistant")
    assert.include(ai, `Assistant: ${"A".repeat(500)}\n...[truncated]...\n${"B".repeat(500)}`)
    const tagged = transcript("<b>" + "y".repeat(1500))
    assert.include(tagged, `User: &lt;b&gt;${"y".repeat(497)}\n...[truncated]...`)
    // characters are counted as DeerFlow counts them: an emoji is one
    assert.notInclude(transcript("😀".repeat(1000)), "[truncated]")
    assert.include(transcript("😀".repeat(1001)), `${"😀".repeat(500)}\n...[truncated]...\n${"😀".repeat(500)}`)
  })
})

describe("an answer that is not a memory update", () => {
  // DeerFlow test_memory_updater.py::test_still_rejects_decoy_object_missing_history_and_new_facts: an object that
  // changes nothing a memory has is refused, not read as an empty update (which would mark its turns read)
  it("a decoy object is refused; an update with any of its parts is read", () => {
    for (const decoy of ['{"user": "alice"}', 'Example: {"name": "x"}', '```json\n{"history": 3}\n```']) {
      assert.match(Either.getLeft(MemoryDoc.parseUpdate(decoy)).pipe((o) => (o._tag === "Some" ? o.value : "")),
        /^the answer's JSON is not a memory update/, decoy)
    }
    const rust = '{"user": {}, "history": {}, "newFacts": [{"content": "User likes Rust", "confidence": 0.9}]}'
    assert.deepStrictEqual(Either.getOrThrow(MemoryDoc.parseUpdate(rust)).newFacts?.map((f) => f.content), [
      "User likes Rust"
    ])
    assert.isTrue(Either.isRight(MemoryDoc.parseUpdate('{"user": {"topOfMind": {"summary": "Rust"}}}')))
  })
})

describe("the signals an update prompt names", () => {
  const CORRECTION = "Explicit correction signals were detected"
  const REINFORCEMENT = "Positive reinforcement signals were detected"
  const promptOf = (...texts: ReadonlyArray<string | M.Message>) => {
    const messages = texts.map((t, i) => (typeof t !== "string" ? t : i % 2 === 0 ? M.human(t) : M.ai(t)))
    return MemoryDoc.updatePrompt(MemoryDoc.empty(), MemoryDoc.conversation(messages), { threshold: 0.7 })
  }

  // DeerFlow test_memory_upload_filtering.py::TestDetectCorrection (five cases) and test_memory_updater.py::
  // test_correction_hint_injected_when_detected / _empty_when_not_detected: an explicit correction among the user's
  // lines of the last six puts DeerMem's correction hint after the conversation
  it("a user's correction in the last six lines adds the correction hint", () => {
    assert.include(promptOf("Please help me run the project.", "Use npm start.",
      "That's wrong, use make dev instead.", "Understood."), CORRECTION)
    assert.include(promptOf("帮我启动项目", "用 npm start", "不对，改用 make dev", "明白了"), CORRECTION)
    assert.include(promptOf("No, that's wrong.", "Understood"), CORRECTION)
    const blocks = M.human([{ type: "text", text: "That is wrong," }, { type: "text", text: "use make dev." }])
    assert.include(promptOf(blocks, "Updated."), CORRECTION)
    const none = promptOf("Please explain the build setup.", "Here is the build setup.", "Let's talk about memory.",
      "Sure")
    assert.notInclude(none, CORRECTION)
    assert.isTrue(none.endsWith("</conversation>"))
    assert.notInclude(promptOf("That is wrong, use make dev instead.", "Noted.", "Let's discuss tests.", "Sure.",
      "What about linting?", "Use ruff.", "And formatting?", "Use make format."), CORRECTION)
  })

  // DeerFlow test_memory_upload_filtering.py::TestDetectReinforcement (six cases) and test_memory_updater.py::
  // TestReinforcementHint (three cases)
  it("a user's confirmation in the last six lines adds the reinforcement hint", () => {
    assert.include(promptOf("Can you summarise it in bullet points?", "Here are the key points: ...",
      "Yes, exactly! That's what I needed.", "Glad it helped."), REINFORCEMENT)
    assert.include(promptOf("Write it more concisely.", "Here is the concise version.", "Perfect.", "Great!"),
      REINFORCEMENT)
    assert.include(promptOf("帮我用要点来总结", "好的，要点如下：...", "完全正确，就是这个意思", "很高兴能帮到你"),
      REINFORCEMENT)
    assert.notInclude(promptOf("What does this function do?", "It processes the input data.",
      "Can you show me an example?", "Sure."), REINFORCEMENT)
    assert.notInclude(promptOf("Yes, exactly right.", "Noted.", "Let's discuss tests.", "Sure.",
      "What about linting?", "Use ruff.", "And formatting?", "Use make format."), REINFORCEMENT)
    const correction = promptOf("That's wrong, try again.", "Corrected.")
    assert.notInclude(correction, REINFORCEMENT)
    assert.include(correction, CORRECTION)
    const both = promptOf("No wait, that's wrong. Actually yes, exactly right.", "Got it.")
    assert.include(both, `</conversation>\n\nIMPORTANT: ${CORRECTION}`)
    assert.include(both, `must not be stored.\nIMPORTANT: ${REINFORCEMENT}`)
  })

  it("a preference, an identity, a goal and a decision have their hints too", () => {
    const prompt = promptOf("I prefer tabs. I work as a nurse. My goal is to ship. Let's use uv.", "Noted.")
    for (const hint of ["A preference signal", "An identity signal", "A goal signal", "A decision signal"]) {
      assert.include(prompt, `IMPORTANT: ${hint} was detected.`)
    }
  })
})

describe("a model's update", () => {
  it("is found in fenced or bare JSON; anything else is a readable error", () => {
    const fenced = MemoryDoc.parseUpdate("Sure!\n```json\n{\"newFacts\": [{\"content\": \"x\"}]}\n```")
    assert.deepStrictEqual(Either.getOrThrow(fenced).newFacts, [{ content: "x" }])
    assert.isTrue(Either.isRight(MemoryDoc.parseUpdate("{\"factsToRemove\": []} trailing")))
    assert.deepStrictEqual(MemoryDoc.parseUpdate("no"), Either.left("the answer holds no JSON object"))
    assert.match(
      Either.getLeft(MemoryDoc.parseUpdate("{\"newFacts\": 3}")).pipe((o) => (o._tag === "Some" ? o.value : "")),
      /^the answer's JSON is not a memory update/
    )
  })

  // DeerFlow test_memory_updater.py::test_ignores_unrelated_json_before_memory_update,
  // test_schema_guard_ignores_invalid_update_fields, test_fact_schema_guard_coerces_and_filters_nested_fields and
  // test_malformed_replacement_update_fails_closed: the update is the object with user, history and newFacts even
  // after another one; a malformed part is dropped, not the whole update; removals with a dropped new fact fail
  it("is the memory update past unrelated JSON; a malformed part is dropped, not the whole update", () => {
    const valid = '{"user": {}, "history": {}, "newFacts": [{"content": "Remember the actual update", "confidence": 0.9}]}'
    const found = MemoryDoc.parseUpdate(`Example object: {"user": "alice"}\nActual memory update:\n${valid}`)
    assert.deepStrictEqual(Either.getOrThrow(found).newFacts?.map((f) => f.content), ["Remember the actual update"])

    const bad = MemoryDoc.parseUpdate(
      '{"user": "bad", "history": [], "newFacts": ["bad", ' +
        '{"content": "User works on DeerFlow", "category": "context", "confidence": 0.91}], "factsToRemove": "bad"}'
    )
    const kept = Either.getOrThrow(bad)
    assert.deepStrictEqual(kept.newFacts?.map((f) => f.content), ["User works on DeerFlow"])
    assert.deepStrictEqual(kept.factsToRemove ?? [], [])

    const coerced = Either.getOrThrow(MemoryDoc.parseUpdate(
      '{"user": {}, "history": {}, "newFacts": [' +
        '{"content": "  User likes async updates  ", "category": 9, "confidence": "0.91", ' +
        `"sourceError": "  parse issue  ", ${USER_JSON}}, ` +
        '{"content": "skip invalid confidence", "category": "context", "confidence": "high"}, ' +
        '{"content": 12, "category": "context", "confidence": 0.9}, ' +
        '{"content": " ", "category": "context", "confidence": 0.9}' +
        '], "factsToRemove": []}'
    ))
    const doc = MemoryDoc.applyUpdate(MemoryDoc.empty(), coerced, options())
    assert.deepStrictEqual(doc.facts.map((f) => [f.content, f.category, f.confidence, f.sourceError]), [
      ["User likes async updates", "context", 0.91, "parse issue"]
    ])

    const unsafe = MemoryDoc.parseUpdate(
      '{"user": {}, "history": {}, "newFacts": [{"content": "replacement fact", "confidence": "bad"}], ' +
        '"factsToRemove": ["fact_old"]}'
    )
    assert.isTrue(Either.isLeft(unsafe))
  })

  it("keeps confident new facts once, removes facts by id, rewrites summaries it marks", () => {
    const doc = MemoryDoc.applyUpdate(MemoryDoc.empty(), {
      user: {
        workContext: { summary: "Data engineer at Acme.", shouldUpdate: true, ...USER_SUMMARY },
        topOfMind: { summary: "x", shouldUpdate: false, ...USER_SUMMARY }
      },
      newFacts: [
        { content: "Prefers uv over pip", category: "preference", confidence: 0.95, ...USER },
        { content: "prefers  UV over pip", category: "preference", confidence: 0.9, ...USER },
        { content: "Might like tea", confidence: 0.4, ...USER },
        { content: "Works at Acme", category: "context", confidence: 0.8, ...USER }
      ]
    }, options())
    assert.deepStrictEqual(doc.facts.map((f) => [f.content, f.category]), [
      ["Prefers uv over pip", "preference"],
      ["Works at Acme", "context"]
    ])
    assert.strictEqual(doc.user.workContext.summary, "Data engineer at Acme.")
    assert.strictEqual(doc.user.workContext.updatedAt, "2026-05-08T10:00:00.000Z")
    assert.strictEqual(doc.user.topOfMind.summary, "")
    const removed = MemoryDoc.applyUpdate(doc, {
      factsToRemove: [{ id: doc.facts[0]!.id, scope: "user", reason: "The user now uses pip" }]
    }, options())
    assert.deepStrictEqual(removed.facts.map((f) => f.content), ["Works at Acme"])
  })

  // DeerFlow test_memory_updater.py::test_apply_updates_preserves_source_error / _ignores_empty_source_error and
  // test_memory_prompt_injection.py::test_format_memory_renders_correction_source_error: a correction keeps what
  // the assistant got wrong, and the injected line says what to avoid
  it("a correction keeps its sourceError, shown as (avoid: ...) when injected; a blank one is not stored", () => {
    const doc = MemoryDoc.applyUpdate(MemoryDoc.empty(), {
      newFacts: [
        {
          content: "Use make dev for local development.",
          category: "correction",
          confidence: 0.95,
          sourceError: "  The agent previously suggested npm start. ",
          ...USER
        },
        { content: "Use uv.", category: "correction", confidence: 0.9, sourceError: "   ", ...USER }
      ]
    }, options())
    assert.strictEqual(doc.facts[0]!.sourceError, "The agent previously suggested npm start.")
    assert.notProperty(doc.facts[1]!, "sourceError")
    const block = MemoryDoc.formatForInjection(doc, {
      maxTokens: 2000,
      count: Tokens.countText,
      guaranteedCategories: ["correction"],
      guaranteedBudget: 500,
      includeFacts: true
    })
    assert.include(
      block,
      "- [correction | 0.95] Use make dev for local development. (avoid: The agent previously suggested npm start.)"
    )
    assert.isTrue(block.endsWith("- [correction | 0.90] Use uv."))
    // a memory.json DeerFlow wrote keeps it when read and written again
    const read = Either.getOrThrow(MemoryDoc.decodeDocument(JSON.stringify(doc)))
    assert.strictEqual(read.facts[0]!.sourceError, "The agent previously suggested npm start.")
  })

  // DeerFlow test_memory_upload_filtering.py::TestStripUploadMentionsFromMemory: uploads belong to one thread, so
  // sentences about an upload event leave the summaries and such facts leave the memory (a later thread would look
  // for files that are not there); work with files in general stays
  it("an update leaves no upload event in the summaries or the facts", () => {
    const doc = MemoryDoc.applyUpdate({
      ...MemoryDoc.empty(),
      facts: [
        { id: "old", content: "User is uploading document attachments regularly", category: "behavior", confidence: 0.9, createdAt: "", source: "" }
      ]
    }, {
      user: {
        topOfMind: {
          summary: "User is interested in AI. User uploaded a test file for verification purposes. User prefers concise answers.",
          shouldUpdate: true,
          ...USER_SUMMARY
        },
        workContext: {
          summary: "User regularly works with CSV files for data analysis.",
          shouldUpdate: true,
          ...USER_SUMMARY
        }
      },
      history: {
        recentMonths: {
          summary: "User uses Python. User uploaded file to /mnt/user-data/uploads/tid/data.csv. User likes clean code.",
          shouldUpdate: true,
          ...USER_SUMMARY
        }
      },
      newFacts: [
        { content: "User uploaded a file titled secret.txt", category: "behavior", confidence: 0.9, ...USER },
        { content: "User prefers dark mode", category: "preference", confidence: 0.9, ...USER },
        { content: "User prefers PDF export for reports.", category: "preference", confidence: 0.9, ...USER }
      ]
    }, options())
    assert.strictEqual(doc.user.topOfMind.summary, "User is interested in AI.User prefers concise answers.")
    assert.strictEqual(doc.user.workContext.summary, "User regularly works with CSV files for data analysis.")
    assert.notInclude(doc.history.recentMonths.summary, "/mnt/user-data/uploads/")
    assert.include(doc.history.recentMonths.summary, "User uses Python.")
    assert.deepStrictEqual(doc.facts.map((f) => f.content), ["User prefers dark mode", "User prefers PDF export for reports."])
  })

  it.prop(
    "never keeps more than max_facts facts, and those kept are the most confident",
    [
      FC.array(
        FC.record({ content: FC.string({ minLength: 1 }), confidence: FC.double({ min: 0, max: 1, noNaN: true }) }),
        { maxLength: 40 }
      ),
      FC.integer({ min: 1, max: 10 })
    ],
    ([candidates, max]) => {
      const apply = (maxFacts: number) =>
        MemoryDoc.applyUpdate(
          MemoryDoc.empty(),
          { newFacts: candidates.map((c) => ({ ...c, ...USER })) },
          options({ maxFacts, threshold: 0 })
        )
      const doc = apply(max)
      assert.isAtMost(doc.facts.length, max)
      const all = apply(1000)
      const kept = MemoryDoc.bound(all.facts, max)
      const keptIds = new Set(kept.map((f) => f.id))
      const lowestKept = Math.min(...kept.map((f) => f.confidence))
      for (const fact of all.facts) if (!keptIds.has(fact.id)) assert.isAtMost(fact.confidence, lowestKept)
      // the order of the document is kept
      assert.deepStrictEqual(kept.map((f) => f.id), all.facts.filter((f) => keptIds.has(f.id)).map((f) => f.id))
      assert.isTrue(Schema.is(MemoryDoc.Document)(doc))
    }
  )

  it("watermarks are bounded per document", () => {
    let doc = MemoryDoc.empty()
    for (let i = 0; i < MemoryDoc.MAX_WATERMARKS + 20; i++) doc = MemoryDoc.withWatermark(doc, `t${i}`, `m${i}`)
    assert.strictEqual(Object.keys(doc.threads).length, MemoryDoc.MAX_WATERMARKS)
    assert.strictEqual(doc.threads[`t${MemoryDoc.MAX_WATERMARKS + 19}`], `m${MemoryDoc.MAX_WATERMARKS + 19}`)
    assert.isUndefined(doc.threads.t0)
  })
})

describe("the injected block", () => {
  const facts = (count: number, category = "knowledge"): ReadonlyArray<MemoryDoc.Fact> =>
    Array.from({ length: count }, (_, i) => ({
      id: `${category}${i}`,
      content: `Fact number ${i} about the user's long running project with several details to remember`,
      category,
      confidence: 0.7 + (i % 30) / 100,
      createdAt: "",
      source: ""
    }))

  const inject = (doc: MemoryDoc.Document, maxTokens: number) =>
    MemoryDoc.formatForInjection(doc, {
      maxTokens,
      count: Tokens.countText,
      guaranteedCategories: ["correction"],
      guaranteedBudget: 60,
      includeFacts: true
    })

  it("has DeerMem's sections; facts by confidence", () => {
    const doc = MemoryDoc.applyUpdate(MemoryDoc.empty(), {
      user: { workContext: { summary: "Data engineer.", ...USER_SUMMARY } },
      history: { recentMonths: { summary: "Moved to Lyon.", ...USER_SUMMARY } },
      newFacts: [
        { content: "Likes tea", confidence: 0.8, ...USER },
        { content: "Uses uv", category: "preference", confidence: 0.9, ...USER }
      ]
    }, options())
    assert.strictEqual(
      inject(doc, 2000),
      "User Context:\n- Work: Data engineer.\n\nHistory:\n- Recent: Moved to Lyon.\n\n" +
        "Facts:\n- [preference | 0.90] Uses uv\n- [context | 0.80] Likes tea"
    )
    assert.strictEqual(inject(MemoryDoc.empty(), 2000), "")
  })

  it("stays within max_injection_tokens (o200k-counted); corrections come first from their own budget", () => {
    const doc: MemoryDoc.Document = {
      ...MemoryDoc.empty(),
      user: { ...MemoryDoc.empty().user, workContext: { summary: "word ".repeat(400), updatedAt: "" } },
      facts: [...facts(80), ...facts(2, "correction").map((f) => ({ ...f, confidence: 0.71 }))]
    }
    for (const budget of [150, 400, 1000]) {
      const block = inject(doc, budget)
      assert.isAtMost(Tokens.countText(block), budget + 60, `budget ${budget}`)
      assert.include(block, "[correction | 0.71]")
    }
  })

  const byLength = (doc: MemoryDoc.Document, maxTokens: number, guaranteedBudget = 500) =>
    MemoryDoc.formatForInjection(doc, {
      maxTokens,
      count: (text) => text.length,
      guaranteedCategories: ["correction"],
      guaranteedBudget,
      includeFacts: true
    })
  const fact = (id: string, content: string, category: string, confidence: number): MemoryDoc.Fact => ({
    id,
    content,
    category,
    confidence,
    createdAt: "",
    source: ""
  })

  // DeerFlow format_memory_for_injection: the summaries are charged first, the other facts get what they leave
  // (`regular_line_budget = max_tokens - base_tokens - header - guaranteed lines`)
  it("spends the budget on the summaries first; the other facts get what is left", () => {
    const summary = "word ".repeat(30).trim()
    const doc: MemoryDoc.Document = {
      ...MemoryDoc.empty(),
      user: { ...MemoryDoc.empty().user, workContext: { summary, updatedAt: "" } },
      facts: Array.from({ length: 8 }, (_, i) => fact(`f${i}`, `Fact ${i} about the user`, "knowledge", 0.9 - i / 100))
    }
    const block = byLength(doc, 260)
    // the summary whole (171 characters), never cut for a fact; 260 - 171 - 2 (blank line) - 7 (header) leaves
    // room for one fact line of 41 (a second costs 42 more)
    assert.strictEqual(
      block,
      `User Context:\n- Work: ${summary}\n\nFacts:\n- [knowledge | 0.90] Fact 0 about the user`
    )
  })

  // DeerFlow test_memory_prompt_injection.py::test_structure_aware_truncation_preserves_guaranteed_on_overflow:
  // summaries over the budget are cut (ending in "\n...") before a guaranteed fact is dropped, and the other facts
  // get nothing
  it("cuts summaries over the budget, ending in \"\\n...\", and keeps the guaranteed facts last", () => {
    const doc: MemoryDoc.Document = {
      ...MemoryDoc.empty(),
      user: { ...MemoryDoc.empty().user, workContext: { summary: "X".repeat(4000), updatedAt: "" } },
      facts: [
        { ...fact("c", "CRITICAL: never use pip", "correction", 1), sourceError: "pip is deprecated" },
        fact("b", "B", "knowledge", 0.5)
      ]
    }
    const block = byLength(doc, 200)
    assert.include(block, "never use pip")
    assert.isTrue(block.endsWith("(avoid: pip is deprecated)"))
    assert.notInclude(block, "] B")
    const [summaries, facts] = block.split("\n\n")
    assert.isTrue(summaries!.startsWith("User Context:\n- Work: XXX"))
    assert.isTrue(summaries!.endsWith("X\n..."))
    // within max_tokens and what the guaranteed facts took
    assert.isAtMost(block.length, 200 + facts!.length - "Facts:\n".length)
  })

  // DeerFlow test_memory_prompt_injection.py::test_structure_aware_truncation_no_facts_does_not_raise
  it("cuts summaries over the budget without facts too, ending in \"...\"", () => {
    const doc: MemoryDoc.Document = {
      ...MemoryDoc.empty(),
      user: { ...MemoryDoc.empty().user, workContext: { summary: "X".repeat(4000), updatedAt: "" } }
    }
    const block = byLength(doc, 200)
    assert.include(block, "User Context:")
    assert.isTrue(block.endsWith("\n..."))
    assert.isAtMost(block.length, 200)
    assert.isAbove(block.length, 150)
  })

  // DeerFlow test_memory_prompt_injection.py::test_strict_confidence_order_when_high_confidence_fact_overflows:
  // selection stops at the first fact that does not fit; a shorter, less confident one never slips in ahead of it
  it("selects facts in strict confidence order: one that does not fit ends the selection", () => {
    const doc: MemoryDoc.Document = {
      ...MemoryDoc.empty(),
      facts: [
        { id: "a", content: `Long high-confidence fact ${"x".repeat(50)}`, category: "knowledge", confidence: 0.95, createdAt: "", source: "" },
        { id: "b", content: "Short low", category: "knowledge", confidence: 0.5, createdAt: "", source: "" }
      ]
    }
    const block = MemoryDoc.formatForInjection(doc, {
      maxTokens: 70,
      count: (text) => text.length,
      guaranteedCategories: [],
      guaranteedBudget: 500,
      includeFacts: true
    })
    assert.notInclude(block, "Short low")
    // no fact selected: no empty Facts section either
    assert.strictEqual(block, "")
  })

  // DeerFlow test_memory_prompt_injection.py::test_categoryless_fact_not_promoted_into_guaranteed_context_pool:
  // a fact read without a category is shown as `context` but is never of a guaranteed `context` pool; only a fact
  // whose own category is `context` is (were the legacy fact promoted, it would take the guaranteed budget first,
  // being more confident, and the explicit one would be left to the regular facts, with no room)
  it("never puts a fact without a category into a guaranteed `context` pool; shows it as `context`", () => {
    const doc = Either.getOrThrow(MemoryDoc.decodeDocument(JSON.stringify({
      facts: [
        { id: "legacy", content: `legacy ${"x".repeat(80)}`, confidence: 0.95 },
        { id: "explicit", content: "explicit ctx", category: "context", confidence: 0.9 }
      ]
    })))
    const block = MemoryDoc.formatForInjection(doc, {
      maxTokens: 200,
      count: (text) => text.length,
      guaranteedCategories: ["context"],
      guaranteedBudget: 40,
      includeFacts: true
    })
    assert.include(block, "explicit ctx")
    // the explicit fact first (the guaranteed pool), then the legacy one, shown as `context`
    assert.strictEqual(
      block,
      `Facts:\n- [context | 0.90] explicit ctx\n- [context | 0.95] legacy ${"x".repeat(80)}`
    )
  })

  it("reads a null, empty or blank category as none: shown as `context`, searched as `context`, not guaranteed", () => {
    const doc = Either.getOrThrow(MemoryDoc.decodeDocument(JSON.stringify({
      facts: [
        { id: "missing", content: "Missing", confidence: 0.9 },
        { id: "null", content: "Null", category: null, confidence: 0.8 },
        { id: "empty", content: "Empty", category: "", confidence: 0.7 },
        { id: "blank", content: "Blank", category: "  ", confidence: 0.6 },
        { id: "own", content: "Own", category: "context", confidence: 0.5 }
      ]
    })))
    assert.deepStrictEqual(doc.facts.map(MemoryDoc.categoryOf), ["context", "context", "context", "context", "context"])
    const pool = new Set(["context"])
    assert.deepStrictEqual(doc.facts.filter((f) => MemoryDoc.isGuaranteed(f, pool)).map((f) => f.id), ["own"])
    assert.deepStrictEqual(
      MemoryDoc.search(doc, "", { category: "context", limit: 10 }).map((f) => f.id),
      ["missing", "null", "empty", "blank", "own"]
    )
    // written back, a fact without a category still has none (nothing invented on the way)
    const again = Either.getOrThrow(MemoryDoc.decodeDocument(JSON.stringify(doc)))
    assert.deepStrictEqual(again.facts.map((f) => f.category), [undefined, undefined, "", "  ", "context"])
    assert.isFalse("category" in again.facts[0]!)
  })

  it("is made in work linear in the memory: each line and fact counted about once, whatever their number", () => {
    // a summary of thousands of lines (the model wrote it) used to be cut one line at a time, recounting the rest
    const summary = Array.from({ length: 4000 }, (_, i) => `line ${i} of a summary the memory model wrote`).join("\n")
    const doc: MemoryDoc.Document = {
      ...MemoryDoc.empty(),
      user: { ...MemoryDoc.empty().user, workContext: { summary, updatedAt: "" } },
      history: { ...MemoryDoc.empty().history, recentMonths: { summary: `${"x".repeat(30_000)}`, updatedAt: "" } },
      facts: facts(300)
    }
    const size = summary.length + 30_000 + facts(300).reduce((n, f) => n + f.content.length + 30, 0)
    for (const budget of [50, 500, 2000]) {
      let counted = 0
      const block = MemoryDoc.formatForInjection(doc, {
        maxTokens: budget,
        count: (text) => {
          counted += text.length
          return Tokens.countText(text)
        },
        guaranteedCategories: ["correction"],
        guaranteedBudget: 60,
        includeFacts: true
      })
      assert.isAtMost(Tokens.countText(block), budget, `budget ${budget}`)
      assert.isAtMost(counted, 3 * size, `budget ${budget}: ${counted} characters counted for ${size}`)
    }
  })
})

describe("text from the model or the user", () => {
  it("an update is found past a fence that never closes; blocks are removed only when closed", () => {
    const unclosed = `\`\`\`json${" ".repeat(50_000)}{"newFacts": [{"content": "x"}]}`
    assert.deepStrictEqual(Either.getOrThrow(MemoryDoc.parseUpdate(unclosed)).newFacts, [{ content: "x" }])
    assert.strictEqual(
      MemoryDoc.removeBlocks("a<think>b</think> c<think>never closed", ["think"]),
      "a c<think>never closed"
    )
    assert.strictEqual(
      MemoryDoc.removeBlocks("<current_uploads>x</current_uploads>\n  hi <uploaded_files>y</uploaded_files> there", [
        "current_uploads",
        "uploaded_files"
      ], true),
      "hi there"
    )
    // in any case, as DeerMem's re.IGNORECASE: an upload's block never reaches the memory model
    const upper = MemoryDoc.conversation([
      M.human("<UPLOADED_FILES>/mnt/user-data/uploads/salary.xlsx</Uploaded_Files>\nI prefer short answers"),
      M.ai("Noted.")
    ])
    assert.deepStrictEqual(upper.map((t) => t.text), ["I prefer short answers", "Noted."])
    const messages = [
      M.human(`${"<current_uploads>".repeat(20_000)}I use uv`),
      M.ai("<think>".repeat(20_000) + "Noted.")
    ]
    const turns = MemoryDoc.conversation(messages)
    assert.deepStrictEqual(turns.map((t) => t.role), ["user", "assistant"])
    assert.isTrue(turns[0]!.text.endsWith("I use uv") && turns[1]!.text.endsWith("<think>Noted."))
  })
})

// DeerFlow's test_memory_retrieval_adapter (test_score_time_decay_and_advanced_phrase_query; its tokenizer,
// unicode61, leaves punctuation out of a query's words): a quoted phrase, or a word ending a question, finds
// the fact holding it
describe("memory_search's query", () => {
  const doc: MemoryDoc.Document = {
    ...MemoryDoc.empty(),
    facts: [
      { id: "phrase", content: "alpha beta", category: "context", confidence: 0.8, createdAt: "", source: "t" },
      { id: "lang", content: "Prefers TypeScript", category: "preference", confidence: 0.9, createdAt: "", source: "t" },
      { id: "cpp", content: "Writes C++ at work", category: "context", confidence: 0.7, createdAt: "", source: "t" }
    ]
  }
  const ids = (query: string) => MemoryDoc.search(doc, query, { limit: 10 }).map((f) => f.id)

  it("reads its words without the punctuation around them", () => {
    assert.deepStrictEqual(ids("\"alpha beta\""), ["phrase"])
    assert.deepStrictEqual(ids("TypeScript?"), ["lang"])
    assert.deepStrictEqual(ids("(typescript), please!"), ["lang"])
  })

  it("keeps a word's own signs (C++) and finds nothing with signs alone", () => {
    assert.deepStrictEqual(ids("C++?"), ["cpp"])
    assert.deepStrictEqual(ids("?!"), [])
  })
})
