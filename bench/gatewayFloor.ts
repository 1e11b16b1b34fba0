/**
 * The floor of `npm run bench:gateway`'s G1: the least an agent server can add per token. A bare relay in one Node
 * process, no framework, no store, no checks: `POST /threads` makes an id, `POST /threads/:id/runs/stream` calls the
 * bench's model (Chat Completions, streamed, read with `fetch`), answers each tool call "ok" without running anything,
 * and writes each answer chunk at once as a LangGraph `messages` event. Whatever it adds is what the client, the
 * loopback and the model's stream cost; a gateway's added latency is measured above this.
 *
 *   node dist-bench/bench/gatewayFloor.js <model url>   # prints "listening on http://127.0.0.1:<port>"
 */
import * as Crypto from "node:crypto"
import * as Http from "node:http"

const modelUrl = process.argv[2]!

const sse = (res: Http.ServerResponse, event: string, data: unknown) =>
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)

/** One streamed model call: its answer chunks relayed as they come; its tool calls, if it made any. */
const call = async (messages: Array<Record<string, unknown>>, onText: (text: string) => void) => {
  const response = await fetch(`${modelUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "scripted", messages, stream: true })
  })
  const calls: Array<{ id: string; type: "function"; function: { name: string; arguments: string } }> = []
  const decoder = new TextDecoder()
  let buffer = ""
  for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true })
    let end: number
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const line = buffer.slice(0, end).replace(/^data: /, "")
      buffer = buffer.slice(end + 2)
      if (line === "[DONE]") continue
      const delta = JSON.parse(line).choices?.[0]?.delta
      if (typeof delta?.content === "string" && delta.content !== "") onText(delta.content)
      for (const part of delta?.tool_calls ?? []) {
        calls[part.index] ??= { id: part.id, type: "function", function: { name: "", arguments: "" } }
        calls[part.index]!.function.name += part.function?.name ?? ""
        calls[part.index]!.function.arguments += part.function?.arguments ?? ""
      }
    }
  }
  return calls
}

const server = Http.createServer((req, res) => {
  let body = ""
  req.on("data", (chunk) => (body += chunk))
  req.on("end", async () => {
    if (req.method === "POST" && req.url === "/threads") {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ thread_id: Crypto.randomUUID(), metadata: {}, status: "idle" }))
      return
    }
    if (req.method === "POST" && /^\/threads\/[^/]+\/runs\/stream$/.test(req.url ?? "")) {
      const input = JSON.parse(body).input?.messages?.[0]?.content
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
      sse(res, "metadata", { run_id: Crypto.randomUUID() })
      const messages: Array<Record<string, unknown>> = [{ role: "user", content: String(input) }]
      for (let step = 0; step < 20; step++) {
        const calls = await call(messages, (text) => sse(res, "messages", [{ type: "AIMessageChunk", content: text }, {}]))
        if (calls.length === 0) break
        messages.push({ role: "assistant", content: null, tool_calls: calls })
        for (const c of calls) messages.push({ role: "tool", tool_call_id: c.id, content: "ok" })
      }
      res.end()
      return
    }
    res.writeHead(404).end()
  })
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address() as { port: number }
  process.stdout.write(`listening on http://127.0.0.1:${address.port}\n`)
})
