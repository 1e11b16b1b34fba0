/**
 * The gateway's web page in a real headless Chromium (Debian's `chromium`, driven by playwright-core): a message
 * sent, the answer streamed in, the tool call folded, the thread listed, a clarification answered with an option
 * button, a file uploaded with a message and the artifact listed and shown in the sandboxed frame; a screenshot saved
 * under test-results/.
 * Skipped, saying why, when no Chromium is installed (`apt-get install -y chromium`, as `.ci/run` does).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { BrowserContext, Page } from "playwright-core"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { CHROMIUM, launchPersistent, requireOrWarn } from "../../support/chromium.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const SCREENSHOTS = Path.join(ROOT, "test-results")

const lastUser = (body: ChatRequestBody) =>
  [...body.messages].reverse().find((m) => m.role === "user" && typeof m.content === "string")?.content as string ?? ""
const lastIsTool = (body: ChatRequestBody) => body.messages[body.messages.length - 1]?.role === "tool"

const HAIKU = "Antlers in the mist,\nthe deer reads every file twice,\nsaves the poem. Done."

const script = (body: ChatRequestBody): Turn => {
  const text = lastUser(body)
  // the haiku drafted in the workspace, then written to outputs and presented (a run that leaves an output
  // unpresented fails its delivery)
  if (text.includes("present")) {
    const results = body.messages.slice(body.messages.findLastIndex((m) => m.role === "user"))
      .filter((m) => m.role === "tool").length
    if (results === 0) {
      const args = { description: "Deliver the haiku", path: "/mnt/user-data/outputs/haiku.md", content: `${HAIKU}\n` }
      return { toolCalls: [{ name: "write_file", arguments: args }] }
    }
    if (results > 1) return "Here is your file."
    return { toolCalls: [{ name: "present_files", arguments: { filepaths: ["/mnt/user-data/outputs/haiku.md"] } }] }
  }
  if (text.includes("haiku")) {
    if (lastIsTool(body)) return HAIKU
    return {
      content: "Let me write it down.",
      toolCalls: [{
        name: "write_file",
        arguments: {
          description: "Save the haiku",
          path: "/mnt/user-data/workspace/haiku.md",
          content: `${HAIKU}\n`
        }
      }]
    }
  }
  if (text.includes("Which color")) {
    return {
      toolCalls: [{
        name: "ask_clarification",
        arguments: { question: "Which color should the deer be?", clarification_type: "approach_choice", options: ["Red", "Blue"] }
      }]
    }
  }
  if (text.includes("Blue")) return "A blue deer, then."
  if (text.includes("notes.txt")) return "I see notes.txt in your uploads."
  return "Hello from the scripted model."
}

let gateway: TestGateway
let context: BrowserContext
let page: Page

describe.skipIf(CHROMIUM === undefined)("the web page in headless Chromium", () => {
  beforeAll(async () => {
    gateway = await Support.start({ script, server: { delayMs: 40 } })
    context = await launchPersistent(Support.tempDir("antler-chromium-"))
    page = context.pages()[0] ?? await context.newPage()
  }, 120_000)
  afterAll(async () => {
    await context?.close()
    await gateway?.stop()
  })

  it("sends a message, streams the answer with its tool call folded, lists the thread; a screenshot is saved", async () => {
    const errors: Array<string> = []
    page.on("pageerror", (error) => errors.push(error.message))
    await page.goto(gateway.url)
    await page.fill("#input", "Write a haiku about deer")
    await page.click("#send")
    // the answer is streamed into the page as it comes (a growing bubble), then settles; the tool call and its
    // result are folded
    await page.locator(".msg.ai.streaming").first().waitFor({ timeout: 60_000 })
    await page.locator(".msg.ai", { hasText: "saves the poem" }).waitFor({ timeout: 60_000 })
    await page.locator("#status", { hasText: "Done" }).waitFor()
    const call = page.locator("[data-testid=tool-call]")
    assert.strictEqual(await call.count(), 1)
    assert.include(await call.locator("summary").innerText(), "write_file")
    assert.isFalse(await call.evaluate((node) => (node as unknown as { open: boolean }).open))
    assert.include(await page.locator("[data-testid=tool-result] summary").innerText(), "write_file")
    // the thread is in the list, named after its first message
    await page.locator("#threads li", { hasText: "Write a haiku about deer" }).waitFor()
    assert.strictEqual(await page.locator("#thread-title").innerText(), "Write a haiku about deer")
    Fs.mkdirSync(SCREENSHOTS, { recursive: true })
    await page.screenshot({ path: Path.join(SCREENSHOTS, "gateway-web.png"), fullPage: true })
    assert.isTrue(Fs.statSync(Path.join(SCREENSHOTS, "gateway-web.png")).size > 10_000)

    // a presented file shows up as an artifact; opening it fetches it with the page's credentials
    await page.fill("#input", "Please present the haiku")
    await page.click("#send")
    await page.locator("#artifact-list a", { hasText: "haiku.md" }).waitFor({ timeout: 60_000 })
    // opened, it is shown as text in the page's sandboxed frame
    await page.locator("#artifact-list a", { hasText: "haiku.md" }).click()
    await page.frameLocator("#viewer-frame").locator("body", { hasText: "saves the poem" }).waitFor()
    assert.strictEqual(await page.locator("#viewer-name").innerText(), "haiku.md")
    assert.deepStrictEqual(errors, [])
  })

  it("shows a clarification's options as buttons; clicking one answers it", async () => {
    await page.click("#new-thread")
    await page.fill("#input", "Which color should the deer be?")
    await page.click("#send")
    const box = page.locator("[data-testid=clarification]")
    await box.waitFor({ timeout: 60_000 })
    assert.include(await box.innerText(), "Which color should the deer be?")
    assert.deepStrictEqual(await box.locator("button").allInnerTexts(), ["Red", "Blue"])
    await page.locator("#status", { hasText: "Done" }).waitFor()
    await box.locator("button", { hasText: "Blue" }).click()
    await page.locator(".msg.ai", { hasText: "A blue deer, then." }).waitFor({ timeout: 60_000 })
    // the answer is shown as the user's choice
    assert.isTrue(await page.locator(".msg.human.answer", { hasText: "Blue" }).isVisible())
  })

  it("uploads a file with a message; the model gets it in the thread's uploads", async () => {
    await page.click("#new-thread")
    const file = Path.join(Support.tempDir("antler-upload-"), "notes.txt")
    Fs.writeFileSync(file, "remember the antlers\n")
    await page.setInputFiles("#files", file)
    await page.fill("#input", "What is in notes.txt?")
    await page.click("#send")
    await page.locator(".msg.ai", { hasText: "I see notes.txt" }).waitFor({ timeout: 60_000 })
    // the model's request carried the uploads block naming the file's virtual path
    const request = gateway.scripted.requests.find((r) =>
      JSON.stringify(r.messages).includes("/mnt/user-data/uploads/notes.txt")
    )
    assert.isDefined(request)
  })
})

requireOrWarn("[Web.test] skipped: no /usr/bin/chromium (install it with `apt-get install -y chromium`, as .ci/run does)")
