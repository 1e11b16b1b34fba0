/**
 * Deferred tools (SPEC §5.24, §5.25, §7.14) without a server: `tool_search`'s query forms and ranking, the
 * catalog hash, promotions that count only for their catalog, the filter hiding unpromoted tools from a request
 * and refusing calls to them, MCP routing promoting what the user's words ask for, and both entries at their
 * slots of the lead chain (routing before the filter, the filter inside ToolErrorHandling).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Chain from "../../src/middleware/Chain.js"
import * as DeferredToolFilter from "../../src/middleware/DeferredToolFilter.js"
import * as McpRouting from "../../src/middleware/McpRouting.js"
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import * as SystemPrompt from "../../src/programs/SystemPrompt.js"
import { defaults } from "../../src/services/AppConfig.js"
import type { ToolDefinition } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const def = (name: string, description: string): ToolDefinition => ({
  name,
  description,
  parameters: { type: "object", properties: { q: { type: "string" } } }
})

const catalog = [
  def("github_create_issue", "Create an issue in a GitHub repository"),
  def("github_search_code", "Search code across repositories"),
  def("postgres_query", "Run a read-only SQL query against the orders database"),
  def("slack_post", "Post a message to a Slack channel about an issue")
]

describe("tool_search queries", () => {
  it("select: takes exact names; +term requires it in the name; a regex ranks name hits first", () => {
    const names = (query: string) => DeferredToolFilter.search(catalog, query).map((t) => t.name)
    assert.deepStrictEqual(names("select:postgres_query, slack_post,nope"), ["postgres_query", "slack_post"])
    assert.deepStrictEqual(names("+github code"), ["github_search_code", "github_create_issue"])
    assert.deepStrictEqual(names("issue"), ["github_create_issue", "slack_post"])
    assert.deepStrictEqual(names("SQL|orders"), ["postgres_query"])
    assert.deepStrictEqual(names("query("), [], "an invalid regex is taken literally")
    assert.deepStrictEqual(names("   "), [])
    // A pattern that backtracks exponentially in a backtracking engine is linear here.
    assert.deepStrictEqual(names("^(a+)+$"), [])
  })

  // DeerFlow test_deferred_catalog.py::test_search_select_not_capped_at_max_results,
  // test_search_select_returns_all_requested and test_search_ranked_modes_stay_capped: select: names its tools, so
  // it returns every one of them (in catalog order); only the ranked forms stop at MAX_RESULTS
  it("select: returns every named tool, past the cap the ranked forms keep", () => {
    const wide = Array.from({ length: 8 }, (_, i) => def(`tool_0${i}`, `Tool ${i}, searchable`))
    const names = (query: string) => DeferredToolFilter.search(wide, query).map((t) => t.name)
    assert.deepStrictEqual(names(`select:${wide.map((t) => t.name).join(",")}`), wide.map((t) => t.name))
    assert.lengthOf(names("+tool_"), DeferredToolFilter.MAX_RESULTS)
    assert.lengthOf(names("searchable"), DeferredToolFilter.MAX_RESULTS)
  })

  it("the catalog hash depends on names and schemas, not on order", () => {
    const hash = DeferredToolFilter.catalogHash(catalog)
    assert.match(hash, /^[0-9a-f]{16}$/)
    assert.strictEqual(DeferredToolFilter.catalogHash([...catalog].reverse()), hash)
    assert.notStrictEqual(DeferredToolFilter.catalogHash(catalog.slice(1)), hash)
  })

  it("promotions count only for their catalog", () => {
    const names = new Set(catalog.map((t) => t.name))
    const hash = DeferredToolFilter.catalogHash(catalog)
    assert.strictEqual(DeferredToolFilter.hidden(names, { catalog_hash: hash, names: ["postgres_query"] }, hash).size, 3)
    assert.strictEqual(DeferredToolFilter.hidden(names, { catalog_hash: "other", names: ["postgres_query"] }, hash).size, 4)
  })
})

const mcpTool = (definition: ToolDefinition) =>
  ({
    name: definition.name,
    description: definition.description,
    parameters: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    definition,
    handler: () => Effect.succeed(`${definition.name} ran`)
  }) satisfies Tool.Tool

describe("the filter and the routing in a run", () => {
  it.effect("hidden until found: the second request carries the promoted tool, which then runs", () =>
    Effect.gen(function*() {
      const outcome = yield* H.run({
        tools: catalog.map(mcpTool),
        middlewares: () => [DeferredToolFilter.layer({ deferred: catalog })],
        script: [
          { toolCalls: [{ name: "postgres_query", args: { q: "x" } }] },
          { toolCalls: [{ name: "tool_search", args: { query: "orders database" } }] },
          { toolCalls: [{ name: "postgres_query", args: { q: "select 1" } }] },
          "done"
        ]
      })
      const visible = outcome.requests.map((r) => r.tools.map((t) => t.name))
      assert.deepStrictEqual(visible[0], ["tool_search"])
      assert.deepStrictEqual(visible[2], ["postgres_query", "tool_search"])
      const results = outcome.state.messages.filter((m) => m.type === "tool").map((m) => M.contentText(m.content))
      assert.strictEqual(results[0], DeferredToolFilter.refusal("postgres_query"))
      assert.deepStrictEqual(JSON.parse(results[1]!).map((f: any) => f.name), ["postgres_query"])
      assert.strictEqual(results[2], "postgres_query ran")
      assert.deepStrictEqual(outcome.state.promoted, {
        catalog_hash: DeferredToolFilter.catalogHash(catalog),
        names: ["postgres_query"]
      })
    }).pipe(H.withStore))

  // DeerFlow test_mcp_routing_auto_promote.py::test_structured_original_user_text_is_used and
  // test_matching_uses_latest_real_human_message_only: routing reads what the user typed (original_user_content
  // when a middleware framed the message, e.g. with a <current_uploads> block naming the files), of the latest
  // real user message only
  it("routing reads the user's own words of the latest real user message", () => {
    const uploads = "<current_uploads>\n- /mnt/user-data/uploads/orders.csv\n</current_uploads>\n"
    const framed = M.human(`${uploads}summarise it`, { additional_kwargs: { original_user_content: "summarise it" } })
    assert.strictEqual(McpRouting.latestUserText([framed]), "summarise it")
    const sanitized = M.human([{ type: "text", text: "sanitized replacement" }], {
      additional_kwargs: { original_user_content: "show orders" }
    })
    assert.strictEqual(McpRouting.latestUserText([sanitized]), "show orders")
    assert.strictEqual(McpRouting.latestUserText([M.human("orders"), M.human("no match now")]), "no match now")
    assert.isUndefined(McpRouting.latestUserText([
      M.human("metrics", { name: "summary" }),
      M.human("orders", { additional_kwargs: { hide_from_ui: true } })
    ]))
    // a hidden answer to a clarification question is no real user message either (DeerFlow's is_real_user_message
    // has no exception for it): routing keeps to the request the user typed
    const answer = M.human("orders", {
      additional_kwargs: {
        hide_from_ui: true,
        human_input_response: {
          version: 1,
          kind: "human_input_response",
          source: "ask_clarification",
          request_id: "clarification:c1",
          response_kind: "text",
          value: "orders"
        }
      }
    })
    assert.strictEqual(McpRouting.latestUserText([M.human("check the metrics"), M.ai("Which table?"), answer]), "check the metrics")
    assert.isUndefined(McpRouting.latestUserText([answer]))
  })

  it.effect("routing keywords in the user's message promote their tools before the call", () =>
    Effect.gen(function*() {
      const hash = DeferredToolFilter.catalogHash(catalog)
      const routes = [
        { name: "postgres_query", priority: 50, keywords: ["订单", "SQL"] },
        { name: "github_search_code", priority: 10, keywords: ["code"] },
        { name: "slack_post", priority: 90, keywords: ["slack"] }
      ]
      assert.deepStrictEqual(McpRouting.matches(routes, "Check the 订单 table and the code", 3), ["postgres_query", "github_search_code"])
      assert.deepStrictEqual(McpRouting.matches(routes, "sql, slack and CODE", 2), ["slack_post", "postgres_query"])
      const outcome = yield* H.run({
        tools: catalog.map(mcpTool),
        input: "How many 订单 came in today?",
        middlewares: () => [
          McpRouting.layer({ routes, catalogHash: hash, topK: 3 }),
          DeferredToolFilter.layer({ deferred: catalog })
        ],
        script: ["Let me look."]
      })
      assert.deepStrictEqual(outcome.requests[0]!.tools.map((t) => t.name), ["postgres_query", "tool_search"])
      assert.deepStrictEqual(outcome.state.promoted?.names, ["postgres_query"])
    }).pipe(H.withStore))
})

describe("deferred tools in the chain and the prompt", () => {
  it("McpRouting (25) and DeferredToolFilter (26) stand before SystemMessageCoalescing, and the facts hold", () => {
    const options = { config: defaults(), deferred: { tools: catalog, routes: [{ name: "postgres_query", priority: 0, keywords: ["sql"] }] } }
    const order = LeadAgent.order(options)
    const at = (name: string) => order.indexOf(name)
    assert.isTrue(at("Title") < at("McpRouting"))
    assert.strictEqual(at("McpRouting") + 1, at("DeferredToolFilter"))
    assert.strictEqual(at("DeferredToolFilter") + 1, at("SystemMessageCoalescing"))
    const chain = LeadAgent.chain(options)
    const routing = chain.find((e) => e.name === "McpRouting")!
    const moved = Chain.insert(Chain.drop(chain, "McpRouting").pipe((e) => (e._tag === "Right" ? e.right : [])), { after: "DeferredToolFilter" }, routing)
    const error = moved._tag === "Right" ? Chain.validate(moved.right) : moved
    assert.strictEqual(error._tag, "Left")
    assert.notInclude(LeadAgent.order({ config: defaults() }), "DeferredToolFilter", "no deferred tools, no filter")
  })

  it("the prompt lists deferred tools (sorted, escaped) and routing hints only with tool_search", () => {
    const base = { clarification: true, skills: [], skillsContainer: "/mnt/skills" }
    const prompt = SystemPrompt.make({
      ...base,
      deferredTools: ["slack_post", "a<b"],
      mcpRoutingHints: [
        { tool: "postgres_query", keywords: ["SQL", "orders"], priority: 10, deferred: true },
        { tool: "slack_post", keywords: ["slack"], priority: 50, deferred: true }
      ],
      tools: ["web_search", "read_file", "tool_search"]
    })
    assert.include(prompt, "<available-deferred-tools>\na&lt;b\nslack_post\n</available-deferred-tools>")
    assert.include(
      prompt,
      "<mcp_routing_hints>\nWhen the user's request involves slack:\n  use `tool_search` to fetch `slack_post`, then " +
        "prefer that MCP tool.\nWhen the user's request involves SQL, or orders:\n"
    )
    const plain = SystemPrompt.make({ ...base, tools: ["read_file"] })
    assert.notInclude(plain, "available-deferred-tools")
    assert.notInclude(plain, "<mcp_routing_hints>")
  })
})
