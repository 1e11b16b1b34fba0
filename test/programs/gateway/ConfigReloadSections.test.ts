/**
 * DeerFlow test_app_config_reload.py (`get_memory_config()` follows an edit of `config.yaml`; a section removed
 * takes its defaults again) and test_reload_boundary.py (`memory` is not startup-only), through the real gateway,
 * its config file in a temp directory and the scripted model behind the real openai client: an edit of `memory`
 * is read by the next run's memory update and injection (on or off, the update model, `max_facts`, the debounce,
 * `injection_enabled`) and by the memory endpoints; where the files are stays as the gateway started, named in a
 * warning. Then `uploads`, `skill_scan` and `skills` (DeerFlow's readers of each named above its test).
 */
import { Client } from "@langchain/langgraph-sdk"
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Yaml from "yaml"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { captureLogs } from "../../support/logs.js"
import { eventually } from "../../support/poll.js"
import * as Support from "./support.js"

const human = Support.userInput
const model = Support.scriptedModel

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((part) => (typeof part?.text === "string" ? part.text : "")).join("")
    : ""

const MEMORY_PROMPT = "You maintain the long-term memory"

/** The write gate's labels of a fact that is the user's. */
const USER = { scope: "user", durability: "durable", authority: "descriptive" } as const

const isMemoryCall = (body: ChatRequestBody) => textOf(body.messages[0]?.content).startsWith(MEMORY_PROMPT)

/** The model: a memory update proposes three facts; anything else is acknowledged. */
const script = (body: ChatRequestBody): Turn =>
  isMemoryCall(body)
    ? JSON.stringify({
      newFacts: ["Hikes in the Alps", "Drinks green tea", "Plays the cello"].map((content, i) => ({
        content,
        category: "preference",
        confidence: 0.99 - i * 0.05,
        ...USER
      }))
    })
    : "Noted."

describe("config.yaml's memory edited while the gateway runs", () => {
  it("the next run's memory update and injection read the edit; where the files are stays", async () => {
    const { capture, logged } = captureLogs()
    const dir = Support.tempDir("antler-gw-reload-memory-")
    const file = Path.join(dir, "config.yaml")
    const gateway = await Support.start({
      script,
      file,
      reload: true,
      logger: capture,
      config: (url) => ({
        models: [model("first", url), model("second", url)],
        // (a debounce longer than the test: the edit's is the one waited)
        memory: { enabled: false, backend_config: { debounce_seconds: 3600 } }
      })
    })
    const { url } = gateway.scripted
    const write = (memory: Record<string, unknown>) =>
      Fs.writeFileSync(file, Yaml.stringify({
        ...Support.baseConfig(url),
        models: [model("first", url), model("second", url)],
        memory
      }))
    const stored = Path.join(gateway.home, "users", "default", "memory.json")
    const facts = (): ReadonlyArray<string> =>
      Fs.existsSync(stored) ? JSON.parse(Fs.readFileSync(stored, "utf8")).facts.map((f: any) => f.content) : []
    const memoryCalls = () => gateway.scripted.requests.filter(isMemoryCall)
    try {
      const client = new Client({ apiUrl: gateway.url })
      // the first request of a run in a new thread
      const runIn = async (content: string) => {
        const thread = await client.threads.create()
        const before = gateway.scripted.requests.length
        await client.runs.wait(thread.thread_id, "lead_agent", { input: human(content) })
        return gateway.scripted.requests[before]!
      }

      await runIn("alpha: memory is off for this one")
      const addFact = (content: string) =>
        fetch(`${gateway.url}/api/memory/facts`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ content, category: "preference", confidence: 0.9 })
        })
      write({
        enabled: true,
        model_name: "second",
        injection_enabled: false,
        backend_config: { debounce_seconds: 0, max_facts: 2, max_fact_chars: 50, storage_path: "elsewhere" }
      })
      await runIn("beta: memory is on from here")
      const kept = await eventually(() => (facts().length > 0 ? facts() : undefined), "a memory update stored")
      assert.deepStrictEqual(kept, ["Hikes in the Alps", "Drinks green tea"], "max_facts of the edit")
      const [update] = memoryCalls()
      assert.strictEqual(update!.model, "model-second", "memory.model_name of the edit")
      assert.include(textOf(update!.messages[0]?.content), "beta")
      assert.notInclude(textOf(update!.messages[0]?.content), "alpha", "a run of memory off is not remembered")
      assert.isFalse(Fs.existsSync(Path.join(dir, "elsewhere")), "the files stay where the gateway started")
      assert.isTrue(logged.some((line) =>
        line === `${file}: memory.backend_config.storage_path changed; that setting is read when the process ` +
          "starts, so the edit takes effect on a restart"
      ), logged.join("\n"))

      // the memory endpoints read the limits of the edit
      const long = await addFact("x".repeat(60))
      assert.strictEqual(long.status, 422)
      assert.include(JSON.stringify(await long.json()), "at most 50 characters")

      const injected = (request: ChatRequestBody) => JSON.stringify(request.messages).includes("Hikes in the Alps")
      assert.isFalse(injected(await runIn("gamma")), "injection_enabled: false")
      write({ enabled: true, backend_config: { debounce_seconds: 0, max_facts: 2, storage_path: "elsewhere" } })
      assert.isTrue(injected(await runIn("delta")), "injected once the edit switches it on")
      // the default model again for the update: the run's
      await eventually(
        () => memoryCalls().find((body) => textOf(body.messages[0]?.content).includes("delta")),
        "the update of delta's thread"
      ).then((body) => assert.strictEqual(body.model, "model-first"))
    } finally {
      await gateway.stop()
    }
    assert.isFalse(
      memoryCalls().some((body) => textOf(body.messages[0]?.content).includes("alpha")),
      "alpha's run was never queued"
    )
  }, 60_000)
})

// DeerFlow's uploads router reads `uploads.*` from `get_config()` at each request (`_get_upload_limits`,
// `_auto_convert_documents_enabled`)
describe("config.yaml's uploads edited while the gateway runs", () => {
  it("the next upload and the limits endpoint read the edit: the limits and the documents' conversion", async () => {
    const file = Path.join(Support.tempDir("antler-gw-reload-uploads-"), "config.yaml")
    const gateway = await Support.start({
      script: () => "Hello.",
      file,
      reload: true,
      config: { uploads: { max_files: 1, auto_convert_documents: true } }
    })
    const thread = "reload-uploads"
    const upload = async (...names: ReadonlyArray<string>) => {
      const form = new FormData()
      for (const name of names) {
        form.append("files", new Blob([`<html><body><p>${name}</p></body></html>`], { type: "text/html" }), name)
      }
      const response = await fetch(`${gateway.url}/api/threads/${thread}/uploads`, { method: "POST", body: form })
      return { status: response.status, body: (await response.json()) as any }
    }
    const limits = async () => (await fetch(`${gateway.url}/api/threads/${thread}/uploads/limits`)).json()
    try {
      assert.strictEqual((await limits() as any).max_files, 1)
      const refused = await upload("a.html", "b.html")
      assert.strictEqual(refused.status, 413)
      const converted = await upload("a.html")
      assert.strictEqual(converted.status, 200)
      assert.strictEqual(converted.body.files[0].markdown_file, "a.md", "conversion on, as the gateway started")

      Fs.writeFileSync(file, Yaml.stringify({
        ...Support.baseConfig(gateway.scripted.url),
        uploads: { max_files: 3, max_file_size: 4096, auto_convert_documents: false }
      }))
      assert.deepStrictEqual(await limits(), { max_files: 3, max_file_size: 4096, max_total_size: 100 * 1024 * 1024 })
      const taken = await upload("b.html", "c.html")
      assert.strictEqual(taken.status, 200, JSON.stringify(taken.body))
      assert.deepStrictEqual(taken.body.files.map((f: any) => [f.filename, f.markdown_file]), [
        ["b.html", null],
        ["c.html", null]
      ], "auto_convert_documents: false of the edit")
      assert.strictEqual((await upload("a.html", "b.html", "c.html", "d.html")).status, 413)
    } finally {
      await gateway.stop()
    }
  }, 60_000)
})

// DeerFlow's SkillScan reads `skill_scan.enabled` from `get_app_config()` at each check (`skill_scan_enabled`)
describe("config.yaml's skill_scan edited while the gateway runs", () => {
  it("the next custom skill edit and the next run's skill_manage are checked, or not, as the edit says", async () => {
    const dir = Support.tempDir("antler-gw-reload-scan-")
    const file = Path.join(dir, "config.yaml")
    const skill = (name: string) => Path.join(dir, "skills", "custom", name, "SKILL.md")
    const first = "---\nname: notes\ndescription: Notes\n---\n# Notes\nStep one.\n"
    const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
    Fs.mkdirSync(Path.dirname(skill("notes")), { recursive: true })
    Fs.writeFileSync(skill("notes"), first)
    const ADMIN = "carol-token-0123456789abcdef"
    const sections = {
      skill_evolution: { enabled: true },
      gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: ADMIN, user: "carol", admin: true }] } }
    }
    // an admin's run that asks for it creates a skill holding the key with `skill_manage`
    const script = (body: ChatRequestBody): Turn => {
      const asked = textOf(body.messages.filter((m) => m.role === "user").at(-1)?.content)
      const name = /create (\S+)/.exec(asked)?.[1]
      if (name === undefined || body.messages.some((m) => m.role === "tool")) return "Done."
      const content = `---\nname: ${name}\ndescription: Keys\n---\n# Keys\n${key}`
      return { toolCalls: [{ id: "c1", name: "skill_manage", arguments: { action: "create", name, content } }] }
    }
    const gateway = await Support.start({ script, file, reload: true, config: sections })
    const headers = { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }
    const edit = async () => {
      const response = await fetch(`${gateway.url}/api/skills/custom/notes`, {
        method: "PUT",
        headers,
        body: JSON.stringify({ content: `${first}${key}` })
      })
      return { status: response.status, body: JSON.stringify(await response.json()) }
    }
    const client = new Client({ apiUrl: gateway.url, apiKey: ADMIN })
    const run = async (content: string) => {
      const thread = await client.threads.create()
      await client.runs.wait(thread.thread_id, "lead_agent", { input: human(content) })
    }
    try {
      const refused = await edit()
      assert.strictEqual(refused.status, 400, refused.body)
      assert.include(refused.body, "secret-private-key (CRITICAL)")
      assert.strictEqual(Fs.readFileSync(skill("notes"), "utf8"), first)
      await run("create keys-one")
      assert.isFalse(Fs.existsSync(skill("keys-one")), "skill_manage's write refused by the scan")

      const base = Support.baseConfig(gateway.scripted.url)
      Fs.writeFileSync(file, Yaml.stringify({ ...base, ...sections, skill_scan: { enabled: false } }))
      const taken = await edit()
      assert.strictEqual(taken.status, 200, taken.body)
      assert.include(Fs.readFileSync(skill("notes"), "utf8"), "BEGIN OPENSSH PRIVATE KEY")
      await run("create keys-two")
      assert.isTrue(Fs.existsSync(skill("keys-two")), "skill_manage's write, unscanned")
    } finally {
      await gateway.stop()
    }
  }, 60_000)
})

// DeerFlow's skill storage is built again for a new `get_app_config()`; its sandbox provider maps the skills
// directory once, at its start (`LocalSandboxProvider._setup_path_mappings`)
describe("config.yaml's skills edited while the gateway runs", () => {
  it("the next run's agent lists the skills as the edit says; the directory and its mount stay", async () => {
    const { capture, logged } = captureLogs()
    const dir = Support.tempDir("antler-gw-reload-skills-")
    const file = Path.join(dir, "config.yaml")
    Fs.mkdirSync(Path.join(dir, "skills", "public", "demo"), { recursive: true })
    Fs.writeFileSync(
      Path.join(dir, "skills", "public", "demo", "SKILL.md"),
      "---\nname: demo\ndescription: A built-in skill for the demo\n---\n# Demo\n"
    )
    const gateway = await Support.start({ script: () => "Hello.", file, reload: true, logger: capture, config: {} })
    const promptOf = () => Support.firstRequestOf(gateway)
    try {
      const full = await promptOf()
      assert.include(full.system, "A built-in skill for the demo")
      assert.notInclude(full.system, "<skill_index>")
      Fs.writeFileSync(file, Yaml.stringify({
        ...Support.baseConfig(gateway.scripted.url),
        skills: { deferred_discovery: true, path: "elsewhere", container_path: "/mnt/other-skills" }
      }))
      const deferred = await promptOf()
      assert.include(deferred.system, "<skill_index>", "skills.deferred_discovery of the edit")
      assert.include(deferred.tools, "describe_skill")
      assert.include(deferred.system, "demo", "the skills of the directory the gateway started with")
      assert.include(deferred.system, "/mnt/skills", "where its sandbox shows them")
      assert.notInclude(deferred.system, "/mnt/other-skills")
      assert.isTrue(logged.some((line) =>
        line === `${file}: skills.path, skills.container_path changed; these settings are read when the process ` +
          "starts, so the edit takes effect on a restart"
      ), logged.join("\n"))
    } finally {
      await gateway.stop()
    }
  }, 60_000)
})
