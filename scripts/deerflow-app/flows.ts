/**
 * The flows a DeerFlow user goes through in the app, driven in headless Chromium: each is a list of steps with
 * the checks a user would make by looking (an answer shown, a list filled), a screenshot per screen, and the calls
 * the app would make next once the calls that fail today succeed (read in its source, for the recordings). A check
 * that fails ends its flow with the reason; the next flow starts from a fresh page.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { Locator, Page } from "playwright-core"
import { ARTIFACT_TEXT } from "./model.js"
import type { Expected, ReadAfter } from "./record.js"

/** What a flow gets: the page, the app's URL, screenshots, and what earlier flows left (a chat's URL). */
export interface FlowContext {
  readonly page: Page
  readonly app: string
  readonly shot: (name: string) => Promise<void>
  readonly shared: Map<string, string>
  readonly scratch: string
}

/** A flow. */
export interface Flow {
  readonly name: string
  readonly description: string
  /** DeerFlow's local accounts (`enabled`) or its auth-disabled mode. */
  readonly auth: "disabled" | "enabled"
  readonly expected: ReadonlyArray<Expected>
  /** What the app reads of calls once another was made, beyond each endpoint's contract. */
  readonly readsAfter?: ReadonlyArray<ReadAfter>
  readonly run: (ctx: FlowContext) => Promise<void>
}

/** A check that failed: what the user would have seen (or not). */
export class CheckFailed extends Error {}

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`

/** Waits until `locator` is visible; fails with `what` otherwise. */
const see = async (locator: Locator, what: string, timeout = 60_000) => {
  try {
    await locator.first().waitFor({ state: "visible", timeout })
  } catch {
    throw new CheckFailed(`${what}: not shown within ${seconds(timeout)}`)
  }
}

/** Waits until `url` matches. */
const at = async (page: Page, url: RegExp, what: string, timeout = 60_000) => {
  try {
    await page.waitForURL(url, { timeout })
  } catch {
    throw new CheckFailed(`${what}: the page stayed at ${new URL(page.url()).pathname}`)
  }
}

// the chat's box, or the agent designer's
const composer = (page: Page) => page.getByPlaceholder(/how can i assist you|describe the agent you want/i)

/** The answer of the scripted model to `question` (its `take`). */
const answerTo = (page: Page, question: string, take = 1) =>
  page.getByText(`Scripted answer to: ${question} (take ${take})`)

/** Sends a message from the composer. */
const send = async (page: Page, text: string) => {
  const box = composer(page)
  await see(box, "the message box")
  await box.fill(text)
  await box.press("Enter")
}

/** Opens a new chat, asks `question` and waits for its answer; the chat's URL. */
const newChat = async (ctx: FlowContext, question: string, shotName?: string) => {
  await ctx.page.goto(`${ctx.app}/workspace/chats/new`)
  await see(composer(ctx.page), "the new chat's message box", 600_000)
  await send(ctx.page, question)
  await see(answerTo(ctx.page, question), `the answer to "${question}"`)
  await at(ctx.page, /\/workspace\/chats\/[0-9a-f-]{36}/, "the chat's own address after its first answer")
  if (shotName !== undefined) await ctx.shot(shotName)
  return ctx.page.url()
}

/** Waits until the run in the page is over (the submit button is a send button again). */
const idle = async (page: Page, timeout = 60_000) => {
  try {
    await page.locator("button[aria-label=Submit] svg.lucide-arrow-up").waitFor({ timeout })
  } catch {
    throw new CheckFailed(`the composer stayed busy (its button never became a send button again) for ${seconds(timeout)}`)
  }
}

const turnWith = (page: Page, text: string) => page.locator("[data-assistant-turn]").filter({ hasText: text })

/** The calls of a chat page that are made whatever the flow. */
const CHAT_PAGE: ReadonlyArray<Expected> = [
  { method: "GET", path: "/api/v1/auth/me", when: "every page (the Next server checks the session)" },
  { method: "GET", path: "/api/features", when: "the workspace opens" },
  { method: "GET", path: "/api/models", when: "the workspace opens" },
  { method: "GET", path: "/api/skills", when: "the workspace opens (slash autocomplete)" },
  { method: "GET", path: "/api/channels/providers", when: "the workspace opens (sidebar)" },
  { method: "GET", path: "/api/suggestions/config", when: "the composer mounts" },
  { method: "POST", path: "/api/threads/search", when: "the sidebar lists chats" },
  { method: "GET", path: "/api/threads/{thread_id}/uploads/limits", when: "the composer mounts" }
]

/** The calls around one message sent and answered. */
const ONE_RUN: ReadonlyArray<Expected> = [
  { method: "POST", path: "/api/threads/{thread_id}/runs/stream", when: "a message is sent" },
  { method: "POST", path: "/api/threads/{thread_id}/history", when: "after each run (the checkpoint of the next run)" },
  { method: "GET", path: "/api/threads/{thread_id}/messages/page", when: "the chat is shown (its history)" },
  { method: "GET", path: "/api/threads/{thread_id}/token-usage", when: "after each run" },
  { method: "GET", path: "/api/threads/{thread_id}", when: "the chat page loads its metadata" },
  { method: "POST", path: "/api/threads/{thread_id}/suggestions", when: "after an answer, when suggestions are on" },
  { method: "GET", path: "/api/threads/{thread_id}/runs/{run_id}/workspace-changes", when: "an answer's changes badge (once messages/page gives run ids)" }
  // (feedback, `PUT .../runs/{run_id}/feedback`, is a click on thumbs up, which no flow makes)
]

const FIRST = "Tell me about deer antlers"
const FOLLOW_UPS = ["How fast do antlers grow?", "Which deer has the largest antlers?"]

export const FLOWS: ReadonlyArray<Flow> = [
  {
    name: "new-chat",
    description: "A new chat: a first message, then two follow-ups, each answered in the same chat.",
    auth: "disabled",
    expected: [
      ...CHAT_PAGE,
      { method: "POST", path: "/api/threads", when: "the first message of a new chat" },
      ...ONE_RUN,
      { method: "PUT", path: "/api/threads/{thread_id}/runs/{run_id}/feedback", when: "thumbs up on an answer" }
    ],
    run: async (ctx) => {
      await ctx.page.goto(`${ctx.app}/workspace/chats/new`)
      await see(composer(ctx.page), "the new chat's message box", 600_000)
      await ctx.shot("empty")
      await send(ctx.page, FIRST)
      await see(answerTo(ctx.page, FIRST), "the first answer")
      await idle(ctx.page)
      ctx.shared.set("chat", ctx.page.url())
      await ctx.shot("first-answer")
      for (const [i, question] of FOLLOW_UPS.entries()) {
        await send(ctx.page, question)
        try {
          await see(answerTo(ctx.page, question), `the answer to follow-up ${i + 1} ("${question}")`, 60_000)
        } finally {
          await ctx.shot(`follow-up-${i + 1}`)
        }
        await idle(ctx.page)
      }
    }
  },
  {
    name: "reload",
    description: "A chat reloaded in the browser: its messages are shown again from the server.",
    auth: "disabled",
    expected: [...CHAT_PAGE, ...ONE_RUN.filter((e) => e.method === "GET")],
    run: async (ctx) => {
      // a chat of its own, so that the flow's recording replays without the others
      const question = "Do deer sleep standing up?"
      await newChat(ctx, question, "answered")
      await idle(ctx.page)
      await ctx.page.reload()
      await see(ctx.page.getByText(question), "the chat's question after the reload", 120_000)
      await see(answerTo(ctx.page, question), "the chat's answer after the reload")
      await ctx.page.waitForTimeout(3000)
      await ctx.shot("reloaded")
      const failed = ctx.page.getByText(/Failed to load thread history/i)
      if (await failed.count() > 0) throw new CheckFailed('the app shows "Failed to load thread history"')
    }
  },
  {
    name: "stop",
    description: "A message whose answer is stopped with the stop button while it streams.",
    auth: "disabled",
    expected: [
      ...CHAT_PAGE,
      ...ONE_RUN,
      { method: "POST", path: "/api/threads/{thread_id}/runs/{run_id}/cancel", when: "the stop button" },
      { method: "GET", path: "/api/threads/{thread_id}/runs/{run_id}", when: "a reconnect after the stop (terminal runs are not joined)" }
    ],
    readsAfter: [
      {
        after: "POST /api/threads/{thread_id}/runs/{run_id}/cancel",
        call: "GET /api/threads/{thread_id}/messages/page",
        fields: ["data[?content.type=ai]"],
        why: "after the stop: the start of the stopped answer (an AI message), which the app keeps showing"
      }
    ],
    run: async (ctx) => {
      await ctx.page.goto(`${ctx.app}/workspace/chats/new`)
      await see(composer(ctx.page), "the new chat's message box", 600_000)
      await send(ctx.page, "Please answer slowly: what do deer eat?")
      // the model sends the start of its answer, then nothing until the run is cancelled
      await see(ctx.page.getByText(/Working/), "the answer under way (Working...)")
      await ctx.page.waitForTimeout(3000)
      await ctx.shot("streaming")
      const partialWhileStreaming = await ctx.page.getByText("Let me think about this").count() > 0
      const stop = ctx.page.locator("button[aria-label=Submit]")
      await stop.click()
      await idle(ctx.page, 30_000)
      await ctx.page.waitForTimeout(2000)
      await ctx.shot("stopped")
      const partialAfterStop = await ctx.page.getByText("Let me think about this").count() > 0
      await send(ctx.page, "Never mind, what do fawns eat?")
      try {
        await see(answerTo(ctx.page, "Never mind, what do fawns eat?"), "the answer to a message sent after the stop")
      } finally {
        await ctx.shot("after-stop")
      }
      if (!partialWhileStreaming && !partialAfterStop) {
        throw new CheckFailed("the start of the answer the model streamed before the stop was never shown")
      }
    }
  },
  {
    name: "regenerate",
    description: "An answer regenerated with its Regenerate button.",
    auth: "disabled",
    expected: [
      ...CHAT_PAGE,
      ...ONE_RUN,
      { method: "POST", path: "/api/threads/{thread_id}/runs/regenerate/prepare", when: "Regenerate" },
      { method: "POST", path: "/api/threads/{thread_id}/runs/stream", when: "the run from the prepared checkpoint" }
    ],
    run: async (ctx) => {
      const question = "Name three kinds of deer"
      await newChat(ctx, question, "answered")
      await idle(ctx.page)
      const turn = turnWith(ctx.page, `Scripted answer to: ${question}`)
      await turn.first().hover()
      const button = turn.first().getByRole("button", { name: "Regenerate" })
      await see(button, "the Regenerate button of the answer", 10_000)
      await button.click()
      try {
        await see(answerTo(ctx.page, question, 2), "the regenerated answer")
      } finally {
        await ctx.shot("regenerated")
      }
      if (await answerTo(ctx.page, question, 1).count() > 0) {
        throw new CheckFailed("the replaced answer is still shown beside the regenerated one")
      }
    }
  },
  {
    name: "edit-regenerate",
    description: "The last question edited with Edit and rerun, and answered again.",
    auth: "disabled",
    expected: [
      ...CHAT_PAGE,
      ...ONE_RUN,
      { method: "POST", path: "/api/threads/{thread_id}/runs/edit-regenerate/prepare", when: "Update and rerun" },
      { method: "POST", path: "/api/threads/{thread_id}/runs/stream", when: "the run from the prepared checkpoint" }
    ],
    run: async (ctx) => {
      const question = "What colour are deer?"
      const edited = "What colour are fawns?"
      await newChat(ctx, question, "answered")
      await idle(ctx.page)
      await ctx.page.getByText(question, { exact: true }).first().hover()
      const button = ctx.page.getByRole("button", { name: "Edit and rerun" })
      await see(button, "the Edit and rerun button of the question", 10_000)
      await button.first().click()
      const editor = ctx.page.locator("textarea").first()
      await editor.fill(edited)
      await ctx.shot("editing")
      await ctx.page.getByRole("button", { name: "Update and rerun" }).click()
      try {
        await see(answerTo(ctx.page, edited), "the answer to the edited question")
      } finally {
        await ctx.shot("rerun")
      }
    }
  },
  {
    name: "branch",
    description: "A new chat branched from an answer with Branch conversation.",
    auth: "disabled",
    expected: [
      ...CHAT_PAGE,
      ...ONE_RUN,
      { method: "POST", path: "/api/threads/{thread_id}/branches", when: "Branch conversation" },
      { method: "GET", path: "/api/threads/{thread_id}", when: "the branch opens (as thread_id_2)" },
      { method: "GET", path: "/api/threads/{thread_id}/messages/page", when: "the branch's history (as thread_id_2)" }
    ],
    run: async (ctx) => {
      const question = "Where do deer live?"
      const url = await newChat(ctx, question, "answered")
      await idle(ctx.page)
      const turn = turnWith(ctx.page, `Scripted answer to: ${question}`)
      await turn.first().hover()
      const button = turn.first().getByRole("button", { name: /branch conversation/i })
      await see(button, "the Branch conversation button of the answer", 10_000)
      await button.click()
      try {
        // (the original chat's address is a chat's too: wait for another one)
        const chat = /\/workspace\/chats\/[0-9a-f-]{36}$/
        try {
          await ctx.page.waitForURL((next) => chat.test(next.pathname) && next.href !== url, { timeout: 60_000 })
        } catch {
          throw new CheckFailed("the page stayed on the original chat")
        }
        await see(answerTo(ctx.page, question), "the branched answer in the new chat")
      } finally {
        await ctx.shot("branched")
      }
    }
  },
  {
    name: "upload-artifact",
    description: "A file attached to a message; the model writes a file and presents it; the artifact opened.",
    auth: "disabled",
    expected: [
      ...CHAT_PAGE,
      { method: "POST", path: "/api/threads/{thread_id}/uploads", when: "the message is sent with a file" },
      { method: "POST", path: "/api/threads", when: "the first message of a new chat" },
      {
        method: "POST",
        path: "/api/threads/{thread_id}/runs/stream",
        when: "the message is sent",
        body: {
          assistant_id: "lead_agent",
          input: { messages: [{ type: "human", content: [{ type: "text", text: "Write my deer notes to a file" }] }] },
          context: { mode: "flash", thinking_enabled: false, thread_id: "{thread_id}" },
          stream_mode: ["messages-tuple", "values", "updates", "custom"],
          on_disconnect: "continue"
        }
      },
      ...ONE_RUN.filter((e) => e.path !== "/api/threads/{thread_id}/runs/stream"),
      { method: "GET", path: "/api/threads/{thread_id}/uploads/list", when: "the uploads panel" },
      { method: "GET", path: "/api/threads/{thread_id}/artifacts/{path*}", when: "the artifact opened (Range preview)" },
      { method: "PUT", path: "/api/threads/{thread_id}/artifacts/{path*}", when: "an output file edited in the panel" },
      { method: "DELETE", path: "/api/threads/{thread_id}/uploads/{filename}", when: "an upload removed" }
    ],
    run: async (ctx) => {
      await ctx.page.goto(`${ctx.app}/workspace/chats/new`)
      await see(composer(ctx.page), "the new chat's message box", 600_000)
      const file = Path.join(ctx.scratch, "field-notes.txt")
      Fs.writeFileSync(file, "Seen today: two does and a fawn by the river.\n")
      await ctx.page.getByLabel("Upload files").setInputFiles(file)
      await see(ctx.page.getByText("field-notes.txt"), "the attached file in the composer", 10_000)
      await ctx.shot("attached")
      await send(ctx.page, "Write my deer notes to a file")
      try {
        await see(ctx.page.getByText("The notes are in deer-notes.md."), "the answer after the file was written")
      } finally {
        await ctx.shot("answered")
      }
      // the presented file's card (the first: the run's workspace changes, listed under the answer, name it too)
      const card = ctx.page.getByText("deer-notes.md", { exact: true })
      await see(card, "the presented file deer-notes.md", 20_000)
      await card.first().click()
      const line = ARTIFACT_TEXT.split("\n")[2]!.replace(/^- /, "")
      try {
        await see(ctx.page.getByText(line), "the artifact's text in the artifact panel", 30_000)
      } finally {
        await ctx.shot("artifact")
      }
    }
  },
  {
    name: "settings-memory",
    description: "Settings: memory (the facts the memory update saved), and a fact added by hand.",
    auth: "disabled",
    expected: [
      { method: "GET", path: "/api/memory", when: "the memory page opens" },
      { method: "POST", path: "/api/memory/facts", when: "Add fact, Save fact" },
      { method: "PATCH", path: "/api/memory/facts/{fact_id}", when: "a fact edited" },
      { method: "DELETE", path: "/api/memory/facts/{fact_id}", when: "a fact deleted" },
      { method: "GET", path: "/api/memory/export", when: "Export memory" },
      { method: "POST", path: "/api/memory/import", when: "Import memory" },
      { method: "DELETE", path: "/api/memory", when: "Clear all memory" }
    ],
    run: async (ctx) => {
      await ctx.page.goto(`${ctx.app}/workspace/chats/new?settings=memory`)
      const dialog = ctx.page.getByRole("dialog", { name: "Settings" })
      await see(dialog, "the settings dialog", 600_000)
      await ctx.page.waitForTimeout(3000)
      await ctx.shot("memory")
      await see(dialog.getByText("The user is curious about deer."), "the fact the memory update saved", 20_000)
      await dialog.getByRole("button", { name: "Add fact" }).click()
      await ctx.page.getByPlaceholder("Describe the memory fact you want to save").fill("The user prefers short answers.")
      await ctx.page.getByRole("button", { name: "Save fact" }).click()
      try {
        await see(dialog.getByText("The user prefers short answers."), "the fact added by hand", 20_000)
      } finally {
        await ctx.shot("fact-added")
      }
    }
  },
  {
    name: "settings-agents",
    description: "Agents: the gallery, then a new agent named and designed in a chat, and saved.",
    auth: "disabled",
    expected: [
      { method: "GET", path: "/api/features", when: "the agents pages check agents_api.enabled" },
      { method: "GET", path: "/api/agents", when: "the gallery" },
      { method: "GET", path: "/api/agents/check", when: "the name is confirmed" },
      { method: "POST", path: "/api/threads/{thread_id}/runs/stream", when: "the bootstrap chat (context agent_name, is_bootstrap)" },
      { method: "GET", path: "/api/agents/{agent_name}", when: "after setup_agent saved it" },
      { method: "PUT", path: "/api/agents/{agent_name}", when: "the agent's settings changed" },
      {
        method: "POST",
        path: "/api/agents",
        when: "an agent created from its settings form (another one: deer-guide is the designer's)",
        body: { name: "deer-scout", description: "Finds deer tracks", soul: "# Deer scout\n" }
      },
      { method: "DELETE", path: "/api/agents/{agent_name}", when: "an agent deleted from the gallery" },
      { method: "PATCH", path: "/api/threads/{thread_id}", when: "an agent's chat is created (metadata.agent_name)" }
    ],
    run: async (ctx) => {
      await ctx.page.goto(`${ctx.app}/workspace/agents`)
      await see(ctx.page.getByRole("heading", { name: "Agents" }), "the agents gallery", 600_000)
      await ctx.page.waitForTimeout(2000)
      await ctx.shot("gallery")
      await ctx.page.goto(`${ctx.app}/workspace/agents/new`)
      const name = ctx.page.getByPlaceholder("e.g. code-reviewer")
      await see(name, "the new agent's name box", 600_000)
      await name.fill("deer-guide")
      await name.press("Enter")
      try {
        await see(ctx.page.getByText("Happy to help. What should your agent be good at?"), "the bootstrap chat's answer")
      } finally {
        await ctx.shot("named")
      }
      await send(ctx.page, "Please save this custom agent now based on everything we have discussed so far.")
      try {
        await see(ctx.page.getByText(/Agent created|Your agent is saved/), "the agent saved", 60_000)
      } finally {
        await ctx.shot("saved")
      }
      await ctx.page.goto(`${ctx.app}/workspace/agents`)
      try {
        await see(ctx.page.getByText("deer-guide"), "the new agent in the gallery", 60_000)
      } finally {
        await ctx.shot("gallery-after")
      }
    }
  },
  {
    name: "settings-skills",
    description: "Settings: skills listed, one switched off.",
    auth: "disabled",
    expected: [
      { method: "GET", path: "/api/skills", when: "the skills page opens" },
      // (`POST /api/skills/install` is the artifacts panel's, for a .skill file a run wrote: not this screen's)
      { method: "PUT", path: "/api/skills/{skill_name}", when: "a skill's switch" }
    ],
    run: async (ctx) => {
      await ctx.page.goto(`${ctx.app}/workspace/chats/new?settings=skills`)
      const dialog = ctx.page.getByRole("dialog", { name: "Settings" })
      await see(dialog, "the settings dialog", 600_000)
      await see(dialog.getByText("deep-research"), "the skill deep-research in the list", 30_000)
      await ctx.shot("skills")
      const item = dialog.locator("[data-slot=item]").filter({ hasText: "deep-research" })
      const toggle = item.getByRole("switch")
      const before = await toggle.first().getAttribute("aria-checked")
      await toggle.first().click()
      await ctx.page.waitForTimeout(3000)
      await ctx.shot("switched")
      const after = await toggle.first().getAttribute("aria-checked")
      if (after === before) throw new CheckFailed(`the skill's switch stayed ${before === "true" ? "on" : "off"}`)
    }
  },
  {
    name: "settings-mcp",
    description: "Settings: tools (the MCP servers of extensions_config.json), one switched on.",
    auth: "disabled",
    expected: [
      { method: "GET", path: "/api/mcp/config", when: "the tools page opens" },
      { method: "PATCH", path: "/api/mcp/config", when: "a server's switch" },
      {
        method: "PUT",
        path: "/api/mcp/config",
        when: "updateMCPConfig (src/core/mcp/api.ts: the whole configuration; no screen of this version calls it)",
        body: {
          mcp_servers: {
            "deer-facts": {
              enabled: false,
              type: "stdio",
              command: "npx",
              args: ["-y", "@modelcontextprotocol/server-everything"],
              description: "An MCP server the tools screen can switch on"
            }
          }
        }
      }
    ],
    run: async (ctx) => {
      await ctx.page.goto(`${ctx.app}/workspace/chats/new?settings=tools`)
      const dialog = ctx.page.getByRole("dialog", { name: "Settings" })
      await see(dialog, "the settings dialog", 600_000)
      await ctx.page.waitForTimeout(3000)
      await ctx.shot("tools")
      await see(dialog.getByText("deer-facts"), "the MCP server deer-facts of extensions_config.json", 20_000)
      await dialog.getByRole("switch").first().click()
      await ctx.page.waitForTimeout(3000)
      await ctx.shot("switched")
    }
  },
  {
    name: "scheduled-tasks",
    description: "Scheduled tasks: the list, a one-time task created, paused, resumed, triggered and deleted.",
    auth: "disabled",
    expected: [
      { method: "GET", path: "/api/scheduled-tasks", when: "the page opens" },
      { method: "POST", path: "/api/scheduled-tasks", when: "Create" },
      { method: "GET", path: "/api/scheduled-tasks/{task_id}/runs", when: "a task selected" },
      { method: "POST", path: "/api/scheduled-tasks/{task_id}/pause", when: "Pause" },
      { method: "POST", path: "/api/scheduled-tasks/{task_id}/resume", when: "Resume" },
      { method: "POST", path: "/api/scheduled-tasks/{task_id}/trigger", when: "Trigger now" },
      { method: "PATCH", path: "/api/scheduled-tasks/{task_id}", when: "Edit, Save" },
      { method: "DELETE", path: "/api/scheduled-tasks/{task_id}", when: "Delete" }
      // (`GET /api/threads/{thread_id}/scheduled-tasks` is a chat's header link: this flow opens no chat)
    ],
    run: async (ctx) => {
      await ctx.page.goto(`${ctx.app}/workspace/scheduled-tasks`)
      const form = ctx.page.getByTestId("scheduled-task-create-form")
      await see(form, "the create form", 600_000)
      await ctx.page.waitForTimeout(2000)
      await ctx.shot("list")
      await form.getByRole("button", { name: "One-time" }).click()
      const runAt = new Date(Date.now() + 24 * 3600_000)
      const local = new Date(runAt.getTime() - runAt.getTimezoneOffset() * 60_000).toISOString().slice(0, 16)
      await form.getByLabel("Run at").fill(local)
      await form.getByPlaceholder("Task title").fill("Deer census")
      await form.getByPlaceholder("Prompt").fill("Count the deer in my notes")
      await form.getByRole("button", { name: "Create" }).click()
      try {
        await see(ctx.page.getByRole("button", { name: /Deer census/ }), "the created task in the list", 30_000)
      } finally {
        await ctx.shot("created")
      }
      const detail = ctx.page.getByTestId("scheduled-task-detail")
      await detail.getByRole("button", { name: "Pause" }).click()
      await see(detail.getByRole("button", { name: "Resume" }), "the paused task's Resume button", 20_000)
      await detail.getByRole("button", { name: "Resume" }).click()
      await ctx.page.getByRole("button", { name: "Trigger now" }).click()
      try {
        await see(ctx.page.getByTestId("scheduled-task-runs").getByText(/1 run/), "the triggered run", 60_000)
      } finally {
        await ctx.shot("triggered")
      }
    }
  },
  {
    name: "login",
    description: "DeerFlow's local accounts (auth enabled): the first account set up, a second registered; each " +
      "sees only its own chats.",
    auth: "enabled",
    expected: [
      { method: "GET", path: "/api/v1/auth/setup-status", when: "a page opened without a session" },
      { method: "GET", path: "/api/v1/auth/providers", when: "the login page" },
      { method: "POST", path: "/api/v1/auth/initialize", when: "the first (admin) account on /setup" },
      { method: "POST", path: "/api/v1/auth/register", when: "another account" },
      { method: "POST", path: "/api/v1/auth/login/local", when: "Sign in" },
      { method: "GET", path: "/api/v1/auth/me", when: "every page with a session" },
      { method: "POST", path: "/api/v1/auth/change-password", when: "settings: account (no step of this flow)" },
      { method: "POST", path: "/api/v1/auth/logout", when: "Log out" },
      ...CHAT_PAGE.filter((e) => e.path !== "/api/v1/auth/me"),
      ...ONE_RUN
    ],
    run: async (ctx) => {
      const page = ctx.page
      await page.goto(`${ctx.app}/workspace`)
      await page.waitForLoadState("networkidle", { timeout: 600_000 }).catch(() => {})
      await ctx.shot("first-visit")
      const accounts = [
        { email: "ada@example.com", password: "deer-password-ada-1", question: "Ada's question about deer" },
        { email: "bob@example.com", password: "deer-password-bob-2", question: "Bob's question about deer" }
      ]
      for (const [i, account] of accounts.entries()) {
        if (i === 0 && /\/setup/.test(page.url())) {
          await page.getByLabel(/email/i).first().fill(account.email)
          const passwords = page.locator("input[type=password]")
          await passwords.nth(0).fill(account.password)
          await passwords.nth(1).fill(account.password)
          await page.getByRole("button", { name: /create|set up|continue/i }).first().click()
        } else {
          if (!/\/login/.test(page.url())) await page.goto(`${ctx.app}/login`)
          await see(page.getByText(/sign in|create account/i), "the login page", 600_000)
          const signup = page.getByRole("button", { name: /Don't have an account/i })
          await see(signup, "the link to create an account (registration open)", 20_000)
          await signup.click()
          await page.getByLabel(/email/i).first().fill(account.email)
          await page.locator("input[type=password]").first().fill(account.password)
          await ctx.shot(`register-${i + 1}`)
          await page.locator("form button[type=submit]").first().click()
        }
        await at(page, /\/workspace/, `account ${i + 1} signed in`, 60_000)
        await newChat(ctx, account.question, `account-${i + 1}-chat`)
        if (i === 1) {
          await page.goto(`${ctx.app}/workspace/chats`)
          await page.waitForTimeout(3000)
          await ctx.shot("account-2-chats")
          if (await page.getByText(accounts[0]!.question).count() > 0) {
            throw new CheckFailed("the second account sees the first account's chat")
          }
        }
        await page.context().clearCookies()
        await page.goto(`${ctx.app}/login`)
      }
      await page.getByLabel(/email/i).first().fill(accounts[0]!.email)
      await page.locator("input[type=password]").first().fill(accounts[0]!.password)
      await page.locator("form button[type=submit]").first().click()
      await at(page, /\/workspace/, "the first account signed in again", 60_000)
      await page.goto(`${ctx.app}/workspace/chats`)
      await see(page.getByText(accounts[0]!.question), "the first account's own chat after signing in again", 60_000)
      await ctx.shot("account-1-again")
    }
  }
]
