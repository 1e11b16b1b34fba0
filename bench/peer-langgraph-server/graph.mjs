// The peer of `npm run bench:gateway`: a LangChain `createAgent` graph served by LangGraph's JavaScript API
// server (`langgraphjs dev`, in memory). The same tools as Antler's bench run (write_file, read_file, on a
// per-thread folder), its summarisation middleware (a trigger the bench never reaches, as Antler's) and its
// tool-call limit, and a ChatOpenAI model on the bench's loopback Chat Completions server (MODEL_BASE_URL).
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { ChatOpenAI } from "@langchain/openai"
import { createAgent, summarizationMiddleware, tool, toolCallLimitMiddleware } from "langchain"
import { z } from "zod"

const baseURL = process.env.MODEL_BASE_URL
if (!baseURL) throw new Error("MODEL_BASE_URL is not set")
const root = process.env.PEER_WORKDIR ?? path.join(os.tmpdir(), "peer-langgraph-server")

const model = new ChatOpenAI({
  model: "scripted",
  apiKey: "sk-bench-scripted-000000",
  configuration: { baseURL },
  streaming: true,
  maxRetries: 0
})

const within = (config, file) => {
  const thread = String(config?.configurable?.thread_id ?? "none").replace(/[^A-Za-z0-9-]/g, "_")
  return path.join(root, thread, path.basename(file))
}

const writeFile = tool(async ({ path: file, content }, config) => {
  const where = within(config, file)
  await fs.mkdir(path.dirname(where), { recursive: true })
  await fs.writeFile(where, content)
  return "OK"
}, {
  name: "write_file",
  description: "Write a text file",
  schema: z.object({ description: z.string(), path: z.string(), content: z.string() })
})

const readFile = tool(async ({ path: file }, config) => {
  try {
    return await fs.readFile(within(config, file), "utf8")
  } catch (error) {
    return `Error: ${error.message}`
  }
}, {
  name: "read_file",
  description: "Read a text file",
  schema: z.object({ description: z.string(), path: z.string() })
})

export const graph = createAgent({
  model,
  tools: [writeFile, readFile],
  systemPrompt: "You are a helpful assistant.",
  middleware: [
    summarizationMiddleware({ model, trigger: { tokens: 100000 }, keep: { messages: 20 } }),
    toolCallLimitMiddleware({ runLimit: 50 })
  ]
})
