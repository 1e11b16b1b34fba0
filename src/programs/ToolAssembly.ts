/**
 * The lead agent's tools, from their three sources (SPEC §3.5, §7.1), in DeerFlow's order, first name wins:
 *
 * 1. Configured tools (`tools:` in `config.yaml`), in file order, filtered by tool groups. Each DeerFlow `use:`
 *    maps to an Antler tool: the sandbox's file and bash tools, `web_fetch` (read through DeerFlow's fetch provider,
 *    `layers/web/ProviderFetch`; `antler:web_fetch` and a provider without its key: Antler's own fetcher),
 *    `web_search` and `image_search` (over the providers of `layers/web/Providers`). A
 *    `use:` Antler has no tool for is left out with a warning naming the tool. Without a `tools:` section the
 *    sandbox tools are all there (groups `file:read`, `file:write`, `bash`) and there are no web tools. `bash`
 *    (under any name) is left out where commands cannot run: no bubblewrap and no `sandbox.allow_host_bash`.
 * 2. Built-ins: `present_files`, `review_skill_package`, `list_uploaded_files` (not for subagents),
 *    `list_background_tasks` and `cancel_background_task` when there is an MCP task runtime, and `view_image` for
 *    vision models.
 * 3. MCP tools of the enabled servers in `extensions_config.json` (not filtered by groups). With
 *    `tool_search.enabled` they are deferred: hidden behind `tool_search` until promoted. A server's
 *    `task_toolsets` run in the background (`McpTaskTools`): their submit tools answer with a task id, their status
 *    and cancel tools are hidden.
 * 4. `invoke_acp_agent`, when `acp_agents` are configured (not filtered by groups, as in DeerFlow).
 *
 * Middlewares add their own tools later (`ask_clarification`, `tool_search`). `assemble` is the function a
 * custom agent's `tool_groups` go through; `check` reports configured tools that cannot work as
 * configuration issues (a CLI exits 2 on them before anything runs).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { schemaIssues } from "../layers/ConfigFile.js"
import * as AcpTool from "../layers/AcpTool.js"
import * as LocalSandbox from "../layers/LocalSandbox.js"
import * as McpTools from "../layers/McpTools.js"
import * as SafeHttp from "../layers/SafeHttp.js"
import * as ToolContext from "../layers/sandbox/tools/ToolContext.js"
import * as SandboxTools from "../layers/SandboxTools.js"
import * as DnsResolver from "../layers/web/DnsResolver.js"
import * as ProviderFetch from "../layers/web/ProviderFetch.js"
import * as Providers from "../layers/web/Providers.js"
import * as WebTexts from "../layers/web/Texts.js"
import * as WebTools from "../layers/WebTools.js"
import type { AppConfig, ToolConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import { HostResolver } from "../services/HostResolver.js"
import { Mcp, type McpCatalog } from "../services/Mcp.js"
import { McpTasks } from "../services/McpTasks.js"
import type * as SkillSecrets from "../services/SkillSecrets.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import * as Tool from "../services/Tool.js"
import type * as LeadAgent from "./LeadAgent.js"
import type * as SystemPrompt from "./SystemPrompt.js"
import * as McpTaskTools from "./McpTaskTools.js"
import * as ReviewSkillPackageTool from "./ReviewSkillPackageTool.js"
import * as UploadedFilesTool from "./UploadedFilesTool.js"

// ---------------------------------------------------------------------------------------------------------
// What a `use:` maps to

/** Search providers Antler has. */
export type Provider = Providers.Provider

/** What a configured tool's `use:` is to Antler. */
export type Mapping =
  | { readonly kind: "sandbox"; readonly tool: string }
  | {
    readonly kind: "web_fetch"
    readonly note?: string | undefined
    /** The provider that reads pages (Exa, Firecrawl...), when it has a key; else Antler's own fetcher. */
    readonly reader?: Providers.ReaderProvider | undefined
  }
  | { readonly kind: "web_search"; readonly provider: Provider | undefined }
  | { readonly kind: "image_search"; readonly provider: Provider | undefined }
  | { readonly kind: "unsupported"; readonly why: string }
  | { readonly kind: "unknown" }

const SANDBOX_TOOLS = ["ls", "read_file", "glob", "grep", "write_file", "str_replace", "bash"]

/** The group a sandbox tool has when `config.yaml` has no `tools:` section (DeerFlow's example groups). */
export const DEFAULT_GROUPS: Readonly<Record<string, string>> = {
  ls: "file:read",
  read_file: "file:read",
  glob: "file:read",
  grep: "file:read",
  write_file: "file:write",
  str_replace: "file:write",
  bash: "bash"
}

const PROVIDERS: ReadonlyArray<Provider> = Providers.PROVIDERS

/** What a `use:` value maps to. */
export const mapping = (use: string): Mapping => {
  const sandbox = /^deerflow\.sandbox\.tools:([a-z_]+)_tool$/.exec(use)
  if (sandbox !== null && SANDBOX_TOOLS.includes(sandbox[1]!)) return { kind: "sandbox", tool: sandbox[1]! }
  if (use === "antler:web_fetch") return { kind: "web_fetch" }
  if (use === "antler:web_search") return { kind: "web_search", provider: undefined }
  if (use === "antler:image_search") return { kind: "image_search", provider: undefined }
  const community = /^deerflow\.community\.([a-z0-9_]+)\.tools:([a-z_]+)$/.exec(use)
  if (community === null) return { kind: "unknown" }
  const [, module, name] = community as unknown as [string, string, string]
  if (name === "web_fetch_tool") {
    const reader = (Providers.READERS as Readonly<Record<string, Providers.ReaderProvider>>)[module]
    return reader === undefined ? { kind: "unknown" } : { kind: "web_fetch", reader }
  }
  if (name === "web_search_tool") {
    const provider = Providers.SEARCH_MODULES[module]
    return provider !== undefined
      ? { kind: "web_search", provider }
      : {
        kind: "unsupported",
        why: `Antler has no ${module} search provider; use one of ` +
          Object.keys(Providers.SEARCH_MODULES).map((m) => `deerflow.community.${m}.tools:web_search_tool`).join(", ")
      }
  }
  if (name === "image_search_tool") {
    const provider = Providers.IMAGE_MODULES[module]
    return provider !== undefined
      ? { kind: "image_search", provider }
      : {
        kind: "unsupported",
        why: `Antler has no ${module} image search; use one of ` +
          Object.keys(Providers.IMAGE_MODULES).map((m) => `deerflow.community.${m}.tools:image_search_tool`).join(", ")
      }
  }
  if (module === "browser_automation" || name === "web_capture_tool") {
    return { kind: "unsupported", why: "Antler has no browser tools" }
  }
  return { kind: "unknown" }
}

// ---------------------------------------------------------------------------------------------------------
// Options of configured tools (decoded, with readable issues)

const Seconds = Schema.Number.pipe(Schema.positive())
/** Keys a configured `web_fetch` reads. */
export const FetchSettings = Schema.Struct({
  timeout: Schema.optional(Seconds),
  timeout_s: Schema.optional(Seconds),
  max_redirects: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(0, 20))),
  max_bytes: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  max_chars: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  allow_private_addresses: Schema.optional(Schema.Union(
    Schema.Boolean,
    Schema.Array(Schema.String.pipe(
      Schema.filter((r) => SafeHttp.isRange(r) || "expected an address or CIDR range such as 10.0.0.0/8")
    ))
  ))
})

/** Keys a configured `web_search` / `image_search` reads. */
export const SearchSettings = Providers.Settings

const KNOWN_KEYS: Readonly<Record<Mapping["kind"], ReadonlyArray<string>>> = {
  sandbox: [],
  web_fetch: [...Object.keys(FetchSettings.fields), ...Object.keys(Providers.ReaderSettings.fields)],
  web_search: Object.keys(SearchSettings.fields),
  image_search: Object.keys(SearchSettings.fields),
  unsupported: [],
  unknown: []
}

/** A configured `glob` / `grep`'s cap on `max_results`: a whole number (≤0 means the default, as in DeerFlow). */
const SearchCap = Schema.Struct({
  max_results: Schema.Union(Schema.Number, Schema.NumberFromString).pipe(Schema.int())
})

const settingsOf = (entry: ToolConfig) => {
  const { name: _n, group: _g, use: _u, ...rest } = entry
  return rest
}

const issuesOf = (error: ParseResult.ParseError, at: string) =>
  schemaIssues(error).map((issue) => ({ path: issue.path === "" ? at : `${at}.${issue.path}`, message: issue.message }))

/**
 * The secrets of configured tools (their `api_key`s, the keys search providers read from the environment, the ACP
 * agents' `env`), which nothing may print or store.
 */
export const secrets = (
  config: AppConfig,
  env: Readonly<Record<string, string | undefined>> = process.env
): ReadonlyArray<string> => [
  ...(config.tools ?? []).flatMap((entry) => {
    return [entry.api_key, entry.token].filter((key): key is string => typeof key === "string" && key !== "")
  }),
  // (a provider's key taken from the environment, as DeerFlow reads them, when the entry names none)
  ...Providers.KEY_ENVS.flatMap((name) => {
    const key = env[name]?.trim()
    return key === undefined || key === "" ? [] : [key]
  }),
  ...AcpTool.secrets(config.acp_agents)
]

/** A problem with a configured tool, at a key path of `config.yaml`. */
export interface Issue {
  readonly path: string
  readonly message: string
}

/** Values in configured tools that cannot work (bad types, a provider Antler does not have). */
export const check = (config: AppConfig): ReadonlyArray<Issue> => {
  const issues: Array<Issue> = []
  ;(config.tools ?? []).forEach((entry, i) => {
    const at = `tools[${i}]`
    const mapped = mapping(entry.use)
    const settings = settingsOf(entry)
    if (mapped.kind === "web_fetch") {
      const decoded = Schema.decodeUnknownEither(FetchSettings, { errors: "all" })(settings)
      if (Either.isLeft(decoded)) issues.push(...issuesOf(decoded.left, at))
      if (mapped.reader !== undefined) {
        const read = Schema.decodeUnknownEither(Providers.ReaderSettings, { errors: "all" })(settings)
        if (Either.isLeft(read)) issues.push(...issuesOf(read.left, at))
      }
    } else if (mapped.kind === "web_search" || mapped.kind === "image_search") {
      const decoded = Schema.decodeUnknownEither(SearchSettings, { errors: "all" })(settings)
      if (Either.isLeft(decoded)) issues.push(...issuesOf(decoded.left, at))
      else if (decoded.right.safesearch === "strict" && (mapped.provider ?? settings.provider) === "duckduckgo") {
        issues.push({
          path: `${at}.safesearch`,
          message: "DuckDuckGo's safe search is on, moderate or off (strict is Brave's)"
        })
      }
      if (mapped.provider === undefined && settings.provider === undefined) {
        issues.push({ path: `${at}.provider`, message: `${entry.use} needs a provider: ${PROVIDERS.join(", ")}` })
      }
    }
  })
  return issues
}

// ---------------------------------------------------------------------------------------------------------
// Assembly

/** Where a tool comes from. */
export type Source = "config" | "sandbox" | "builtin" | "mcp" | "acp"

/** One tool of the report: present, deferred, or missing and why. */
export interface Entry {
  readonly name: string
  readonly source: Source
  readonly state: "available" | "deferred" | "missing"
  readonly group?: string | undefined
  readonly use?: string | undefined
  readonly server?: string | undefined
  /** Why it is missing, or a note on how it works. */
  readonly note?: string | undefined
}

/** The tools of an agent, and the report on them. */
export interface Assembly {
  /** The tools, in order (deferred ones included: the filter hides them). */
  readonly tools: ReadonlyArray<Tool.Tool>
  readonly deferred: LeadAgent.Deferred | undefined
  /** The prompt's hints for the MCP tools with routing (`mode: prefer`), deferred or not (SPEC §6 item 11). */
  readonly routingHints: ReadonlyArray<SystemPrompt.RoutingHint>
  readonly entries: ReadonlyArray<Entry>
  /** One line per configured tool left out and per MCP server that failed. */
  readonly warnings: ReadonlyArray<string>
  /** The warnings that are an MCP server's problems, with that server (told only to roles that may use it). */
  readonly mcpWarnings?: ReadonlyMap<string, string> | undefined
  /** Whether an MCP server failed (an agent built from this should be built again later). */
  readonly incomplete: boolean
}

/** Options of `assemble`. */
export interface Options {
  readonly vision: boolean
  /** Tool groups to keep (a custom agent's `tool_groups`): undefined or null = all; `[]` = no configured tools. */
  readonly groups?: ReadonlyArray<string> | null | undefined
  /** Whether `list_uploaded_files` is there (default: yes; a subagent's state has no `uploaded_files` for it). */
  readonly uploads?: boolean | undefined
  /** Whether bash can run (default: the sandbox's bash mode is not "disabled"); without, `bash` is left out. */
  readonly bash?: boolean | undefined
  /**
   * Whose run the tools are for, when it may be given request secrets: the MCP servers that list their tools only
   * with them are listed with these (`Mcp.Service.catalogWith`), the assembly then that run's alone (`incomplete`).
   */
  readonly run?: {
    readonly secrets: SkillSecrets.RequestSecrets | undefined
    /** The run's listing, made already (`catalogWith` of these secrets, by a caller that made it unlocked). */
    readonly catalog?: McpCatalog | undefined
  } | undefined
}

/** Why `bash` is not among an agent's tools when commands cannot run. */
export const BASH_UNAVAILABLE = "bash is unavailable (bubblewrap is not available here and " +
  "sandbox.allow_host_bash is false); install bubblewrap, or set sandbox.allow_host_bash: true to run commands " +
  "on the host without isolation"

/** The tools of an agent (see the module header). MCP tools come from the app's `Mcp` service when there is one. */
export const assemble = (
  options: Options
): Effect.Effect<Assembly, never, SandboxProvider | AppConfigService> =>
  Effect.gen(function*() {
    const app = yield* AppConfigService
    const config = app.config
    const sandbox = new Map((yield* SandboxTools.tools({ vision: options.vision })).map((t) => [t.name, t]))
    const bash = options.bash ?? (yield* LocalSandbox.bashMode(app)).mode !== "disabled"
    const groups = options.groups ?? undefined
    const inGroups = (group: string | undefined) =>
      groups === undefined || (group !== undefined && groups.includes(group))
    const declared = new Set(config.tool_groups.map((g) => g.name))
    // the app's resolver for the URLs of self-hosted readers, else the system's (asked only when one is configured)
    const resolver = Effect.map(Effect.serviceOption(HostResolver), Option.getOrElse(() => DnsResolver.make()))
    const tools: Array<Tool.Tool> = []
    const entries: Array<Entry> = []
    const warnings: Array<string> = []
    const taken = new Map<string, string>()
    const add = (tool: Tool.Tool, entry: Entry, where: string) => {
      const holder = taken.get(tool.name)
      if (holder !== undefined) {
        const note = `a second ${tool.name}: ${holder} comes first`
        entries.push({ ...entry, name: tool.name, state: "missing", note })
        warnings.push(`${where}: a second tool named ${tool.name} is left out (${holder} comes first)`)
        return
      }
      taken.set(tool.name, where)
      tools.push(tool)
      entries.push({ ...entry, name: tool.name })
    }
    // a sandbox tool; bash only where commands can run (DeerFlow hides bash when host bash is not allowed)
    const addSandbox = (tool: Tool.Tool, entry: Entry, where: string) => {
      if (tool.name !== "bash" || bash) return add(tool, entry, where)
      entries.push({ ...entry, name: tool.name, state: "missing", note: BASH_UNAVAILABLE })
      if (!warnings.some((w) => w.endsWith(BASH_UNAVAILABLE))) warnings.push(`${where}: left out: ${BASH_UNAVAILABLE}`)
    }

    if (config.tools == null) {
      for (const name of SANDBOX_TOOLS) {
        const tool = sandbox.get(name)
        if (tool === undefined) continue
        const group = DEFAULT_GROUPS[name]
        if (!inGroups(group)) {
          const note = `its group ${group} is not among the agent's tool groups`
          entries.push({ name, source: "sandbox", group, state: "missing", note })
          continue
        }
        addSandbox(tool, { name, source: "sandbox", group, state: "available" }, `the sandbox's ${name}`)
      }
    } else {
      for (const [i, entry] of config.tools.entries()) {
        const where = `tools[${i}] (${entry.name})`
        const base = { name: entry.name, source: "config" as const, group: entry.group, use: entry.use }
        // keys a known tool has that its provider does not read
        const notRead: Array<string> = []
        const missing = (note: string, warn = true) => {
          entries.push({ ...base, state: "missing", note })
          if (warn) warnings.push(`${where}: left out: ${note}`)
        }
        if (entry.group !== undefined && declared.size > 0 && !declared.has(entry.group)) {
          warnings.push(`${where}: its group ${entry.group} is not declared in tool_groups`)
        }
        if (!inGroups(entry.group)) {
          missing(`its group ${entry.group ?? "(none)"} is not among the agent's tool groups`, false)
          continue
        }
        const mapped = mapping(entry.use)
        const settings = settingsOf(entry)
        switch (mapped.kind) {
          case "sandbox": {
            // glob's and grep's `max_results` caps what a call may ask for (DeerFlow's `_resolve_max_results`)
            const search = mapped.tool === "glob" || mapped.tool === "grep" ? mapped.tool : undefined
            if (search !== undefined && settings.max_results !== undefined) {
              const cap = Schema.decodeUnknownEither(SearchCap)(settings)
              if (Either.isLeft(cap)) {
                missing(`its settings are invalid (${ParseResult.TreeFormatter.formatErrorSync(cap.left)})`)
                break
              }
              const tool = yield* SandboxTools.search(search, cap.right.max_results)
              addSandbox(tool, { ...base, state: "available" }, where)
              break
            }
            const tool = sandbox.get(mapped.tool)
            if (tool !== undefined) addSandbox(tool, { ...base, state: "available" }, where)
            break
          }
          case "web_fetch": {
            const decoded = Schema.decodeUnknownEither(FetchSettings)(settings)
            if (Either.isLeft(decoded)) {
              missing(`its settings are invalid (${ParseResult.TreeFormatter.formatErrorSync(decoded.left)})`)
              break
            }
            const s = decoded.right
            const timeout = s.timeout ?? s.timeout_s
            const readerKeys = Object.keys(Providers.ReaderSettings.fields)
            if (mapped.reader !== undefined) {
              const read = Schema.decodeUnknownEither(Providers.ReaderSettings)(settings)
              if (Either.isLeft(read)) {
                missing(`its settings are invalid (${ParseResult.TreeFormatter.formatErrorSync(read.left)})`)
                break
              }
              const built = yield* Providers.buildReader(mapped.reader, { ...read.right, timeout })
              if (Either.isRight(built)) {
                notRead.push(...Providers.unreadBy(mapped.reader), "max_redirects", "max_bytes")
                const tool = ProviderFetch.webFetch(built.right, {
                  description: WebTexts.FETCH[mapped.reader],
                  maxChars: s.max_chars,
                  allowPrivateAddresses: s.allow_private_addresses,
                  resolver: yield* resolver
                })
                add(tool, { ...base, state: "available", note: `read through ${built.right.name}` }, where)
                break
              }
              // without its key, Antler's own fetcher reads the page (as before readers existed)
              warnings.push(`${where}: ${built.left}; Antler's own fetcher reads pages instead`)
              notRead.push(...readerKeys)
            } else {
              notRead.push(...readerKeys)
            }
            add(WebTools.webFetch({
              timeoutMs: timeout === undefined ? undefined : timeout * 1000,
              maxRedirects: s.max_redirects,
              maxBytes: s.max_bytes,
              maxChars: s.max_chars,
              allowPrivateAddresses: s.allow_private_addresses
            }), { ...base, state: "available", note: mapped.note ?? "Antler's own fetcher" }, where)
            break
          }
          case "web_search":
          case "image_search": {
            const decoded = Schema.decodeUnknownEither(SearchSettings)(settings)
            if (Either.isLeft(decoded)) {
              missing(`its settings are invalid (${ParseResult.TreeFormatter.formatErrorSync(decoded.left)})`)
              break
            }
            const provider = mapped.provider ?? decoded.right.provider
            if (provider === undefined) {
              missing(`it needs a provider (${PROVIDERS.join(", ")})`)
              break
            }
            for (const [key, readers] of Object.entries(Providers.ONLY)) {
              if (key in settings && !readers.includes(provider)) notRead.push(key)
            }
            const built = yield* Providers.build(provider, decoded.right)
            if (Either.isLeft(built)) {
              missing(built.left)
              break
            }
            const service = built.right
            const max = decoded.right.max_results
            const rules = mapped.kind === "web_search" ? WebTools.SEARCH_RESULTS : WebTools.IMAGE_RESULTS
            const count = WebTools.resultCount(rules[provider], max, null)
            const note = `${Providers.LABEL[provider]}, up to ${count} results`
            if (mapped.kind === "web_search") {
              const rule = WebTools.SEARCH_RESULTS[provider]
              const tool = WebTools.webSearch(service, max, WebTexts.SEARCH[provider], rule)
              add(tool, { ...base, state: "available", note }, where)
            } else if (service.images === undefined) {
              missing(`${service.name} has no image search`)
            } else {
              const images = { ...service, images: service.images }
              const tool = WebTools.imageSearch(images, max, WebTexts.IMAGE[provider], WebTools.IMAGE_RESULTS[provider])
              add(tool, { ...base, state: "available", note }, where)
            }
            break
          }
          case "unsupported":
            missing(mapped.why)
            break
          case "unknown":
            missing(`Antler has no tool for use: ${entry.use}`)
            break
        }
        const unread = mapped.kind === "sandbox" || mapped.kind === "unknown" || mapped.kind === "unsupported"
          ? []
          : Object.keys(settings).filter((key) => !KNOWN_KEYS[mapped.kind].includes(key) || notRead.includes(key))
        if (unread.length > 0) warnings.push(`${where}: keys not used by Antler (ignored): ${unread.join(", ")}`)
      }
    }

    const tasks = yield* Effect.serviceOption(McpTasks)
    const builtins = [
      sandbox.get("present_files"),
      ReviewSkillPackageTool.tool(yield* ToolContext.make),
      options.uploads === false ? undefined : UploadedFilesTool.tool(app.home),
      ...(Option.isSome(tasks) ? [McpTaskTools.listTool(tasks.value), McpTaskTools.cancelTool(tasks.value)] : []),
      sandbox.get("view_image")
    ]
    for (const tool of builtins) {
      if (tool !== undefined) {
        add(tool, { name: tool.name, source: "builtin", state: "available" }, `the built-in ${tool.name}`)
      }
    }

    // MCP tools: not filtered by groups (DeerFlow filters configured tools only).
    const mcp = yield* Effect.serviceOption(Mcp)
    let incomplete = false
    const mcpWarnings = new Map<string, string>()
    const deferredDefs: Array<Tool.Tool> = []
    const routes: Array<{ name: string; priority: number; keywords: ReadonlyArray<string> }> = []
    const routingHints: Array<SystemPrompt.RoutingHint> = []
    if (Option.isSome(mcp)) {
      const catalog = options.run?.catalog ?? (yield* (options.run !== undefined && mcp.value.catalogWith !== undefined
        ? mcp.value.catalogWith(options.run.secrets)
        : mcp.value.catalog))
      for (const problem of catalog.problems) {
        warnings.push(problem.message)
        mcpWarnings.set(problem.message, problem.server)
        incomplete = true
      }
      // (tools listed with a run's secrets are that run's: its agent is not kept for another)
      if (catalog.perRun === true) incomplete = true
      const defer = config.tool_search.enabled
      const roles = McpTaskTools.rolesOf(mcp.value.servers === undefined ? {} : yield* mcp.value.servers, catalog.tools)
      warnings.push(...roles.problems)
      for (const spec of catalog.tools) {
        const role = roles.of(spec)
        if (role === "hidden") continue
        const tool = role === undefined ? McpTools.tool(mcp.value, spec) : McpTaskTools.submitTool(tasks, spec, role)
        const before = tools.length
        add(tool, {
          name: spec.name,
          source: "mcp",
          server: spec.server,
          state: defer ? "deferred" : "available",
          note: defer ? "found with tool_search" : undefined
        }, `MCP server '${spec.server}'`)
        const routed = tools.length > before && spec.routing.mode === "prefer" && spec.routing.keywords.length > 0
        if (routed) {
          routingHints.push({
            tool: spec.name,
            keywords: spec.routing.keywords,
            priority: spec.routing.priority,
            deferred: defer
          })
        }
        if (defer && tools.length > before) {
          deferredDefs.push(tool)
          if (routed) routes.push({ name: spec.name, priority: spec.routing.priority, keywords: spec.routing.keywords })
        }
      }
    }
    // ACP agents: one tool for all of them, after the MCP tools (DeerFlow's order).
    const acpAgents = Object.keys(config.acp_agents)
    if (acpAgents.length > 0) {
      const tool = yield* AcpTool.make({ agents: config.acp_agents, home: app.home })
      const note = `agents: ${acpAgents.join(", ")}`
      add(tool, { name: tool.name, source: "acp", state: "available", note }, "acp_agents")
    }

    const deferred: LeadAgent.Deferred | undefined = deferredDefs.length === 0
      ? undefined
      : { tools: deferredDefs.map(Tool.definition), routes, topK: config.tool_search.auto_promote_top_k }
    return { tools, deferred, routingHints, entries, warnings, mcpWarnings, incomplete }
  })
