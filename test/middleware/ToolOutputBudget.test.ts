import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SandboxMW from "../../src/middleware/Sandbox.js"
import * as ThreadData from "../../src/middleware/ThreadData.js"
import * as TOB from "../../src/middleware/ToolOutputBudget.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import type { Sandbox } from "../../src/services/Sandbox.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import * as Tool from "../../src/services/Tool.js"
import type { Message, ToolMessage } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const withHome = (home: string) =>
  Effect.provide(Layer.succeed(AppConfigService, { config: defaults(), source: undefined, ignored: [], home }))

const tempHome = () => fs.mkdtempSync(path.join(os.tmpdir(), "antler-budget-"))

const lines = (n: number, width = 60) =>
  Array.from({ length: n }, (_, i) => `line ${String(i).padStart(5, "0")} ${"x".repeat(width - 11)}`).join("\n")

/** A tool that returns whatever text it is asked for. */
const emits = (name: string, text: string) =>
  Tool.make({ name, description: "Emits text", parameters: Schema.Struct({}), handler: () => Effect.succeed(text) })

const resultOf = (messages: ReadonlyArray<Message>, tool: string) =>
  messages.find((m): m is ToolMessage => m.type === "tool" && m.name === tool)!

const config = TOB.defaultConfig()
const SAVED =
  /^\[Full (\S+) output saved to (\/mnt\/user-data\/outputs\/\.tool-results\/\S+) \((\d+) chars, ~(\d+) tokens\)\.\]$/

describe("head + tail truncation", () => {
  it("keeps whole lines around a marker that counts what was left out", () => {
    const text = lines(1000)
    const out = TOB.truncateHeadTail(text, "bash", 30000, 8000, 3000)
    assert.isAtMost(out.length, 30000)
    const marker = /\n\n\[\.\.\. (\d+) chars omitted from bash output\. [^\]]*\]\n\n/.exec(out)!
    const [head, tail] = out.split(marker[0])
    assert.isTrue(head!.endsWith("\n") && text.startsWith(head!))
    assert.isTrue(tail!.startsWith("line ") && text.endsWith(tail!))
    assert.strictEqual(Number(marker[1]), text.length - head!.length - tail!.length)
    assert.strictEqual(TOB.truncateHeadTail("short", "bash", 30000, 8000, 3000), "short")
  })

  it.prop("never exceeds the maximum, and keeps a real head and tail", [
    FastCheck.string({ unit: FastCheck.constantFrom("a", "b", "\n", " "), minLength: 0, maxLength: 3000 }),
    FastCheck.integer({ min: 1, max: 2000 }),
    FastCheck.nat({ max: 1500 }),
    FastCheck.nat({ max: 1500 })
  ], ([text, max, head, tail]) => {
    const out = TOB.truncateHeadTail(text, "t", max, head, tail)
    assert.isAtMost(out.length, Math.max(max, 0))
    if (text.length <= max) assert.strictEqual(out, text)
    const at = out.indexOf("\n\n[... ")
    if (at >= 0) {
      assert.isTrue(text.startsWith(out.slice(0, at)))
      assert.isTrue(text.endsWith(out.slice(out.indexOf("]\n\n", at) + 3)))
    }
  })
})

describe("sizes in characters (code points), as DeerFlow's Python len counts them", () => {
  // DeerFlow test_tool_output_budget_middleware.py: test_exactly_at_threshold_passes_through,
  // test_one_char_over_threshold_triggers and TestBuildFallback.test_result_never_exceeds_max_chars, with
  // characters outside the BMP (one character each, two UTF-16 code units).
  const c = { ...config, externalize_min_chars: 100, fallback_max_chars: 100 }
  const save = () => Effect.succeed(Option.some("/mnt/user-data/outputs/.tool-results/t.txt"))

  it.effect("a result of exactly the threshold in emoji passes through; one more is budgeted", () =>
    Effect.gen(function*() {
      const at = M.tool("😀".repeat(100), "c1", { name: "tool" })
      assert.isFalse(TOB.needsBudget({ message: at }, c))
      assert.strictEqual(yield* TOB.budgetMessage(at, c, save), at)
      const over = M.tool("😀".repeat(101), "c2", { name: "tool" })
      assert.isTrue(TOB.needsBudget({ message: over }, c))
      const saved = M.text(yield* TOB.budgetMessage(over, c, save))
      assert.isTrue(saved.startsWith("[Full tool output saved to /mnt/user-data/outputs/.tool-results/t.txt (101 chars"))
      const history = [M.ai("", { tool_calls: [{ id: "c1", name: "tool", args: {} }] }), at]
      assert.strictEqual(TOB.truncateHistory(history, c), history)
    }))

  it("the head + tail cut counts characters and never splits one", () => {
    const text = "😀".repeat(5000)
    const out = TOB.truncateHeadTail(text, "bash", 3000, 800, 300)
    assert.isAtMost(Array.from(out).length, 3000)
    assert.isFalse(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(out), "no half emoji")
    const marker = /\n\n\[\.\.\. (\d+) chars omitted from bash output\. [^\]]*\]\n\n/.exec(out)!
    const [head, tail] = out.split(marker[0])
    assert.strictEqual(Array.from(head!).length, 800)
    assert.strictEqual(Number(marker[1]), 5000 - Array.from(head!).length - Array.from(tail!).length)
    assert.strictEqual(TOB.truncateHeadTail("😀".repeat(3000), "bash", 3000, 800, 300), "😀".repeat(3000))
  })
})

describe("file names and thresholds", () => {
  it("names files after the tool and a hash of call and content", () => {
    const a = TOB.externalizedFileName("bash", "call_1", "out")
    assert.match(a, /^bash-[0-9a-f]{12}\.log$/)
    assert.strictEqual(TOB.externalizedFileName("bash", "call_1", "out"), a)
    assert.notStrictEqual(TOB.externalizedFileName("bash", "call_2", "out"), a)
    assert.match(TOB.externalizedFileName("web_search", "c", "x"), /^web_search-[0-9a-f]{12}\.txt$/)
    assert.match(TOB.externalizedFileName("../../etc/passwd", "c", "x"), /^___etc_passwd-[0-9a-f]{12}\.txt$/)
    assert.strictEqual(TOB.safeToolName("..."), "unknown")
  })

  it("takes per-tool thresholds, where 0 disables saving", () => {
    const c = { ...config, tool_overrides: { web_fetch: 5000, noisy: 0 } }
    assert.strictEqual(TOB.thresholdOf(c, "web_fetch"), 5000)
    assert.strictEqual(TOB.thresholdOf(c, "bash"), 12000)
    assert.strictEqual(TOB.triggerOf(c, "noisy"), 30000)
    assert.strictEqual(TOB.triggerOf({ ...c, fallback_max_chars: 0 }, "noisy"), -1)
  })

  it.effect("budgets tool messages inside a result's update too", () =>
    Effect.gen(function*() {
      const big = M.tool(lines(300), "c2", { name: "fetch" })
      const result = { message: M.tool("ok", "c1", { name: "fetch" }), update: { messages: [big], artifacts: ["/x"] } }
      assert.isTrue(TOB.needsBudget(result, config))
      const out = yield* TOB.budgetResult(result, config, () => Effect.succeed(Option.some("/mnt/user-data/outputs/f")))
      assert.strictEqual(out.message, result.message)
      assert.isTrue(M.text(out.update!.messages![0] as ToolMessage).startsWith("[Full fetch output saved to"))
      assert.deepStrictEqual(out.update!.artifacts, ["/x"])
    }))
})

describe("ToolOutputBudget middleware", () => {
  it.effect("saves a large result under the thread's outputs and shows the model a synopsis", () =>
    Effect.gen(function*() {
      const home = tempHome()
      const full = lines(400)
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "search", args: {}, id: "call_1" }] }, "done"],
        tools: [emits("search", full)],
        middlewares: () => [TOB.layer(), ThreadData.layer()]
      }).pipe(withHome(home))
      const saved = resultOf(outcome.state.messages, "search")
      const [, tool, virtualPath, chars] = SAVED.exec(M.text(saved).split("\n")[0]!)!
      assert.strictEqual(tool, "search")
      assert.strictEqual(Number(chars), full.length)
      const file = path.join(
        home,
        "users/default/threads/test-thread/user-data/outputs",
        virtualPath!.slice("/mnt/user-data/outputs/".length)
      )
      assert.strictEqual(fs.readFileSync(file, "utf8"), full)
      assert.match(path.basename(file), /^search-[0-9a-f]{12}\.txt$/)
      assert.strictEqual(fs.readdirSync(path.dirname(file)).length, 1, "no temporary file is left behind")
      assert.isBelow(M.text(saved).length, 5000)
      assert.strictEqual(M.text(resultOf(outcome.requests[1]!.messages, "search")), M.text(saved))
    }).pipe(H.withStore))

  it.effect("without thread_data in state, saves under the thread's directory in the data directory", () =>
    Effect.gen(function*() {
      const home = tempHome()
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "bash", args: {} }] }, "done"],
        tools: [emits("bash", lines(400))],
        middlewares: () => [TOB.layer()]
      }).pipe(withHome(home))
      const [, , virtualPath] = SAVED.exec(M.text(resultOf(outcome.state.messages, "bash")).split("\n")[0]!)!
      assert.match(virtualPath!, /\/bash-[0-9a-f]{12}\.log$/)
      const dir = path.join(home, "users/default/threads/test-thread/user-data/outputs/.tool-results")
      const file = path.join(dir, path.basename(virtualPath!))
      assert.strictEqual(fs.readFileSync(file, "utf8"), lines(400))
    }).pipe(H.withStore))

  it.effect("leaves read_file, small results and per-tool opt-outs alone", () =>
    Effect.gen(function*() {
      const home = tempHome()
      const outcome = yield* H.run({
        script: [{
          toolCalls: [{ name: "read_file", args: {} }, { name: "small", args: {} }, { name: "noisy", args: {} }]
        }, "done"],
        tools: [emits("read_file", lines(800)), emits("small", "tiny"), emits("noisy", lines(300))],
        middlewares: () => [TOB.layer({ tool_overrides: { noisy: 0 } })]
      }).pipe(withHome(home))
      assert.strictEqual(M.text(resultOf(outcome.state.messages, "read_file")), lines(800))
      assert.strictEqual(M.text(resultOf(outcome.state.messages, "small")), "tiny")
      assert.strictEqual(M.text(resultOf(outcome.state.messages, "noisy")), lines(300))
    }).pipe(H.withStore))

  it.effect("cuts to head and tail when the output cannot be saved", () =>
    Effect.gen(function*() {
      // The data directory is a file: nothing can be created under it.
      const home = path.join(tempHome(), "not-a-directory")
      fs.writeFileSync(home, "")
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "huge", args: {} }, { name: "medium", args: {} }] }, "done"],
        tools: [emits("huge", lines(1000)), emits("medium", lines(300))],
        middlewares: () => [TOB.layer()]
      }).pipe(withHome(home))
      const huge = M.text(resultOf(outcome.state.messages, "huge"))
      assert.isAtMost(huge.length, 30000)
      assert.match(huge, /\[\.\.\. \d+ chars omitted from huge output\./)
      // Over the saving threshold but within the fallback limit: kept whole.
      assert.strictEqual(M.text(resultOf(outcome.state.messages, "medium")), lines(300))
    }).pipe(H.withStore))

  it.effect("does nothing when disabled", () =>
    Effect.gen(function*() {
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "huge", args: {} }] }, "done"],
        tools: [emits("huge", lines(1000))],
        middlewares: () => [TOB.layer({ enabled: false })]
      }).pipe(withHome(tempHome()))
      assert.strictEqual(M.text(resultOf(outcome.state.messages, "huge")), lines(1000))
    }).pipe(H.withStore))

  it.effect("cuts oversized results already in the history for the model only", () =>
    Effect.gen(function*() {
      const old = M.tool(lines(1000), "c0", { id: "t0", name: "bash" })
      const history = [
        M.human("q"),
        M.ai("", { tool_calls: [{ id: "c0", name: "bash", args: {} }] }),
        old,
        M.human("next")
      ]
      const outcome = yield* H.run({ script: ["ok"], input: history, middlewares: () => [TOB.layer()] })
        .pipe(withHome(tempHome()))
      const seen = M.text(outcome.requests[0]!.messages[2]!)
      assert.isAtMost(seen.length, 30000)
      assert.include(seen, "chars omitted from bash output")
      assert.strictEqual(M.text(outcome.state.messages[2]!), lines(1000))
    }).pipe(H.withStore))

  it("returns the same request when no historical result is over the limit", () => {
    const request = {
      systemPrompt: undefined,
      messages: [
        M.human("q"),
        M.tool(lines(400), "c", { name: "bash" }),
        M.tool(lines(2000), "r", { name: "read_file" })
      ],
      tools: [],
      settings: {}
    }
    assert.strictEqual(TOB.budgetRequest(request, config), request)
  })

  it.effect("writes inside a sandbox that does not use the thread's host directories, and checks the write", () =>
    Effect.gen(function*() {
      const files = new Map<string, string>()
      let corrupt = false
      const unused = Effect.die("not used in this test")
      const remote: Sandbox = {
        id: "remote-1",
        threadId: "test-thread",
        userId: "default",
        paths: threadPaths("/nowhere", "default", "test-thread"),
        usesThreadDataMounts: false,
        resolve: () => unused,
        mask: (text) => text,
        exec: () => unused,
        readText: () => unused,
        writeText: (p, content) => Effect.sync(() => void files.set(p, corrupt ? content.slice(1) : content)),
        readBytes: () => unused,
        stat: (p) => Effect.sync(() => ({ kind: "file" as const, size: Buffer.byteLength(files.get(p) ?? "") })),
        walk: () => unused,
        withFileLock: () => unused
      }
      let acquired = false
      const provider = SandboxProvider.of({
        acquire: () => Effect.sync(() => (acquired = true, remote)),
        current: () => Effect.sync(() => acquired ? Option.some(remote) : Option.none()),
        get: (id) => Effect.succeed(id === remote.id ? Option.some(remote) : Option.none()),
        release: () => Effect.void
      })
      const remoteTool = (name: string) =>
        Tool.make({
          name,
          description: "Runs in the sandbox",
          parameters: Schema.Struct({}),
          handler: () => Effect.as(Effect.orDie(provider.acquire("test-thread", "default")), lines(400))
        })
      const run = (tool: string) =>
        H.run<AppConfigService | SandboxProvider | H.RunServices>({
          script: [{ toolCalls: [{ name: tool, args: {} }] }, "done"],
          tools: [remoteTool(tool)],
          middlewares: () => [TOB.layer(), SandboxMW.layer()]
        }).pipe(withHome(tempHome()), Effect.provide(Layer.succeed(SandboxProvider, provider)))

      const good = yield* run("remote")
      const [, , virtualPath] = SAVED.exec(M.text(resultOf(good.state.messages, "remote")).split("\n")[0]!)!
      assert.strictEqual(files.get(virtualPath!), lines(400))

      corrupt = true
      const bad = yield* run("flaky")
      // Saved incompletely: no path is given; the result is small enough to stay whole.
      assert.strictEqual(M.text(resultOf(bad.state.messages, "flaky")), lines(400))
    }).pipe(H.withStore))
})

describe("ToolOutputBudget, when nothing can be saved", () => {
  const STORAGE = /\n\n\[\.\.\. (\d+) chars omitted from (\S+) output\. Persistent storage unavailable\. [^\]]*\]\n\n/

  /** The cut text: within the limit, a head ending and a tail starting on a line, naming no file. */
  const assertCut = (text: string, full: string, tool: string) => {
    assert.isAtMost(text.length, 30000)
    const marker = STORAGE.exec(text)
    assert.isNotNull(marker, "the text says storage was unavailable")
    assert.strictEqual(marker![2], tool)
    const [head, tail] = text.split(marker![0])
    assert.isTrue(full.startsWith(head!) && head!.endsWith("\n"))
    assert.isTrue(full.endsWith(tail!) && tail!.startsWith("line "))
    assert.strictEqual(Number(marker![1]), full.length - head!.length - tail!.length)
    assert.notInclude(text, "/mnt/user-data")
    assert.notInclude(text, "saved to")
  }

  it.effect("a failed write: head and tail within fallback_max_chars, and the text says storage was unavailable", () =>
    Effect.gen(function*() {
      const home = path.join(tempHome(), "not-a-directory")
      fs.writeFileSync(home, "")
      const full = lines(1000)
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "huge", args: {} }] }, "done"],
        tools: [emits("huge", full)],
        middlewares: () => [TOB.layer()]
      }).pipe(withHome(home))
      assertCut(M.text(resultOf(outcome.state.messages, "huge")), full, "huge")
    }).pipe(H.withStore))

  it.effect("a result whose update carries several messages: each tool message is cut, the others kept", () =>
    Effect.gen(function*() {
      const home = path.join(tempHome(), "not-a-directory")
      fs.writeFileSync(home, "")
      const a = lines(1000)
      const b = lines(900, 70)
      const batch = Tool.make({
        name: "batch",
        description: "Answers for itself and for two earlier calls",
        parameters: Schema.Struct({}),
        handler: (_, call) =>
          Effect.succeed({
            message: M.tool("batched", call.id, { name: "batch", status: "success" as const }),
            update: {
              messages: [
                M.tool(a, "x1", { name: "fetch_a", status: "success" }),
                M.ai("a note", { id: "note" }),
                M.tool(b, "x2", { name: "fetch_b", status: "success" })
              ]
            }
          })
      })
      const outcome = yield* H.run({
        script: [
          { content: "", toolCalls: [{ name: "fetch_a", args: {}, id: "x1" }, { name: "fetch_b", args: {}, id: "x2" }] },
          { toolCalls: [{ name: "batch", args: {} }] },
          "done"
        ],
        tools: [batch, emits("fetch_a", "pending"), emits("fetch_b", "pending")],
        middlewares: () => [TOB.layer()]
      }).pipe(withHome(home))
      const cut = outcome.requests[2]!.messages
      assertCut(M.text(cut.findLast((m) => m.type === "tool" && m.name === "fetch_a")!), a, "fetch_a")
      assertCut(M.text(cut.findLast((m) => m.type === "tool" && m.name === "fetch_b")!), b, "fetch_b")
      assert.isTrue(outcome.state.messages.some((m) => m.id === "note"))
    }).pipe(H.withStore))
})

describe("a result that holds an image besides its text (as an MCP server may send)", () => {
  const config = TOB.defaultConfig()
  const image = { type: "image_url" as const, image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }
  const flood = M.tool([{ type: "text", text: "x".repeat(5_000_000) }, image], "call_mcp", { name: "mcp_dump" })
  /** Within budget: the text (all of the content but the small image) no longer than `fallback_max_chars`. */
  const bounded = (content: M.Content) =>
    assert.isAtMost(JSON.stringify(content).length - JSON.stringify(image).length, config.fallback_max_chars)

  it.effect("is budgeted by its text: saved and previewed, or cut to head and tail; its image stays", () =>
    Effect.gen(function*() {
      const cut = yield* TOB.budgetMessage(flood, config, () => Effect.succeed(Option.none()))
      bounded(cut.content)
      assert.deepStrictEqual((cut.content as ReadonlyArray<unknown>).at(-1), image)
      const saved = yield* TOB.budgetMessage(flood, config, () => Effect.succeed(Option.some("/mnt/x.txt")))
      assert.include(JSON.stringify(saved.content), "/mnt/x.txt")
      bounded(saved.content)
      assert.deepStrictEqual((saved.content as ReadonlyArray<unknown>).at(-1), image)
    }))

  it("is cut in the history too", () => {
    const [cut] = TOB.truncateHistory([flood], config)
    bounded(cut!.content)
    assert.deepStrictEqual((cut!.content as ReadonlyArray<unknown>).at(-1), image)
  })
})
