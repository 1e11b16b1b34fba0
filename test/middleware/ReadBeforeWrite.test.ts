/**
 * ReadBeforeWrite over the real sandbox tools and a real local sandbox: what the model reads when it changes a
 * file it has not read at its current version, what the files on disk end up holding, and the read marks the
 * thread keeps.
 */
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as SandboxTools from "../../src/layers/SandboxTools.js"
import * as ReadBeforeWrite from "../../src/middleware/ReadBeforeWrite.js"
import * as SandboxMW from "../../src/middleware/Sandbox.js"
import * as ToolErrorHandling from "../../src/middleware/ToolErrorHandling.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import * as Tool from "../../src/services/Tool.js"
import type { ScriptedModel } from "../../src/index.js"
import type { JsonObject } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"
import * as H from "../support/harness.js"

const tempDir = tempDirs()
const W = "/mnt/user-data/workspace"
const THREAD = "rbw-thread"

const setup = () => {
  const home = tempDir("antler-rbw-")
  const app = AppConfigService.of({ config: defaults(), source: undefined, home, ignored: [] })
  const provider = LocalSandbox.make(app, { bwrap: "off" })
  const workspace = threadPaths(home, "default", THREAD).workspace
  const onHost = (name: string) => Path.join(workspace, name)
  /** Runs one turn of the thread: the model makes these calls, one response each, then says "done". */
  const turn = (
    responses: ReadonlyArray<ReadonlyArray<readonly [string, JsonObject]>>,
    between?: (i: number) => void,
    custom: ReadonlyArray<Tool.Tool> = []
  ) =>
    Effect.gen(function*() {
      const sandboxTools = yield* SandboxTools.tools({ vision: false, bash: false })
      // a custom tool replaces the sandbox tool of its name
      const tools = [...sandboxTools.filter((t) => !custom.some((c) => c.name === t.name)), ...custom]
      const script: ScriptedModel.Script = (_request, i) => {
        between?.(i)
        const calls = responses[i]
        if (calls === undefined) return "done"
        return { toolCalls: calls.map(([name, args]) => ({ name, args: { description: "test", ...args } })) }
      }
      return yield* H.run({
        threadId: THREAD,
        script,
        tools,
        middlewares: () => [SandboxMW.layer(), ReadBeforeWrite.layer(), ToolErrorHandling.layer()]
      })
    }).pipe(Effect.provideService(SandboxProvider, provider), Effect.provideService(AppConfigService, app))
  return { turn, onHost }
}

/** The tool results of a run's thread, in order, as the model reads them. */
const results = (out: H.Outcome) => out.state.messages.filter((m): m is M.ToolMessage => m.type === "tool")

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex")

const isBlocked = (message: M.ToolMessage) =>
  message.status === "error" && M.text(message).includes("you have not read its current version")

describe("ReadBeforeWrite", () => {
  it.effect("a new file may be created; changing it then needs a read, and each further change another", () =>
    Effect.gen(function*() {
      const { onHost, turn } = setup()
      const file = `${W}/notes.md`
      const out = yield* turn([
        [["write_file", { path: file, content: "# Notes\n- one\n" }]],
        [["str_replace", { path: file, old_str: "- one", new_str: "- uno" }]],
        [["read_file", { path: file, start_line: 2, end_line: 2 }]],
        [["str_replace", { path: file, old_str: "- one", new_str: "- uno" }]],
        [["write_file", { path: file, content: "- two\n", append: true }]]
      ])
      const [created, refused, read, edited, again] = results(out)
      assert.strictEqual(M.text(created!), "OK")
      assert.isTrue(isBlocked(refused!))
      const text = M.text(refused!)
      assert.include(text, `Error: str_replace blocked — ${file} already exists`)
      assert.include(text, "Any write invalidates earlier reads, so re-read before every modification.")
      assert.include(text, "then retry")
      // the blocked result carries tool metadata the model-facing guards read, as DeerFlow classifies it
      assert.deepStrictEqual(refused!.additional_kwargs?.[ToolErrorHandling.TOOL_META_KEY], {
        status: "error",
        error_type: "unknown",
        recoverable_by_model: true,
        recommended_next_action: "try_alternative",
        source: "tool_return"
      })
      assert.strictEqual(M.text(read!), "- one")
      // a ranged read still marks the whole file
      assert.deepStrictEqual(read!.additional_kwargs?.[ReadBeforeWrite.READ_MARK_KEY], {
        path: file,
        hash: sha256("# Notes\n- one\n")
      })
      assert.strictEqual(M.text(edited!), "OK")
      // the edit did not refresh the mark: the append is refused, and the file keeps the edit only
      assert.isTrue(isBlocked(again!))
      assert.include(M.text(again!), "Error: write_file blocked — ")
      assert.strictEqual(Fs.readFileSync(onHost("notes.md"), "utf8"), "# Notes\n- uno\n")
      assert.strictEqual(out.end.status, "success")
    }).pipe(H.withStore))

  it.effect("relative and absolute spellings of a path are one file; a mark from an earlier run still counts", () =>
    Effect.gen(function*() {
      const { onHost, turn } = setup()
      yield* turn([
        [["write_file", { path: "plan.txt", content: "step 1\n" }]],
        [["read_file", { path: "./plan.txt" }]]
      ])
      const out = yield* turn([[["write_file", { path: `${W}//plan.txt`, content: "step 2\n", append: true }]]])
      const [appended] = results(out).slice(-1)
      assert.strictEqual(M.text(appended!), "OK")
      assert.strictEqual(Fs.readFileSync(onHost("plan.txt"), "utf8"), "step 1\nstep 2\n")
      const mark = out.state.messages.flatMap((m) => m.additional_kwargs?.[ReadBeforeWrite.READ_MARK_KEY] ?? [])
      assert.deepStrictEqual(mark, [{ path: `${W}/plan.txt`, hash: sha256("step 1\n") }])
    }).pipe(H.withStore))

  it.effect("a file changed since it was read must be read again", () =>
    Effect.gen(function*() {
      const { onHost, turn } = setup()
      const file = `${W}/data.csv`
      const out = yield* turn(
        [
          [["write_file", { path: file, content: "a,b\n" }]],
          [["read_file", { path: file }]],
          [["write_file", { path: file, content: "c,d\n" }]]
        ],
        // someone else changes the file after the model read it
        (i) => i === 2 && Fs.writeFileSync(onHost("data.csv"), "a,b\n1,2\n")
      )
      assert.isTrue(isBlocked(results(out)[2]!))
      assert.strictEqual(Fs.readFileSync(onHost("data.csv"), "utf8"), "a,b\n1,2\n")
    }).pipe(H.withStore))

  it.effect("two edits in one response after one read: one runs, the other is refused", () =>
    Effect.gen(function*() {
      const { onHost, turn } = setup()
      const file = `${W}/list.md`
      const out = yield* turn([
        [["write_file", { path: file, content: "- a\n" }]],
        [["read_file", { path: file }]],
        [["write_file", { path: file, content: "- b\n", append: true }], [
          "write_file",
          { path: file, content: "- c\n", append: true }
        ]]
      ])
      const last = results(out).slice(-2)
      assert.strictEqual(last.filter((m) => M.text(m) === "OK").length, 1)
      assert.strictEqual(last.filter(isBlocked).length, 1)
      const lines = Fs.readFileSync(onHost("list.md"), "utf8").split("\n").filter((l) => l !== "")
      assert.strictEqual(lines.length, 2)
    }).pipe(H.withStore))

  it.effect("a read beside a write of the same file: its mark is of what it returned, and a later write runs only on a current one", () =>
    Effect.gen(function*() {
      // The sandbox's read_file stamps its own marks and takes no lock: whichever way the read and the write of
      // one response interleave, the mark is of the bytes the model got, and the next write passes only if those
      // are the file as it is then.
      for (let round = 0; round < 6; round++) {
        const { onHost, turn } = setup()
        const file = `${W}/race-${round}.md`
        const out = yield* turn([
          [["write_file", { path: file, content: "one\n" }]],
          [["read_file", { path: file }]],
          [["read_file", { path: file }], ["write_file", { path: file, content: "two\n", append: true }]],
          [["write_file", { path: file, content: "three\n", append: true }]]
        ])
        const [, , read, beside, last] = results(out).slice(-5)
        assert.strictEqual(M.text(beside!), "OK", "the write beside the read had read the file before")
        const mark = read!.additional_kwargs?.[ReadBeforeWrite.READ_MARK_KEY] as { path: string; hash: string }
        assert.strictEqual(mark.path, file)
        const seen = M.text(read!) === "one\n" ? "one\n" : "one\ntwo\n"
        assert.strictEqual(mark.hash, sha256(seen), "the mark is of the content the read returned")
        const after = Fs.readFileSync(onHost(`race-${round}.md`), "utf8")
        if (seen === "one\ntwo\n") {
          assert.strictEqual(M.text(last!), "OK")
          assert.strictEqual(after, "one\ntwo\nthree\n")
        } else {
          assert.isTrue(isBlocked(last!), "a mark made stale by the write beside it blocks the next write")
          assert.strictEqual(after, "one\ntwo\n")
        }
      }
    }).pipe(H.withStore))

  it.effect("a failed read marks nothing; a file that cannot be inspected is left to the tool's own error", () =>
    Effect.gen(function*() {
      const { onHost, turn } = setup()
      Fs.mkdirSync(onHost("folder"), { recursive: true })
      const out = yield* turn([
        [["read_file", { path: `${W}/missing.txt` }]],
        [["read_file", { path: `${W}/folder` }]],
        [["write_file", { path: `${W}/folder`, content: "x" }]]
      ])
      const [missing, folder, write] = results(out)
      assert.include(M.text(missing!), "Error:")
      assert.include(M.text(folder!), "Error:")
      assert.isFalse(out.state.messages.some((m) => m.additional_kwargs?.[ReadBeforeWrite.READ_MARK_KEY] !== undefined))
      assert.strictEqual(write!.status, "error")
      assert.isFalse(isBlocked(write!))
    }).pipe(H.withStore))
})

describe("ReadBeforeWrite with a read_file of the app's own", () => {
  it.effect("a read result that comes without a mark is marked from the file as the sandbox reads it", () =>
    Effect.gen(function*() {
      const { onHost, turn } = setup()
      const file = `${W}/log.txt`
      // the app's read_file reads the host file itself and stamps nothing
      const readFile = Tool.make({
        name: "read_file",
        description: "Read a file.",
        parameters: Schema.Struct({ path: Schema.String }),
        readOnly: true,
        handler: ({ path }) => Effect.sync(() => Fs.readFileSync(onHost(Path.basename(path)), "utf8"))
      })
      const out = yield* turn(
        [
          [["write_file", { path: file, content: "one\n" }]],
          [["read_file", { path: file }]],
          [["write_file", { path: file, content: "two\n", append: true }]]
        ],
        undefined,
        [readFile]
      )
      const [, read, appended] = results(out)
      assert.deepStrictEqual(read!.additional_kwargs?.[ReadBeforeWrite.READ_MARK_KEY], { path: file, hash: sha256("one\n") })
      assert.strictEqual(M.text(appended!), "OK")
      assert.strictEqual(Fs.readFileSync(onHost("log.txt"), "utf8"), "one\ntwo\n")
    }).pipe(H.withStore))
})

describe("ReadBeforeWrite helpers", () => {
  it("latestMarkHash takes the newest mark for the path", () => {
    const mark = (path: string, hash: string) =>
      M.tool("x", "c", { name: "read_file", additional_kwargs: { [ReadBeforeWrite.READ_MARK_KEY]: { path, hash } } })
    const messages = [mark("/a", "1"), mark("/b", "2"), mark("/a", "3"), M.ai("hi")]
    assert.strictEqual(ReadBeforeWrite.latestMarkHash(messages, "/a"), "3")
    assert.strictEqual(ReadBeforeWrite.latestMarkHash(messages, "/b"), "2")
    assert.isUndefined(ReadBeforeWrite.latestMarkHash(messages, "/c"))
  })
})
