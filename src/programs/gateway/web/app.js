// Antler's web page: a small chat over the gateway's own API (the LangGraph-compatible routes and DeerFlow's
// uploads and artifacts). Plain JavaScript, no build step. Everything the model or the server sends is shown
// as text (textContent), never as HTML.
"use strict"

const TOKEN_KEY = "antler.token"
const $ = (id) => document.getElementById(id)

const state = {
  threadId: null,
  messages: [],
  // text streamed for messages that are not in `messages` yet, by id
  streaming: new Map(),
  artifacts: [],
  runId: null,
  controller: null,
  files: [],
  // blob URLs of the artifact shown, revoked when it is closed
  viewerUrls: []
}

// ---------------------------------------------------------------------------------------------------------
// HTTP

class HttpError extends Error {
  constructor(status, detail) {
    super(detail)
    this.status = status
  }
}

const headers = (extra = {}) => {
  const token = localStorage.getItem(TOKEN_KEY)
  return token ? { ...extra, authorization: `Bearer ${token}` } : extra
}

async function api(path, options = {}) {
  const init = { ...options, headers: headers(options.headers) }
  if (options.json !== undefined) {
    init.body = JSON.stringify(options.json)
    init.headers["content-type"] = "application/json"
    init.method = init.method ?? "POST"
  }
  const response = await fetch(path, init)
  if (response.status === 401) {
    $("auth").hidden = false
    throw new HttpError(401, "This gateway needs an API token.")
  }
  if (!response.ok) {
    let detail = `${response.status} ${response.statusText}`
    try {
      detail = (await response.json()).detail ?? detail
    } catch {}
    throw new HttpError(response.status, detail)
  }
  if (response.status === 202 || response.status === 204) return undefined
  const type = response.headers.get("content-type") ?? ""
  return type.includes("json") ? response.json() : response
}

/** Reads server-sent events from a response, calling `onEvent(event, data, id)` for each. */
async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return
    buffer += value
    let end
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      if (block.startsWith(":")) continue
      let event = "message"
      let id
      const data = []
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7)
        else if (line.startsWith("data: ")) data.push(line.slice(6))
        else if (line.startsWith("id: ")) id = line.slice(4)
      }
      onEvent(event, data.length ? JSON.parse(data.join("\n")) : null, id)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Rendering

const el = (tag, className, text) => {
  const node = document.createElement(tag)
  if (className) node.className = className
  if (text !== undefined) node.textContent = text
  return node
}

const textOf = (content) =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.filter((b) => b && b.type === "text").map((b) => b.text).join("\n")
    : ""

const clip = (text, max) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

function setStatus(text, error = false) {
  $("status").textContent = text
  $("status").classList.toggle("error", error)
}

function renderClarification(message, container) {
  const request = message.artifact && message.artifact.human_input
  const box = el("div", "clarification")
  box.dataset.testid = "clarification"
  box.append(el("p", "", request && request.question ? request.question : textOf(message.content)))
  const options = (request && request.options) || []
  const pending = state.messages[state.messages.length - 1] === message
  for (const option of options) {
    const button = el("button", "", option.label)
    button.type = "button"
    button.disabled = !pending || state.controller !== null
    button.addEventListener("click", () => send(option.label))
    box.append(button)
  }
  container.append(box)
}

function render() {
  const container = $("messages")
  container.replaceChildren()
  const shown = new Set()
  for (const message of state.messages) {
    shown.add(message.id)
    const kwargs = message.additional_kwargs || {}
    if (message.type === "human") {
      if (kwargs.hide_from_ui && !kwargs.human_input_response) continue
      const text = kwargs.original_user_content ?? textOf(message.content)
      const node = el("div", `msg human${kwargs.human_input_response ? " answer" : ""}`, text)
      container.append(node)
      if (Array.isArray(kwargs.files) && kwargs.files.length) {
        container.append(el("div", "msg human answer", `Attached: ${kwargs.files.map((f) => f.filename).join(", ")}`))
      }
    } else if (message.type === "ai") {
      const text = textOf(message.content)
      if (text.trim() !== "") container.append(el("div", "msg ai", text))
      for (const call of message.tool_calls || []) {
        const details = el("details", "tool-call")
        details.dataset.testid = "tool-call"
        const args = JSON.stringify(call.args)
        details.append(el("summary", "", `Tool call: ${call.name}(${clip(args, 80)})`))
        details.append(el("pre", "", JSON.stringify(call.args, null, 2)))
        container.append(details)
      }
    } else if (message.type === "tool") {
      if (message.name === "ask_clarification") {
        renderClarification(message, container)
        continue
      }
      const details = el("details", "tool-result")
      details.dataset.testid = "tool-result"
      const text = textOf(message.content)
      details.append(el("summary", "", `↳ ${message.name || "tool"} result: ${clip(text.split("\n")[0] || "", 80)}`))
      details.append(el("pre", "", text))
      container.append(details)
    }
  }
  for (const [id, text] of state.streaming) {
    if (shown.has(id) || text === "") continue
    container.append(el("div", "msg ai streaming", text))
  }
  container.scrollTop = container.scrollHeight

  const list = $("artifact-list")
  list.replaceChildren()
  $("artifacts").hidden = state.artifacts.length === 0
  for (const path of state.artifacts) {
    const item = el("li")
    const link = el("a", "", path.split("/").pop())
    link.href = "#"
    link.title = path
    link.addEventListener("click", (event) => {
      event.preventDefault()
      openArtifact(path)
    })
    item.append(link)
    list.append(item)
  }
}

// each segment encoded once (a name may hold `%`, `#` or `?`); the gateway decodes it once
const encodePath = (path) => path.split("/").map(encodeURIComponent).join("/")

// What the viewer previews: pages and images as they are, other text as plain text; anything else (a PDF, an
// archive) is only offered for download.
const PREVIEWED = new Set(["text/html", "image/svg+xml", "image/png", "image/jpeg", "image/gif", "image/webp"])
const AS_TEXT = new Set(["application/json"])

// The artifact is fetched with the page's credentials, then shown in the sandboxed frame (`sandbox=""`: an
// opaque origin of its own, no script, no form, no window) from a blob URL. Never opened as a blob URL or a
// page of its own: those are in this page's origin, where a script the model wrote could call the API.
async function openArtifact(path) {
  try {
    const response = await api(`/api/threads/${state.threadId}/artifacts${encodePath(path)}`)
    const blob = await response.blob()
    showArtifact(path.split("/").pop(), blob)
  } catch (error) {
    setStatus(error.message, true)
  }
}

function showArtifact(name, blob) {
  closeArtifact()
  const type = (blob.type || "").split(";")[0].trim().toLowerCase()
  const preview = PREVIEWED.has(type)
    ? blob
    : type.startsWith("text/") || AS_TEXT.has(type)
    ? new Blob([blob], { type: "text/plain;charset=utf-8" })
    : null
  // the download is typed as bytes, so that even opened in a tab of its own it is not rendered
  const download = URL.createObjectURL(new Blob([blob], { type: "application/octet-stream" }))
  state.viewerUrls.push(download)
  $("viewer-name").textContent = name
  $("viewer-download").href = download
  $("viewer-download").download = name
  $("viewer-note").hidden = preview !== null
  $("viewer-frame").hidden = preview === null
  if (preview !== null) {
    const url = URL.createObjectURL(preview)
    state.viewerUrls.push(url)
    $("viewer-frame").src = url
  }
  $("viewer").hidden = false
}

function closeArtifact() {
  $("viewer").hidden = true
  $("viewer-frame").removeAttribute("src")
  for (const url of state.viewerUrls) URL.revokeObjectURL(url)
  state.viewerUrls = []
}

function applyValues(values) {
  state.messages = values.messages || []
  state.artifacts = values.artifacts || []
  if (values.title) $("thread-title").textContent = values.title
  for (const message of state.messages) state.streaming.delete(message.id)
}

// ---------------------------------------------------------------------------------------------------------
// Threads

async function loadThreads() {
  const threads = await api("/threads/search", { json: { limit: 100, sort_by: "updated_at", sort_order: "desc" } })
  const list = $("threads")
  list.replaceChildren()
  for (const thread of threads) {
    const current = thread.thread_id === state.threadId ? "current" : ""
    const item = el("li", current, thread.values?.title || thread.thread_id)
    item.dataset.threadId = thread.thread_id
    item.addEventListener("click", () => openThread(thread.thread_id))
    list.append(item)
  }
}

async function openThread(threadId) {
  if (state.controller) return
  state.threadId = threadId
  state.streaming.clear()
  closeArtifact()
  const current = await api(`/threads/${threadId}/state`)
  $("thread-title").textContent = current.values.title || "Untitled thread"
  applyValues(current.values)
  render()
  setStatus("")
  await loadThreads()
}

function newThread() {
  if (state.controller) return
  state.threadId = null
  state.messages = []
  state.artifacts = []
  state.streaming.clear()
  closeArtifact()
  $("thread-title").textContent = "New thread"
  setStatus("")
  render()
  loadThreads().catch(() => {})
}

// ---------------------------------------------------------------------------------------------------------
// Sending

async function uploadFiles(threadId) {
  if (state.files.length === 0) return []
  const form = new FormData()
  for (const file of state.files) form.append("files", file, file.name)
  const result = await api(`/api/threads/${threadId}/uploads`, { method: "POST", body: form })
  state.files = []
  $("files").value = ""
  $("attached").textContent = ""
  return result.files.map((f) => ({ filename: f.filename, size: f.size, path: f.path, status: "uploaded" }))
}

async function send(text) {
  if (state.controller || text.trim() === "") return
  const controller = new AbortController()
  state.controller = controller
  $("send").disabled = true
  $("stop").hidden = false
  setStatus("Running…")
  try {
    if (state.threadId === null) {
      const thread = await api("/threads", { json: { metadata: { source: "web" } } })
      state.threadId = thread.thread_id
    }
    const files = await uploadFiles(state.threadId)
    const message = { type: "human", content: text, ...(files.length ? { additional_kwargs: { files } } : {}) }
    state.messages = [...state.messages, { ...message, id: `pending-${Date.now()}` }]
    render()
    const response = await api(`/threads/${state.threadId}/runs/stream`, {
      json: {
        assistant_id: "lead_agent",
        input: { messages: [message] },
        stream_mode: ["values", "messages-tuple", "custom"],
        on_disconnect: "cancel"
      },
      signal: controller.signal
    })
    let failed = null
    await readEvents(response, (event, data) => {
      if (event === "metadata") state.runId = data.run_id
      else if (event === "values") applyValues(data)
      else if (event === "messages") {
        const [chunk] = data
        if (chunk.type === "AIMessageChunk" && typeof chunk.content === "string") {
          state.streaming.set(chunk.id, (state.streaming.get(chunk.id) || "") + chunk.content)
        }
      } else if (event === "custom" && data.type === "llm_retry") setStatus(data.message || "Retrying the model…")
      else if (event === "error") failed = data.message || "The run failed"
      else if (event === "gap") failed = "Lost track of the run; reloading."
      render()
    })
    if (failed) setStatus(failed, true)
    else setStatus("Done")
    if (failed !== null) await openThread(state.threadId)
  } catch (error) {
    if (error.name === "AbortError") setStatus("Stopped")
    else setStatus(error.message, true)
  } finally {
    state.controller = null
    state.runId = null
    $("send").disabled = false
    $("stop").hidden = true
    render()
    loadThreads().catch(() => {})
  }
}

async function stop() {
  if (!state.controller || !state.runId) return
  try {
    await api(`/threads/${state.threadId}/runs/${state.runId}/cancel?action=interrupt`, { method: "POST" })
  } catch (error) {
    setStatus(error.message, true)
  }
}

// ---------------------------------------------------------------------------------------------------------
// Wiring

$("composer").addEventListener("submit", (event) => {
  event.preventDefault()
  const text = $("input").value
  $("input").value = ""
  send(text)
})
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault()
    $("composer").requestSubmit()
  }
})
$("files").addEventListener("change", () => {
  state.files = [...$("files").files]
  $("attached").textContent = state.files.length ? `To upload: ${state.files.map((f) => f.name).join(", ")}` : ""
})
$("new-thread").addEventListener("click", newThread)
$("viewer-close").addEventListener("click", closeArtifact)
$("stop").addEventListener("click", stop)
$("auth-form").addEventListener("submit", (event) => {
  event.preventDefault()
  localStorage.setItem(TOKEN_KEY, $("token").value.trim())
  $("token").value = ""
  $("auth").hidden = true
  loadThreads().catch((error) => setStatus(error.message, true))
})

loadThreads().catch((error) => setStatus(error.message, true))
render()
