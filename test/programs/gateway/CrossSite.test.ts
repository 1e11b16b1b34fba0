/**
 * Web pages in a real headless Chromium trying to drive an open gateway (no tokens, on loopback, the default):
 * a page of another site (another loopback port) sends `no-cors` fetches (JSON as `text/plain`, a typeless
 * blob) to create threads and start runs, and auto-submits forms (urlencoded, `text/plain`, and a multipart file
 * upload); a page on a name the attacker resolves to 127.0.0.1 (DNS rebinding, simulated with Chromium's
 * `--host-resolver-rules`) reads and writes same-origin. Every such request is refused, and afterwards a
 * legitimate client finds no new thread, run or upload and the model was never called. The gateway's own page
 * still works, opened by any loopback spelling. Skipped, saying why, when no Chromium is installed.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import type { BrowserContext, Page } from "playwright-core"
import type { Turn } from "../../../src/layers/ScriptedChatServer.js"
import { CHROMIUM, launchPersistent, requireOrWarn } from "../../support/chromium.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const REBIND = "rebind.test"

// a model that would use a tool, were it ever called
const script = (): Turn => ({
  toolCalls: [{
    name: "write_file",
    arguments: { description: "x", path: "/mnt/user-data/outputs/pwned.txt", content: "pwned\n" }
  }]
})

let gateway: TestGateway
let attacker: Http.Server
let attackerUrl = ""
let context: BrowserContext
let page: Page
let threadId = ""

/** The attacker's pages, by path (filled in once the gateway's address is known). */
const pages = new Map<string, string>()

const legit = (path: string, init: RequestInit = {}) =>
  fetch(`${gateway.url}${path}`, {
    ...init,
    headers: typeof init.body === "string" ? { "content-type": "application/json" } : {}
  })

/** What a legitimate client sees: the threads, the runs and uploads of the thread, and the model's calls. */
const snapshot = async () => {
  const threads = (await (await legit("/threads/search", { method: "POST", body: JSON.stringify({ limit: 1000 }) }))
    .json()) as Array<{ thread_id: string; metadata: unknown }>
  const runs = (await (await legit(`/threads/${threadId}/runs`)).json()) as Array<unknown>
  const uploads = (await (await legit(`/api/threads/${threadId}/uploads/list`)).json()) as { count: number }
  return {
    threads: threads.map((t) => JSON.stringify([t.thread_id, t.metadata])).sort(),
    runs: runs.length,
    uploads: uploads.count,
    modelCalls: gateway.scripted.requests.length
  }
}

/** Opens an attacker page and waits until it says its attempts are answered (`document.title` "done"). */
const attack = async (path: string) => {
  await page.goto(`${attackerUrl}${path}`)
  await page.waitForFunction("document.title === 'done'", undefined, { timeout: 30_000 })
  return page.evaluate("window.results")
}

const runBody = JSON.stringify({
  assistant_id: "lead_agent",
  input: { messages: [{ type: "human", content: "Write pwned.txt" }] }
})

describe.skipIf(CHROMIUM === undefined)("another site's page in Chromium cannot drive the open gateway", () => {
  beforeAll(async () => {
    gateway = await Support.start({ script })
    const created = await legit("/threads", { method: "POST", body: JSON.stringify({ metadata: { owner: "user" } }) })
    threadId = ((await created.json()) as { thread_id: string }).thread_id
    attacker = Http.createServer((request, response) => {
      const html = pages.get(new URL(request.url ?? "/", "http://x").pathname)
      response.writeHead(html === undefined ? 404 : 200, { "content-type": "text/html; charset=utf-8" })
      response.end(html ?? "not found")
    })
    await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve))
    attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`
    const gw = gateway.url
    const runPath = `/threads/${threadId}/runs/wait`

    // fetches that need no preflight: no-cors, JSON as text/plain or as a blob without a type
    pages.set("/fetch.html", `<!doctype html><title>fetching</title><script>
      const attempts = [
        ["${gw}/threads", "text/plain", ${JSON.stringify(JSON.stringify({ metadata: { attack: "no-cors" } }))}],
        ["${gw}${runPath}", "text/plain", ${JSON.stringify(runBody)}],
        ["${gw}/runs/wait", "text/plain", ${JSON.stringify(runBody)}],
        ["${gw}/api/threads/${threadId}/runs/wait", "blob", ${JSON.stringify(runBody)}]
      ]
      window.results = []
      Promise.allSettled(attempts.map(([url, kind, body]) =>
        fetch(url, { method: "POST", mode: "no-cors", body: kind === "blob" ? new Blob([body]) : body })
      )).then((settled) => {
        window.results = settled.map((s) => s.status)
        // and a CORS request, which needs a preflight the gateway does not grant
        const json = { "content-type": "application/json" }
        return fetch("${gw}/threads/search", { method: "POST", headers: json, body: "{}" })
          .then((r) => r.text(), (e) => "blocked: " + e.message)
      }).then((read) => { window.read = read; document.title = "done" })
    </script>`)

    // auto-submitted forms, answered into a frame; "done" once the frame has loaded the answer
    const form = (action: string, enctype: string, fields: string, extra = "") =>
      `<!doctype html><title>form</title><iframe name="sink"></iframe>
      <form method="POST" action="${gw}${action}" enctype="${enctype}" target="sink">${fields}</form>
      <script>
        window.onload = () => {
          ${extra}
          document.querySelector("iframe").addEventListener("load", () => { document.title = "done" })
          document.forms[0].submit()
        }
      </script>`
    pages.set(
      "/form-urlencoded.html",
      form(
        "/threads",
        "application/x-www-form-urlencoded",
        `<input name='{"metadata":{"attack":"form","x":"' value='"}}'>`
      )
    )
    pages.set(
      "/form-text.html",
      form(runPath, "text/plain", `<input name='${runBody.slice(0, -1)},"x":"' value='"}'>`)
    )
    pages.set(
      "/form-multipart.html",
      form(
        `/api/threads/${threadId}/uploads`,
        "multipart/form-data",
        `<input type="file" name="files">`,
        `const files = new DataTransfer()
        files.items.add(new File(["planted by a web page"], "planted.txt", { type: "text/plain" }))
        document.querySelector("input").files = files.files`
      )
    )

    context = await launchPersistent(Support.tempDir("antler-chromium-"), [
      `--host-resolver-rules=MAP ${REBIND} 127.0.0.1`,
      // Chromium's own Local Network Access checks stop a page of a public address (the rebound page) from
      // reaching loopback, unless the user allows it when asked; other browsers have no such check. Off, the
      // browser is the one the gateway must hold against on its own.
      "--disable-features=LocalNetworkAccessChecks"
    ])
    page = context.pages()[0] ?? await context.newPage()
  }, 120_000)
  afterAll(async () => {
    await context?.close()
    await new Promise((resolve) => attacker?.close(resolve))
    await gateway?.stop()
  })

  it("no-cors fetches with JSON as text/plain or a typeless blob create nothing and start no run", async () => {
    const before = await snapshot()
    const results = await attack("/fetch.html")
    // the gateway answered every one (an opaque answer), so whatever it would do is done
    assert.deepStrictEqual(results, ["fulfilled", "fulfilled", "fulfilled", "fulfilled"])
    assert.notInclude(String(await page.evaluate("window.read")), threadId)
    assert.deepStrictEqual(await snapshot(), before)
    assert.strictEqual(before.runs, 0)
    assert.strictEqual(before.modelCalls, 0)
  })

  it("auto-submitted forms (urlencoded, text/plain JSON, a multipart file upload) create nothing", async () => {
    const before = await snapshot()
    for (const path of ["/form-urlencoded.html", "/form-text.html", "/form-multipart.html"]) {
      await attack(path)
      // the frame shows the gateway's refusal (it is another origin's answer: read through the browser's tools)
      const answer = page.frames().find((f) => f.name() === "sink")!
      assert.include(await answer.content(), "refused", path)
    }
    assert.deepStrictEqual(await snapshot(), before)
    assert.strictEqual(before.uploads, 0)
    assert.isFalse(Fs.existsSync(`${gateway.home}/users/default/threads/${threadId}/user-data/uploads/planted.txt`))
  })

  it("a page on a rebound name (resolving to 127.0.0.1) reads and writes nothing, though same-origin", async () => {
    const before = await snapshot()
    const origin = `http://${REBIND}:${new URL(gateway.url).port}`
    // the gateway's own page is not served under that name
    const direct = await page.goto(`${origin}/`)
    assert.strictEqual(direct?.status(), 403)
    // the attacker's page, served from that origin before the name was rebound to 127.0.0.1
    await page.route(`${origin}/attack.html`, (route) =>
      route.fulfill({
        contentType: "text/html",
        body: `<!doctype html><title>rebound</title><script>
          const headers = { "content-type": "application/json" }
          const calls = [
            ["/threads/search", { method: "POST", headers, body: "{}" }],
            ["/threads/${threadId}/state", {}],
            ["/threads", { method: "POST", headers, body: '{"metadata":{"attack":"rebind"}}' }],
            ["/threads/${threadId}/runs/wait", { method: "POST", headers, body: ${JSON.stringify(runBody)} }]
          ]
          Promise.all(calls.map(([path, init]) =>
            fetch(path, init).then(async (r) => [r.status, await r.text()], (e) => [0, "failed: " + e.message])))
            .then((answers) => { window.results = answers; document.title = "done" })
        </script>`
      }))
    await page.goto(`${origin}/attack.html`)
    await page.waitForFunction("document.title === 'done'", undefined, { timeout: 30_000 })
    const answers = await page.evaluate("window.results") as Array<[number, string]>
    for (const [status, text] of answers) {
      assert.strictEqual(status, 403, text)
      assert.include(text, "gateway.allowed_hosts")
      assert.notInclude(text, threadId)
    }
    await page.unroute(`${origin}/attack.html`)
    assert.deepStrictEqual(await snapshot(), before)
  })

  it("the gateway's own page still lists threads and starts threads, opened as 127.0.0.1 or localhost", async () => {
    const port = new URL(gateway.url).port
    for (const base of [`http://127.0.0.1:${port}`, `http://localhost:${port}`]) {
      await page.goto(base)
      await page.locator(`#threads li[data-thread-id="${threadId}"]`).waitFor({ timeout: 30_000 })
      // a state-changing request from the page itself (its own origin) is taken
      const created = await page.evaluate(`fetch("/threads", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ metadata: { from: "own page" } })
      }).then((response) => response.status)`)
      assert.strictEqual(created, 200, base)
    }
  })
})

requireOrWarn("[CrossSite.test] skipped: no /usr/bin/chromium (install it with `apt-get install -y chromium`)")
