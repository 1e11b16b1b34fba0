/**
 * LangGraph's `events` stream mode: LangChain's callback events in the `astream_events` v2 shape (SSE event
 * `events`, data `{event, data, name, tags, run_id, metadata, parent_ids}`), as LangGraph's JavaScript API server
 * sends them (`@langchain/langgraph-api`'s `stream.mjs`: every event of `graph.streamEvents(..., {version: "v2"})`),
 * made from a run's events. Antler's agent has no callbacks: the events are read off what the run streams.
 *
 * - the graph: `on_chain_start` / `on_chain_end` named `LangGraph` (LangGraph's root), under the run's id, its
 *   input the run's new messages, its output the thread's values; a failed or stopped run has no `on_chain_end`
 *   (LangGraph's stream stops there too).
 * - each model call: the `model` node (`on_chain_start` / `on_chain_end`, output its message), inside it
 *   `on_chat_model_start` (input: the thread's messages so far), one `on_chat_model_stream` per token delta
 *   (`data.chunk` an AIMessageChunk of the message's id, as LangGraph's serialiser writes it: `type: "ai"`), a last
 *   chunk with what the deltas did not carry (text a redactor held back, tool call chunks, usage), and
 *   `on_chat_model_end` (output: the message). An AI message written whole (a tool call without text is not
 *   streamed) is a model call of one chunk.
 * - each tool call: the `tools` node around them, `on_tool_start` (input: the call's args) when the model's message
 *   asks for it, `on_tool_end` (output: the ToolMessage) when its answer is written.
 *
 * - each custom event: `on_custom_event` named by its `type`, its data the payload the `custom` mode sends, as
 *   DeerFlow dispatches each one to the callbacks too (`emit_custom_event`); under the tool call it names
 *   (`tool_call_id`, a task's `task_id`), else the model call or tools step in progress, else the graph.
 *
 * Internal model calls (titles, summaries, memory updates) stream nothing to the run, and are left out. Pure.
 */
import type { AIMessage, Message, ToolCall, ToolMessage } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import { toolCallChunks } from "./Protocol.js"
import type { Out } from "./StreamEvent.js"
import { SplicedOut } from "./StreamEvent.js"

/** What the events of a run say of it. */
export interface Options {
  readonly runId: string
  readonly threadId: string
  readonly assistantId?: string | undefined
  readonly attempt: number
  readonly modelName?: string | undefined
  /** The graph's input: the run's new messages (an AI message among them is no model call). */
  readonly input: { readonly messages: ReadonlyArray<Message> } | null
  /** Whether text holds no secret (a part of a spliced event must not: the caller redacts only whole data). */
  readonly clean: (text: string) => boolean
  /** The thread's messages now (what a model call is given). */
  readonly messages: () => ReadonlyArray<Message>
}

/** LangGraph's name of a graph's root run. */
export const ROOT = "LangGraph"

const STREAM_HEAD = `{"event":"on_chat_model_stream","data":{"chunk":{"content":`

/** The events of one run: each method returns the events it makes, in order. */
export const make = (options: Options) => {
  const root = {
    graph_id: "lead_agent",
    ...(options.assistantId !== undefined ? { assistant_id: options.assistantId } : {}),
    run_attempt: options.attempt,
    thread_id: options.threadId,
    run_id: options.runId
  }
  let step = 0
  const nodeMeta = (node: string) => ({ ...root, langgraph_step: step, langgraph_node: node })
  const modelMeta = () => ({
    ...nodeMeta("model"),
    ...(options.modelName !== undefined ? { ls_model_name: options.modelName } : {}),
    ls_model_type: "chat"
  })
  const chatName = options.modelName ?? "chat_model"

  const event = (
    kind: string,
    name: string,
    runId: string,
    parents: ReadonlyArray<string>,
    tags: ReadonlyArray<string>,
    metadata: Record<string, unknown>,
    data: unknown
  ): Out => ({
    event: "events",
    data: { event: kind, data, name, tags, run_id: runId, metadata, parent_ids: parents }
  })

  let started = false
  // the model call in progress: its node's run, its own run, its message, and the tail its chunks share
  let model:
    | { readonly node: string; readonly call: string; readonly id: string; readonly tail: string | undefined }
    | undefined
  // the tools node in progress: its run, and its calls not answered yet (by id)
  let tools:
    | {
      readonly node: string
      readonly pending: Map<string, { readonly run: string; readonly call: ToolCall }>
      readonly answers: Array<ToolMessage>
    }
    | undefined
  // AI messages no model call of the run wrote: its input's
  const ended = new Set<string>((options.input?.messages ?? []).map((message) => message.id))

  const closeTools = (out: Array<Out>) => {
    if (tools === undefined) return
    out.push(event("on_chain_end", "tools", tools.node, [options.runId], [`graph:step:${step}`], nodeMeta("tools"), {
      output: { messages: tools.answers }
    }))
    tools = undefined
  }

  const openModel = (out: Array<Out>, id: string) => {
    closeTools(out)
    step++
    const node = M.newId()
    const call = M.newId()
    out.push(
      event("on_chain_start", "model", node, [options.runId], [`graph:step:${step}`], nodeMeta("model"), {}),
      event("on_chat_model_start", chatName, call, [options.runId, node], [], modelMeta(), {
        input: { messages: [options.messages()] }
      })
    )
    const rest = JSON.stringify({
      tool_call_chunks: [],
      additional_kwargs: {},
      id,
      response_metadata: {},
      tool_calls: [],
      invalid_tool_calls: [],
      type: "ai"
    })
    const envelope = JSON.stringify({
      name: chatName,
      tags: [],
      run_id: call,
      metadata: modelMeta(),
      parent_ids: [options.runId, node]
    })
    const tail = `,${rest.slice(1)}},${envelope.slice(1)}`
    model = { node, call, id, tail: options.clean(tail) ? tail : undefined }
  }

  const chunk = (
    out: Array<Out>,
    current: NonNullable<typeof model>,
    fields: Record<string, unknown> & { readonly content: string }
  ) => {
    const { content, ...others } = fields
    out.push(event("on_chat_model_stream", chatName, current.call, [options.runId, current.node], [], modelMeta(), {
      chunk: {
        content,
        tool_call_chunks: [],
        additional_kwargs: {},
        id: current.id,
        response_metadata: {},
        tool_calls: [],
        invalid_tool_calls: [],
        ...others,
        type: "ai"
      }
    }))
  }

  return {
    /** The graph's start. */
    start: (): Array<Out> => {
      if (started) return []
      started = true
      return [event("on_chain_start", ROOT, options.runId, [], [], root, { input: options.input })]
    },

    /** A token delta of message `id` (text and reasoning already redacted). */
    token: (id: string, text: string, reasoning: string | undefined): Array<Out> => {
      if (ended.has(id)) return []
      const out: Array<Out> = []
      if (model?.id !== id) openModel(out, id)
      const current = model!
      if (reasoning !== undefined && reasoning !== "") {
        chunk(out, current, { content: text, additional_kwargs: { reasoning_content: reasoning } })
      } else if (text !== "") {
        const body = JSON.stringify(text)
        if (current.tail !== undefined && options.clean(body)) {
          out.push(new SplicedOut("events", { head: STREAM_HEAD, body, tail: current.tail }))
        } else chunk(out, current, { content: text })
      }
      return out
    },

    /**
     * A message written: an AI message ends its model call (`rest`: its text the deltas did not carry, `thought`
     * its reasoning held back) and starts its tool calls; a tool message ends its call.
     */
    message: (message: Message, rest: string, thought: string): Array<Out> => {
      const out: Array<Out> = []
      if (message.type === "ai") {
        if (ended.has(message.id)) return out
        const streamed = model?.id === message.id
        if (!streamed) openModel(out, message.id)
        const current = model!
        ended.add(message.id)
        const ai: AIMessage = message
        chunk(out, current, {
          content: streamed ? rest : M.text(ai),
          ...(thought !== "" ? { additional_kwargs: { reasoning_content: thought } } : {}),
          tool_call_chunks: toolCallChunks(ai.tool_calls ?? []),
          response_metadata: ai.response_metadata ?? {},
          ...(ai.usage_metadata !== undefined ? { usage_metadata: ai.usage_metadata } : {})
        })
        out.push(
          event("on_chat_model_end", chatName, current.call, [options.runId, current.node], [], modelMeta(), {
            output: message
          }),
          event("on_chain_end", "model", current.node, [options.runId], [`graph:step:${step}`], nodeMeta("model"), {
            output: { messages: [message] }
          })
        )
        model = undefined
        const calls = ai.tool_calls ?? []
        if (calls.length > 0) {
          step++
          const node = M.newId()
          tools = { node, pending: new Map(), answers: [] }
          out.push(event("on_chain_start", "tools", node, [options.runId], [`graph:step:${step}`], nodeMeta("tools"), {
            input: { messages: [message] }
          }))
          for (const call of calls) {
            const run = M.newId()
            tools.pending.set(call.id, { run, call })
            out.push(event("on_tool_start", call.name, run, [options.runId, node], [], nodeMeta("tools"), {
              input: call.args
            }))
          }
        }
      } else if (message.type === "tool" && tools !== undefined) {
        const pending = tools.pending.get(message.tool_call_id)
        if (pending === undefined) return out
        tools.pending.delete(message.tool_call_id)
        tools.answers.push(message)
        out.push(
          event("on_tool_end", pending.call.name, pending.run, [options.runId, tools.node], [], nodeMeta("tools"), {
            output: message,
            input: pending.call.args
          })
        )
        if (tools.pending.size === 0) closeTools(out)
      }
      return out
    },

    /**
     * A custom event, `payload` as the `custom` mode sends it (`{type, ...}`): one without a `type` is not
     * dispatched (DeerFlow's writer-only payloads).
     */
    custom: (payload: Readonly<Record<string, unknown>>): Array<Out> => {
      const name = payload.type
      if (!started || typeof name !== "string" || name === "") return []
      const named = [payload.tool_call_id, payload.task_id].filter((id): id is string => typeof id === "string")
      const call = named.map((id) => tools?.pending.get(id)).find((pending) => pending !== undefined)
      const custom = (run: string, parents: ReadonlyArray<string>, tags: ReadonlyArray<string>, meta: object) =>
        [event("on_custom_event", name, run, parents, tags, { ...meta }, payload)]
      const tags = [`graph:step:${step}`]
      if (call !== undefined && tools !== undefined) {
        return custom(call.run, [options.runId, tools.node], [], nodeMeta("tools"))
      }
      if (model !== undefined) return custom(model.node, [options.runId], tags, nodeMeta("model"))
      if (tools !== undefined) return custom(tools.node, [options.runId], tags, nodeMeta("tools"))
      return custom(options.runId, [], [], root)
    },

    /** The run's end: what is open closes; the graph ends with the thread's values when the run succeeded. */
    end: (succeeded: boolean, values: () => unknown): Array<Out> => {
      const out: Array<Out> = []
      if (!succeeded) return out
      closeTools(out)
      if (model !== undefined) {
        const tags = [`graph:step:${step}`]
        out.push(event("on_chain_end", "model", model.node, [options.runId], tags, nodeMeta("model"), { output: {} }))
        model = undefined
      }
      out.push(event("on_chain_end", ROOT, options.runId, [], [], root, { output: values() }))
      return out
    }
  }
}
