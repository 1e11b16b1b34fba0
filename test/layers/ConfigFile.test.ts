import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import { baseUrlProblem, defaults } from "../../src/services/AppConfig.js"
import { captureLogs } from "../support/logs.js"

const FIXTURE = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/deerflow/config.example.yaml")

const tempFile = (text: string, name = "config.yaml") => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-config-"))
  const file = Path.join(dir, name)
  Fs.writeFileSync(file, text)
  return file
}

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const loadError = (path: string, env: Record<string, string> = {}) =>
  ConfigFile.load(path).pipe(Effect.flip, withEnv(env))

describe("ConfigFile", () => {
  it.effect("a bad key is reported with the file, the dotted path and what was expected", () =>
    Effect.gen(function*() {
      const file = tempFile([
        "models:",
        "  - name: gpt",
        "    model: gpt-4o",
        "    supports_vision: maybe",
        "  - model: second",
        "recursion_limit: -3",
        "loop_detection:",
        "  warn_threshold: 9",
        "  hard_limit: 2",
        ""
      ].join("\n"))
      const error = yield* loadError(file)
      assert.strictEqual(error._tag, "ConfigError")
      assert.strictEqual(error.reason, "schema")
      const lines = error.message.split("\n")
      assert.include(lines, `${file}: models[0].supports_vision: expected true or false, got "maybe" (model "gpt")`)
      assert.include(lines, `${file}: models[1].name: required key is missing`)
      assert.include(lines, `${file}: recursion_limit: expected a positive number, got -3`)
      assert.include(lines, `${file}: loop_detection: hard_limit must be >= warn_threshold`)
      assert.strictEqual(lines.length, 4, error.message)
    }))

  // DeerFlow's ModelConfig takes any extra key (model_config extra="allow") and its client sends it as it is;
  // Antler types the request fields it sends (test_model_factory's stream_usage among them)
  it.effect("a model's request field of the wrong type or out of range is an error naming the model and key", () =>
    Effect.gen(function*() {
      const file = tempFile(
        "models:\n  - name: tuned\n    model: m\n    top_p: 2\n    seed: 1.5\n    stream_usage: \"no\"\n" +
          "    stop: [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q]\n    n: 3\n"
      )
      const error = yield* loadError(file)
      const lines = error.message.split("\n")
      assert.include(lines, `${file}: models[0].top_p: expected a number between 0 and 1, got 2 (model "tuned")`)
      assert.include(lines, `${file}: models[0].seed: expected an integer, got 1.5 (model "tuned")`)
      assert.include(lines, `${file}: models[0].stream_usage: expected true or false, got "no" (model "tuned")`)
      assert.isTrue(lines.some((line) => line.startsWith(`${file}: models[0].stop: `)), error.message)
      assert.strictEqual(lines.length, 4, error.message)
      // n is not read (one answer of a stream is read): it stays among the ignored keys, the others are read
      Fs.writeFileSync(file, "models:\n  - name: t\n    model: m\n    top_p: 0.5\n    n: 3\n    stream_usage: false\n")
      const loaded = yield* ConfigFile.load(file).pipe(withEnv({}))
      assert.deepStrictEqual(loaded.ignored, ["models[].n"])
      assert.strictEqual(loaded.config.models[0]!.top_p, 0.5)
      assert.isFalse(loaded.config.models[0]!.stream_usage)
    }))

  it.effect("a list where a mapping belongs, and one of several literals, read plainly", () =>
    Effect.gen(function*() {
      const file = tempFile("sandbox: [1]\nsummarization:\n  trigger: {type: tokenz, value: 3}\n")
      const error = yield* loadError(file)
      assert.deepStrictEqual(error.message.split("\n").sort(), [
        `${file}: sandbox: expected a mapping (key: value), got a list`,
        `${file}: summarization.trigger.type: expected "tokens", "messages" or "fraction", got "tokenz"`
      ])
    }))

  it.effect("an API key of the wrong type is not echoed back", () =>
    Effect.gen(function*() {
      const file = tempFile("models:\n  - name: a\n    model: b\n    api_key: 123456789\n")
      const error = yield* loadError(file)
      assert.include(error.message, "models[0].api_key: expected a string")
      assert.notInclude(error.message, "123456789")
    }))

  it.effect("a mapping, list or text where a section belongs is named, not echoed (a secret may be inside)", () =>
    Effect.gen(function*() {
      // (an indentation slip: the model's mapping where the list belongs, the tokens' list where auth's mapping
      // does, one token written as the auth section itself)
      const secret = "sk-live-0123456789"
      for (const [text, line] of [
        [`models:\n  api_key: ${secret}\n  name: a\n`, "models: expected a list, got a mapping"],
        [`gateway:\n  auth: [{token: ${secret}}]\n`, "gateway.auth: expected a mapping (key: value), got a list"],
        [`gateway:\n  auth: ${secret}\n`, "gateway.auth: expected a mapping (key: value), got a string"]
      ]) {
        const file = tempFile(text)
        const error = yield* loadError(file)
        assert.include(error.message.split("\n"), `${file}: ${line}`)
        assert.notInclude(error.message, secret)
      }
    }))

  it.effect("gateway tokens, tracing headers or a model's headers written as plain text are not echoed back", () =>
    Effect.gen(function*() {
      // (tokens written as a list of strings, or one string, and headers as OTEL_EXPORTER_OTLP_HEADERS' text: slips
      // whose error would otherwise print the secret to the terminal and to any log of it)
      const secret = "sk-plain-token-0123456789"
      for (const [text, path] of [
        [`gateway:\n  auth:\n    tokens:\n      - ${secret}\n`, "gateway.auth.tokens[0]"],
        [`gateway:\n  auth:\n    tokens: ${secret}\n`, "gateway.auth.tokens"],
        [`tracing:\n  enabled: true\n  headers: authorization=Bearer ${secret}\n`, "tracing.headers"],
        [`models:\n  - name: a\n    model: b\n    default_headers: ${secret}\n`, "models[0].default_headers"]
      ]) {
        const error = yield* loadError(tempFile(text))
        assert.include(error.message, `${path}: expected`)
        assert.notInclude(error.message, secret)
      }
    }))

  it.effect("a YAML syntax error names the file, line and column", () =>
    Effect.gen(function*() {
      const file = tempFile("title:\n  enabled: true\nmodels: [a, b\nsandbox: {}\n")
      const error = yield* loadError(file)
      assert.strictEqual(error.reason, "syntax")
      assert.isTrue(error.message.startsWith(`${file}:4:1: YAML syntax error: `), error.message)
    }))

  it.effect("$VAR and ${VAR} are read from the environment; $$ is a literal dollar", () =>
    Effect.gen(function*() {
      const file = tempFile([
        "models:",
        "  - name: main",
        "    model: $MODEL_ID",
        "    base_url: https://${API_HOST}/v1",
        "    api_key: $OPENAI_API_KEY",
        "summarization:",
        "  summary_prompt: costs $$5 for ${MODEL_ID}",
        ""
      ].join("\n"))
      const loaded = yield* ConfigFile.load(file).pipe(
        withEnv({ MODEL_ID: "gpt-4o-mini", API_HOST: "llm.example.com", OPENAI_API_KEY: "sk-test-1" })
      )
      const model = loaded.config.models[0]!
      assert.strictEqual(model.model, "gpt-4o-mini")
      assert.strictEqual(model.base_url, "https://llm.example.com/v1")
      assert.strictEqual(Redacted.value(model.api_key!), "sk-test-1")
      assert.strictEqual(loaded.config.summarization.summary_prompt, "costs $5 for gpt-4o-mini")
      assert.strictEqual(loaded.source, file)
    }))

  it.effect("an unset variable is an error naming the key path and the variable", () =>
    Effect.gen(function*() {
      const file = tempFile("models:\n  - name: a\n    model: b\n    api_key: ${MISSING_KEY_FOR_TEST}\n")
      const error = yield* loadError(file)
      assert.strictEqual(error.reason, "env")
      assert.strictEqual(
        error.message,
        `${file}: models[0].api_key: environment variable MISSING_KEY_FOR_TEST is not set`
      )
    }))

  it.prop(
    "interpolation leaves text without variables unchanged and substitutes any value",
    [FastCheck.string().filter((s) => !s.includes("$")), FastCheck.string()],
    ([plain, value]) => {
      const lookup = (name: string) => (name === "V" ? value : undefined)
      const unchanged = { a: [plain], b: plain }
      assert.deepStrictEqual(ConfigFile.interpolate(unchanged, lookup), Either.right(unchanged))
      const both = ConfigFile.interpolate({ a: `${plain}\${V}$V` }, lookup)
      assert.deepStrictEqual(both, Either.right({ a: `${plain}${value}${value}` }))
    }
  )

  it.effect("DeerFlow's example config loads, with its values for the shared keys", () =>
    Effect.gen(function*() {
      const loaded = yield* ConfigFile.load(FIXTURE).pipe(withEnv({}))
      const config = loaded.config
      assert.isTrue(config.summarization.enabled)
      assert.deepStrictEqual(config.summarization.keep, { type: "messages", value: 10 })
      assert.deepStrictEqual(config.summarization.trigger, [{ type: "tokens", value: 32000 }])
      assert.strictEqual(config.summarization.trim_tokens_to_summarize, 15564)
      assert.isFalse(config.uploads.auto_convert_documents)
      assert.strictEqual(config.sandbox.bash_command_timeout, 600)
      assert.strictEqual(config.max_recursion_limit, 1000)
      assert.deepStrictEqual(config.models, [])
      // of its `scheduler`, the least delay of a once task is read; its poller's keys are Antler's gateway's
      assert.strictEqual(config.scheduler.min_once_delay_seconds, 60)
      // (and its switch: off there, so no task ticks on its schedule, as DeerFlow's poller is not started)
      assert.isFalse(config.scheduler.enabled)
      assert.notInclude(loaded.ignored, "scheduler.enabled")
      assert.include(loaded.ignored, "scheduler.poll_interval_seconds")
      assert.notInclude(loaded.ignored, "scheduler.min_once_delay_seconds")
    }))

  it.effect("the keys of DeerFlow's example that Antler does not read are named, and only those", () =>
    Effect.gen(function*() {
      const loaded = yield* ConfigFile.load(FIXTURE).pipe(withEnv({}))
      for (const key of ["config_version", "uploads.pdf_converter"]) {
        assert.include(loaded.ignored, key)
      }
      const read = ["log_level", "logging",
        "models", "summarization", "sandbox", "uploads", "title", "loop_detection", "token_budget", "memory", "skills",
        "tools", "tool_groups", "tool_search"]
      for (const key of read) assert.notInclude(loaded.ignored, key)
      assert.isFalse(loaded.ignored.some((key) =>
        key.startsWith("summarization.") || key.startsWith("sandbox.") || key.startsWith("skills.") ||
        key.startsWith("tools") || key.startsWith("tool_search") ||
        key.startsWith("title.")
      ))
      // memory: the keys of DeerMem's options Antler implements are read, its eviction policy (hybrid-v1),
      // consolidation and its staleness review among them; its eviction audit and shadow mode are not (and are named)
      for (const key of ["enabled", "injection_enabled", "mode", "manager_class", "shutdown_flush_timeout_seconds"]) {
        assert.notInclude(loaded.ignored, `memory.${key}`)
      }
      for (const key of ["debounce_seconds", "max_facts", "fact_confidence_threshold", "max_injection_tokens"]) {
        assert.notInclude(loaded.ignored, `memory.backend_config.${key}`)
      }
      for (const key of ["fact_eviction_policy", "eviction_confidence_weight", "eviction_correction_reserved_max"]) {
        assert.notInclude(loaded.ignored, `memory.backend_config.${key}`)
      }
      for (
        const key of [
          "consolidation_enabled",
          "consolidation_min_facts",
          "consolidation_max_groups_per_cycle",
          "consolidation_max_sources",
          "staleness_protected_categories"
        ]
      ) assert.notInclude(loaded.ignored, `memory.backend_config.${key}`)
      assert.isFalse(loaded.ignored.some((key) => key.startsWith("memory.backend_config.staleness_")))
      for (const key of ["fact_eviction_shadow_enabled", "eviction_audit_max_entries"]) {
        assert.notInclude(loaded.ignored, `memory.backend_config.${key}`)
      }
      const memory = loaded.config.memory
      assert.deepInclude(memory, { enabled: true, injection_enabled: true, mode: "middleware", manager_class: "deermem" })
      assert.deepInclude(memory.backend_config, {
        debounce_seconds: 30,
        max_facts: 100,
        fact_confidence_threshold: 0.7,
        max_injection_tokens: 2000,
        fact_eviction_policy: "confidence",
        eviction_confirmation_half_life_days: 90,
        guaranteed_categories: ["correction"],
        guaranteed_token_budget: 500,
        consolidation_enabled: false,
        consolidation_min_facts: 8,
        consolidation_max_groups_per_cycle: 3,
        consolidation_max_sources: 8,
        staleness_review_enabled: true,
        staleness_age_days: 90,
        staleness_min_candidates: 3,
        staleness_max_removals_per_cycle: 10,
        staleness_protected_categories: ["correction"],
        staleness_max_lifetime_multiplier: 20,
        staleness_max_extension_days: 3650
      })
      assert.deepStrictEqual(loaded.config.skills, { container_path: "/mnt/skills", deferred_discovery: false })
    }))

  // DeerFlow's test_authorization_runtime / test_rbac_authorization_provider: an enabled section is checked when the
  // file loads (the built-in provider only, its roles, the default role), each problem at its key; off, the section is
  // never resolved (DeerFlow's test_disabled_does_not_import_invalid_path)
  it.effect("authorization: an enabled section is checked at its keys; off, it loads whatever it names", () =>
    Effect.gen(function*() {
      const section = (enabled: boolean, use: string, roles: ReadonlyArray<string>, extra: ReadonlyArray<string> = []) =>
        ["authorization:", `    enabled: ${enabled}`, ...extra, "    provider:", `      use: ${use}`, "      config:",
          "        roles:", ...roles, ""].join("\n")
      const RBAC = "deerflow.authz.rbac:RbacAuthorizationProvider"
      const good = ["          user:", "            tools: {allow: [web_search, read_file]}"]
      const loaded = yield* ConfigFile.load(tempFile(section(true, RBAC, good))).pipe(withEnv({}))
      assert.isTrue(loaded.config.authorization.enabled)
      assert.isTrue(loaded.config.authorization.fail_closed)
      assert.strictEqual(loaded.config.authorization.default_role, "user")
      assert.deepStrictEqual(loaded.ignored, [])
      const refused = (text: string) =>
        ConfigFile.load(tempFile(text)).pipe(Effect.flip, withEnv({}), Effect.map((e) => e.message))
      assert.include(
        yield* refused(section(true, "my.module:Provider", good)),
        `authorization.provider.use: "my.module:Provider" is not a provider Antler has`
      )
      assert.include(
        yield* refused(section(true, RBAC, ["          user:", "            tool: {allow: [bash]}"])),
        "authorization.provider.config.roles.user.tool: 'tool' is a request's resource type; write 'tools'"
      )
      assert.include(
        yield* refused(section(true, RBAC, ["          user:", "            tools: {alow: [bash]}"])),
        "authorization.provider.config.roles.user.tools.alow"
      )
      assert.include(
        yield* refused(section(true, RBAC, ["          user:", "            tools: {deny: null}"])),
        "authorization.provider.config.roles.user.tools.deny"
      )
      assert.include(
        yield* refused(section(true, RBAC, good, ["    default_role: guest"])),
        `authorization.default_role: 'guest' is not defined; known roles: ["user"]`
      )
      assert.include(
        yield* refused(["authorization:", "    enabled: true", ""].join("\n")),
        "authorization.provider: authorization.enabled is true but no provider is configured"
      )
      // off, nothing is resolved: an unknown provider loads
      const off = yield* ConfigFile.load(tempFile(section(false, "my.module:Provider", good))).pipe(withEnv({}))
      assert.isFalse(off.config.authorization.enabled)
      const example = yield* ConfigFile.load(FIXTURE).pipe(withEnv({}))
      assert.isFalse(example.ignored.some((key) => key.startsWith("authorization")))
    }))

  it.effect("memory, skills and timezone values are checked, with readable errors", () =>
    Effect.gen(function*() {
      const file = tempFile([
        "memory:",
        "  mode: passive",
        "  manager_class: mem0",
        "  backend_config:",
        "    max_facts: 0",
        "    fact_confidence_threshold: 1.5",
        "    fact_eviction_policy: lru",
        "    consolidation_max_sources: 50",
        "skills:",
        "  deferred_discovery: sometimes",
        "timezone: Mars/Olympus_Mons",
        ""
      ].join("\n"))
      const error = yield* loadError(file)
      const lines = error.message.split("\n")
      assert.strictEqual(lines.length, 8, error.message)
      assert.include(
        lines,
        `${file}: memory.backend_config.fact_eviction_policy: expected "confidence" or "hybrid-v1", got "lru"`
      )
      assert.include(lines, `${file}: memory.mode: expected "middleware" or "tool", got "passive"`)
      assert.include(lines, `${file}: memory.manager_class: expected "deermem" or "noop", got "mem0"`)
      assert.include(lines, `${file}: memory.backend_config.max_facts: expected a positive number, got 0`)
      assert.include(lines, `${file}: skills.deferred_discovery: expected true or false, got "sometimes"`)
      // DeerMem's bounds of a merge (2 to 20 sources)
      assert.isTrue(lines.some((l) => l.startsWith(`${file}: memory.backend_config.consolidation_max_sources: `)))
      assert.isTrue(lines.some((l) => l.startsWith(`${file}: memory.backend_config.fact_confidence_threshold: `)), error.message)
      assert.include(error.message, `unknown time zone "Mars/Olympus_Mons"`)
      const good = tempFile("timezone: Asia/Tokyo\nmemory:\n  enabled: false\n")
      const loaded = yield* ConfigFile.load(good).pipe(withEnv({}))
      assert.strictEqual(loaded.config.timezone, "Asia/Tokyo")
      assert.isFalse(loaded.config.memory.enabled)
    }))

  // DeerMem's bounds (DeerMemConfig's ge/le): a value outside them is an error naming the key, not a silent default
  it.effect("the staleness review's options are bounded as DeerMem bounds them", () =>
    Effect.gen(function*() {
      const file = tempFile([
        "memory:",
        "  backend_config:",
        "    staleness_age_days: 10",
        "    staleness_min_candidates: 0",
        "    staleness_max_removals_per_cycle: 2.5",
        "    staleness_max_lifetime_multiplier: 0.5",
        "    staleness_max_extension_days: 100000",
        "    staleness_protected_categories: correction",
        ""
      ].join("\n"))
      const error = yield* loadError(file)
      const lines = error.message.split("\n")
      assert.strictEqual(lines.length, 6, error.message)
      for (const key of ["age_days", "min_candidates", "max_removals_per_cycle", "max_lifetime_multiplier",
        "max_extension_days", "protected_categories"]) {
        const prefix = `${file}: memory.backend_config.staleness_${key}: `
        assert.isTrue(lines.some((l) => l.startsWith(prefix)), error.message)
      }
      const ok = tempFile(
        "memory:\n  backend_config:\n    staleness_age_days: 30\n    staleness_max_extension_days: 36500\n"
      )
      const loaded = yield* ConfigFile.load(ok).pipe(withEnv({}))
      assert.deepInclude(loaded.config.memory.backend_config, {
        staleness_age_days: 30,
        staleness_max_extension_days: 36500,
        staleness_min_candidates: 3
      })
    }))

  // DeerFlow test_memory_manager_pluggable.py: DeerMem's options at the top of `memory:` (the older layout) are
  // read under backend_config, a file-like storage_path is dropped with a warning, and manager_class may be the
  // backend's class path
  it.effect("memory: the older layout's options and the backends' class paths are read as DeerFlow reads them", () =>
    Effect.gen(function*() {
      const { capture, logged: warnings } = captureLogs("Warning")
      const file = tempFile([
        "memory:",
        "  max_facts: 7",
        "  debounce_seconds: 5",
        "  storage_path: memory.json",
        "  token_counting: ''",
        "  staleness_review_enabled: false",
        "  fact_confidence_threshold: 0.2",
        "  manager_class: deerflow.agents.memory.backends.noop.noop_manager:NoopMemoryManager",
        "  backend_config:",
        "    fact_confidence_threshold: 0.9",
        ""
      ].join("\n"))
      const loaded = yield* ConfigFile.load(file).pipe(withEnv({}), Effect.provide(capture))
      const memory = loaded.config.memory
      assert.strictEqual(memory.manager_class, "noop")
      assert.deepInclude(memory.backend_config, {
        max_facts: 7,
        debounce_seconds: 5,
        storage_path: "",
        token_counting: "tiktoken",
        fact_confidence_threshold: 0.9,
        staleness_review_enabled: false
      })
      assert.deepStrictEqual(loaded.ignored, [])
      assert.isFalse(loaded.ignored.some((key) => /^memory\.(max_facts|debounce_seconds|storage_path)$/.test(key)))
      assert.strictEqual(warnings.length, 3, warnings.join("\n"))
      const moved = "max_facts, debounce_seconds, staleness_review_enabled"
      assert.isTrue(warnings.some((w) => w.includes(moved) && w.includes("backend_config")))
      assert.isTrue(warnings.some((w) => w.includes("memory.storage_path looks like a file")))
      assert.isTrue(warnings.some((w) => w.includes("fact_confidence_threshold not used")))
      for (const manager of ["deermem.deer_mem.DeerMem", "deermem.deer_mem:DeerMem"]) {
        const named = tempFile(`memory:\n  manager_class: deerflow.agents.memory.backends.${manager}\n`)
        assert.strictEqual((yield* ConfigFile.load(named).pipe(withEnv({}))).config.memory.manager_class, "deermem")
      }
      const wrong = tempFile("memory:\n  manager_class: deerflow.agents.memory.backends.mem0.mem0_manager:Mem0\n")
      assert.include((yield* loadError(wrong)).message, "memory.manager_class")
    }))

  // DeerFlow test_uploads_router.py (_get_upload_limits): the older names of two upload limits are read when the
  // newer key is not set
  it.effect("uploads: max_file_count and max_single_file_size are read as max_files and max_file_size", () =>
    Effect.gen(function*() {
      const { capture, logged: warnings } = captureLogs("Warning")
      const older = tempFile("uploads:\n  max_file_count: 3\n  max_single_file_size: 1000\n")
      const loaded = yield* ConfigFile.load(older).pipe(withEnv({}), Effect.provide(capture))
      assert.strictEqual(loaded.config.uploads.max_files, 3)
      assert.strictEqual(loaded.config.uploads.max_file_size, 1000)
      assert.deepStrictEqual(loaded.ignored, [])
      const read = "uploads.max_file_count read as uploads.max_files"
      assert.isTrue(warnings.some((w) => w.includes(read)), warnings.join())
      const both = tempFile("uploads:\n  max_files: 5\n  max_file_count: 3\n")
      const newer = yield* ConfigFile.load(both).pipe(withEnv({}), Effect.provide(capture))
      assert.strictEqual(newer.config.uploads.max_files, 5)
      assert.isTrue(warnings.some((w) => w.includes("uploads.max_file_count not used")), warnings.join())
      const fromObject = yield* ConfigFile.fromObject({ uploads: { max_file_count: 2 } }, { home: Os.tmpdir() })
      assert.strictEqual(fromObject.config.uploads.max_files, 2)
    }))

  // DeerFlow test_checkpointer.py: DeerFlow's `memory` database backend and its older `checkpointer:` section (put
  // before `database` for checkpoints) are read, where a DeerFlow configuration was refused or its database unused
  it.effect("database: backend memory starts on SQLite; a postgres checkpointer section is read as database.url", () =>
    Effect.gen(function*() {
      const { capture, logged: warnings } = captureLogs("Warning")
      const load = (text: string) => ConfigFile.load(tempFile(text)).pipe(withEnv({}), Effect.provide(capture))
      const memory = yield* load("database:\n  backend: memory\n  postgres_url: postgresql://u:p@db:5432/x\n")
      assert.isUndefined(memory.config.database.backend)
      assert.isUndefined(memory.config.database.url ?? memory.config.database.postgres_url ?? undefined)
      assert.isTrue(warnings.some((w) => w.includes("database.backend memory read as sqlite")), warnings.join())
      const dsn = "postgresql://u:p@db:5432/deerflow"
      const legacy = yield* load(`checkpointer:\n  type: postgres\n  connection_string: ${dsn}\n`)
      assert.strictEqual(Redacted.value(legacy.config.database.url!), dsn)
      assert.deepStrictEqual(legacy.ignored, [])
      assert.isTrue(warnings.some((w) => w.includes("checkpointer (DeerFlow's older section) read as database.url")))
      // first, as in DeerFlow: before a database section's own backend
      const both = yield* load(
        `checkpointer:\n  type: postgres\n  connection_string: ${dsn}\ndatabase:\n  backend: sqlite\n`
      )
      assert.strictEqual(Redacted.value(both.config.database.url!), dsn)
      assert.isUndefined(both.config.database.backend)
      // a SQLite file or memory: not used, and said so
      const sqlite = yield* load("checkpointer:\n  type: sqlite\n  connection_string: checkpoints.db\n")
      assert.isUndefined(sqlite.config.database.url ?? undefined)
      assert.deepStrictEqual(sqlite.ignored, [])
      assert.isTrue(warnings.some((w) => w.includes("checkpointer (type sqlite) not used")), warnings.join())
    }))

  // DeerFlow test_local_registration_gate.py: DeerFlow's auth.local.allow_registration: false closes registration
  it.effect("auth.local.allow_registration (DeerFlow's) is read; false in either place closes registration", () =>
    Effect.gen(function*() {
      const { capture, logged: warnings } = captureLogs("Warning")
      const load = (text: string) => ConfigFile.load(tempFile(text)).pipe(withEnv({}), Effect.provide(capture))
      const open = yield* load("gateway:\n  auth:\n    accounts: true\n")
      assert.isTrue(open.config.gateway.auth.allow_registration, "open by default, as DeerFlow's")
      const closed = yield* load(
        "auth:\n  local:\n    allow_registration: false\n  oidc:\n    enabled: false\n" +
          "gateway:\n  port: 8123\n  auth:\n    accounts: true\n"
      )
      assert.isFalse(closed.config.gateway.auth.allow_registration)
      assert.isTrue(closed.config.gateway.auth.accounts)
      assert.strictEqual(closed.config.gateway.port, 8123)
      assert.deepStrictEqual(closed.ignored, ["auth"], "its oidc is not used")
      assert.isTrue(warnings.some((w) => w.includes("auth.local.allow_registration: false (DeerFlow's) read")))
      const alone = yield* load("auth:\n  local:\n    allow_registration: false\n")
      assert.isFalse(alone.config.gateway.auth.allow_registration)
      assert.deepStrictEqual(alone.ignored, [])
      // DeerFlow's true does not open what Antler's key closed
      const both = yield* load(
        "auth:\n  local:\n    allow_registration: true\ngateway:\n  auth:\n    allow_registration: false\n"
      )
      assert.isFalse(both.config.gateway.auth.allow_registration)
      assert.deepStrictEqual(both.ignored, [])
    }))

  // DeerFlow test_memory_manager_pluggable.py: a storage_path that is an existing file is a configuration error
  it.effect("memory: a storage_path that is an existing file is refused before anything runs", () =>
    Effect.gen(function*() {
      const file = tempFile("memory:\n  backend_config:\n    storage_path: mem.json\n")
      Fs.writeFileSync(Path.join(Path.dirname(file), "mem.json"), "{}")
      const refused = yield* Effect.either(ConfigFile.load(file).pipe(withEnv({})))
      assert.isTrue(Either.isLeft(refused), "a storage_path that is a file is refused")
      if (Either.isLeft(refused)) {
        const expected = `${file}: memory.backend_config.storage_path: mem.json is an existing file`
        assert.include(refused.left.message, expected)
      }
      // a directory, or one not made yet, is where memory files go; with memory off, the key is not used
      Fs.mkdirSync(Path.join(Path.dirname(file), "memdir"))
      for (const text of [
        "memory:\n  backend_config:\n    storage_path: memdir\n",
        "memory:\n  backend_config:\n    storage_path: new-dir\n",
        "memory:\n  enabled: false\n  backend_config:\n    storage_path: mem.json\n"
      ]) {
        const other = Path.join(Path.dirname(file), "other.yaml")
        Fs.writeFileSync(other, text)
        yield* ConfigFile.load(other).pipe(withEnv({}))
      }
    }))

  // DeerFlow test_write_file_tool_size_guard.py: DEERFLOW_WRITE_FILE_MAX_BYTES sets the limit, 0 removes it, a value
  // that is not an integer leaves the default; Antler's key in the file wins over it
  it.effect("DEERFLOW_WRITE_FILE_MAX_BYTES sets sandbox.write_file_max_bytes unless config.yaml does", () =>
    Effect.gen(function*() {
      const limit = (text: string, value: string) =>
        Effect.map(
          ConfigFile.load(tempFile(text)).pipe(withEnv({ DEERFLOW_WRITE_FILE_MAX_BYTES: value })),
          (l) => l.config.sandbox.write_file_max_bytes
        )
      assert.strictEqual(yield* limit("models: []\n", String(300 * 1024)), 300 * 1024)
      assert.strictEqual(yield* limit("models: []\n", "0"), 0)
      assert.strictEqual(yield* limit("models: []\n", "-5"), 0)
      assert.strictEqual(yield* limit("models: []\n", "lots"), 80 * 1024)
      assert.strictEqual(yield* limit("sandbox:\n  write_file_max_bytes: 1000\n", "0"), 1000)
      // without a config file too
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-cwd-"))
      const cwd = process.cwd()
      process.chdir(dir)
      try {
        const loaded = yield* ConfigFile.load().pipe(withEnv({ DEERFLOW_WRITE_FILE_MAX_BYTES: "2048" }))
        assert.isUndefined(loaded.source)
        assert.strictEqual(loaded.config.sandbox.write_file_max_bytes, 2048)
      } finally {
        process.chdir(cwd)
      }
    }))

  // DeerFlow test_tool_search.py::test_auto_promote_top_k_is_clamped: a value out of 1-5 is clamped, not refused
  it.effect("tool_search.auto_promote_top_k is clamped into 1-5; the default is 3", () =>
    Effect.gen(function*() {
      const topK = (text: string) =>
        Effect.map(ConfigFile.load(tempFile(text)).pipe(withEnv({})), (l) => l.config.tool_search.auto_promote_top_k)
      assert.strictEqual(yield* topK("tool_search:\n  enabled: true\n  auto_promote_top_k: 0\n"), 1)
      assert.strictEqual(yield* topK("tool_search:\n  auto_promote_top_k: 99\n"), 5)
      assert.strictEqual(yield* topK("tool_search:\n  auto_promote_top_k: 4\n"), 4)
      assert.strictEqual(yield* topK("tool_search:\n  enabled: true\n"), 3)
      const error = yield* loadError(tempFile("tool_search:\n  auto_promote_top_k: many\n"))
      assert.include(error.message, "tool_search.auto_promote_top_k")
    }))

  // DeerFlow test_memory_storage.py::TestCreateStorage: an empty storage_class (DeerMem's default) and
  // FileMemoryStorage's class path are the file storage; a class that is not is an error, never a silent fallback
  it.effect("storage_class: empty, file or FileMemoryStorage's class path; anything else is an error", () =>
    Effect.gen(function*() {
      const storage = (value: string) =>
        tempFile(`memory:\n  backend_config:\n    storage_class: ${JSON.stringify(value)}\n`)
      for (
        const value of ["", "file", "deerflow.agents.memory.backends.deermem.deermem.core.storage.FileMemoryStorage"]
      ) {
        const loaded = yield* ConfigFile.load(storage(value)).pipe(withEnv({}))
        assert.notInclude(loaded.ignored, "memory.backend_config.storage_class")
      }
      for (const value of ["non.existent.StorageClass", "os.path.join", "builtins.dict"]) {
        const file = storage(value)
        const error = yield* loadError(file)
        assert.include(error.message, `${file}: memory.backend_config.storage_class: `, value)
      }
    }))

  it.effect("a __proto__ key in the file is dropped, not made the prototype of a record", () =>
    Effect.gen(function*() {
      const text = "tool_output:\n  tool_overrides:\n    __proto__:\n      bash: 5\n    web_fetch: 3\n"
      // parsed (for the config and for custom agents' files) without the key
      const parsed = Either.getOrThrow(ConfigFile.parseYaml(text)) as { tool_output: { tool_overrides: object } }
      assert.deepStrictEqual(Object.keys(parsed.tool_output.tool_overrides), ["web_fetch"])
      const file = tempFile(text)
      const overrides: Record<string, number> = (yield* ConfigFile.load(file).pipe(withEnv({}))).config.tool_output
        .tool_overrides
      assert.deepStrictEqual(overrides, { web_fetch: 3 })
      assert.strictEqual(Object.getPrototypeOf(overrides), Object.prototype)
      assert.isUndefined(overrides.bash)
    }))

  it("ignored keys inside lists are named once per key", () => {
    const raw = {
      models: [{ name: "a", model: "b", num_predict: 2 }, { name: "c", model: "d", num_predict: 3 }],
      extra: 1
    }
    assert.deepStrictEqual(ConfigFile.ignoredKeys(raw), ["models[].num_predict", "extra"])
  })

  // DeerFlow's test_extension_loader / test_extension_config: a `required: true` plugin that cannot be loaded
  // aborts startup, a misspelt key is refused; the Python plugins are never loaded by Antler
  it.effect("a required DeerFlow plugin, or a plugin entry with an unknown key, stops the start; others ignored", () =>
    Effect.gen(function*() {
      const file = tempFile([
        "plugins:",
        "  - use: acme_observability:install",
        "    config: { enabled: true }",
        "  - use: acme_policy:install",
        "    required: true",
        "  - use: acme_audit:install",
        "    require: true",
        "  - use: acme_off:install",
        "    required: true",
        "    enabled: false",
        ""
      ].join("\n"))
      const result = yield* ConfigFile.load(file).pipe(withEnv({}), Effect.either)
      if (Either.isRight(result)) return assert.fail("a configuration with a required plugin was accepted")
      assert.strictEqual(result.left.reason, "schema")
      const lines = result.left.message.split("\n")
      assert.strictEqual(lines.length, 2, result.left.message)
      assert.match(lines[0]!, /plugins\[1\]\.required: the plugin "acme_policy:install" is required, but Antler/)
      assert.include(lines[0]!, "extensions.middlewares")
      assert.match(lines[1]!, /plugins\[2\]: unknown key require \(a plugin entry takes enabled, name, package/)
      const fromObject = yield* ConfigFile.fromObject({ plugins: [{ use: "p:install", required: true }] }, {
        home: Path.dirname(file)
      }).pipe(Effect.either)
      if (Either.isRight(fromObject)) return assert.fail("an object with a required plugin was accepted")
      assert.include(fromObject.left.message, "plugins[0].required")
      const optional = tempFile("plugins:\n  - use: acme_observability:install\n    required: false\n")
      const loaded = yield* ConfigFile.load(optional).pipe(withEnv({}))
      assert.deepStrictEqual(loaded.ignored, ["plugins"])
    }))

  it.effect("without a file the defaults apply; the data directory is ANTLER_HOME, made absolute, else ~/.antler", () =>
    Effect.gen(function*() {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-cwd-"))
      const cwd = process.cwd()
      process.chdir(dir)
      try {
        const loaded = yield* ConfigFile.load().pipe(withEnv({ ANTLER_HOME: "data/home" }))
        assert.deepStrictEqual(loaded.config, defaults())
        assert.isUndefined(loaded.source)
        assert.strictEqual(loaded.home, Path.join(Fs.realpathSync(dir), "data/home"))
        assert.deepStrictEqual(loaded.ignored, [])
        // Without ANTLER_HOME: the user's own data directory, whatever the working directory.
        const fallback = yield* ConfigFile.load().pipe(withEnv({}))
        assert.strictEqual(fallback.home, Path.join(Os.homedir(), ".antler"))
        assert.strictEqual((yield* ConfigFile.load().pipe(withEnv({ ANTLER_HOME: "" }))).home, fallback.home)
        Fs.writeFileSync(Path.join(dir, "config.yaml"), "recursion_limit: 7\n")
        const local = yield* ConfigFile.load().pipe(withEnv({}))
        assert.strictEqual(local.config.recursion_limit, 7)
        assert.strictEqual(local.source, Path.join(Fs.realpathSync(dir), "config.yaml"))
      } finally {
        process.chdir(cwd)
      }
    }))

  it.effect("--config wins over ANTLER_CONFIG; a named file that does not exist is an error", () =>
    Effect.gen(function*() {
      const fromEnv = tempFile("recursion_limit: 11\n")
      const explicit = tempFile("recursion_limit: 22\n")
      const a = yield* ConfigFile.load().pipe(withEnv({ ANTLER_CONFIG: fromEnv }))
      assert.strictEqual(a.config.recursion_limit, 11)
      const b = yield* ConfigFile.load(explicit).pipe(withEnv({ ANTLER_CONFIG: fromEnv }))
      assert.strictEqual(b.config.recursion_limit, 22)
      const missing = Path.join(Path.dirname(explicit), "nope.yaml")
      const error = yield* loadError(missing)
      assert.strictEqual(error.reason, "not_found")
      assert.strictEqual(error.message, `${missing}: the file does not exist`)
    }))

  // DeerFlow's AppConfig.resolve_config_path (test_runtime_paths): DEER_FLOW_CONFIG_PATH names the file, and one
  // named that does not exist is an error rather than a fallback to ./config.yaml
  it.effect("DEER_FLOW_CONFIG_PATH names the config file when ANTLER_CONFIG does not", () =>
    Effect.gen(function*() {
      const deerflow = tempFile("recursion_limit: 33\n")
      const antler = tempFile("recursion_limit: 44\n")
      const a = yield* ConfigFile.load().pipe(withEnv({ DEER_FLOW_CONFIG_PATH: deerflow }))
      assert.strictEqual(a.config.recursion_limit, 33)
      assert.strictEqual(a.source, deerflow)
      const b = yield* ConfigFile.load().pipe(withEnv({ DEER_FLOW_CONFIG_PATH: deerflow, ANTLER_CONFIG: antler }))
      assert.strictEqual(b.config.recursion_limit, 44)
      const missing = Path.join(Path.dirname(deerflow), "gone.yaml")
      const error = yield* ConfigFile.load().pipe(Effect.flip, withEnv({ DEER_FLOW_CONFIG_PATH: missing }))
      assert.strictEqual(error.reason, "not_found")
    }))

  it.effect("sandbox resource limits: defaults, 0 for none, negative or fractional values refused", () =>
    Effect.gen(function*() {
      const defaulted = (yield* ConfigFile.load(tempFile("sandbox: {}\n")).pipe(withEnv({}))).config.sandbox
      assert.deepStrictEqual(
        [defaulted.max_processes, defaulted.max_memory_mb, defaulted.tmp_size_mb, defaulted.max_file_size_mb],
        [256, 4096, 256, 512]
      )
      assert.strictEqual(defaulted.disk_quota_mb, 2048)
      const off = yield* ConfigFile.load(tempFile("sandbox:\n  max_processes: 0\n  disk_quota_mb: 0\n")).pipe(
        withEnv({})
      )
      assert.deepStrictEqual([off.config.sandbox.max_processes, off.config.sandbox.disk_quota_mb], [0, 0])
      const file = tempFile("sandbox:\n  max_memory_mb: -1\n  tmp_size_mb: 1.5\n")
      const lines = (yield* loadError(file)).message.split("\n")
      assert.isTrue(lines.some((line) => line.startsWith(`${file}: sandbox.max_memory_mb: `)), lines.join("\n"))
      assert.isTrue(lines.some((line) => line.startsWith(`${file}: sandbox.tmp_size_mb: `)), lines.join("\n"))
    }))

  it.effect("subagents: DeerFlow's commented example block, uncommented, loads; bad values are named", () =>
    Effect.gen(function*() {
      // the `subagents:` block of DeerFlow's example, comment marks removed
      const example = Fs.readFileSync(FIXTURE, "utf8").split("\n")
      const start = example.findIndex((line) => line === "# subagents:")
      const block: Array<string> = []
      for (const line of example.slice(start)) {
        if (!line.startsWith("#")) break
        const text = line.replace(/^# ?/, "")
        if (text.trimStart().startsWith("#")) continue
        block.push(text)
      }
      const custom = "  custom_agents:\n    analysis:\n      description: Data analysis\n      system_prompt: You analyse.\n" +
        "      tools: [bash, read_file]\n      max_turns: 80\n      timeout_seconds: 600\n"
      const loaded = yield* ConfigFile.load(tempFile(`${block.join("\n")}\n${custom}`)).pipe(withEnv({}))
      assert.deepStrictEqual(loaded.ignored, [])
      const subagents = loaded.config.subagents
      assert.deepStrictEqual([subagents.timeout_seconds, subagents.max_total_per_run], [1800, 6])
      assert.deepStrictEqual(subagents.agents["general-purpose"], { timeout_seconds: 2700, max_turns: 250 })
      assert.deepInclude(subagents.custom_agents.analysis!, { model: "inherit", max_turns: 80, timeout_seconds: 600 })
      assert.deepStrictEqual(defaults().subagents.custom_agents, {})

      const file = tempFile("subagents:\n  max_total_per_run: 51\n  custom_agents:\n    x:\n      system_prompt: p\n")
      const lines = (yield* loadError(file)).message.split("\n")
      assert.isTrue(lines.some((line) => line.startsWith(`${file}: subagents.max_total_per_run: `)), lines.join("\n"))
      assert.isTrue(
        lines.some((line) => line.startsWith(`${file}: subagents.custom_agents.x.description: `)),
        lines.join("\n")
      )
    }))

  it.effect("an empty file means the defaults", () =>
    Effect.gen(function*() {
      const loaded = yield* ConfigFile.load(tempFile("# nothing yet\n")).pipe(withEnv({}))
      assert.deepStrictEqual(loaded.config, defaults())
    }))
})

describe("model server addresses", () => {
  it.effect("a base_url or api_base that is not an http(s) URL is a config error at its key", () =>
    Effect.gen(function*() {
      const file = tempFile([
        "models:",
        "  - name: a",
        "    model: m",
        "    base_url: notaurl",
        "  - name: b",
        "    model: m",
        "    api_base: localhost:11434/v1",
        "  - name: c",
        "    model: m",
        "    base_url: https://api.example.com/v1"
      ].join("\n"))
      const error = yield* loadError(file)
      assert.strictEqual(error.reason, "schema")
      assert.strictEqual(
        error.message,
        [
          `${file}: models[0].base_url: expected an http:// or https:// URL, such as http://localhost:11434/v1 ` +
          `(model "a")`,
          `${file}: models[1].api_base: expected an http:// or https:// URL; did you mean http://localhost:11434/v1? ` +
          `(model "b")`
        ].join("\n")
      )
    }))

  it("baseUrlProblem accepts http(s) URLs and never repeats a value that is not host-like", () => {
    assert.strictEqual(baseUrlProblem("http://localhost:11434/v1"), undefined)
    assert.strictEqual(baseUrlProblem("https://user:pw@api.example.com/v1"), undefined)
    assert.isString(baseUrlProblem("http://"))
    for (const bad of ["notaurl", "sk-proj-Abc123xyz", "ftp://files.example.com", "file:///etc/passwd"]) {
      const problem = baseUrlProblem(bad)
      assert.isString(problem, bad)
      assert.notInclude(problem!, bad)
    }
    assert.include(baseUrlProblem("api.example.com/v1")!, "did you mean http://api.example.com/v1?")
  })
})

describe("the data directory (ANTLER_HOME)", () => {
  it("is created level by level when missing, and a probe shows it can hold files", () => {
    const parent = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-home-"))
    const home = Path.join(parent, "a", "b", ".antler")
    assert.strictEqual(ConfigFile.prepareHome(home), undefined)
    assert.isTrue(Fs.statSync(home).isDirectory())
    assert.deepStrictEqual(Fs.readdirSync(home), [])
    assert.strictEqual(ConfigFile.prepareHome(home), undefined)
  })

  it("fails at once, naming the directory at fault, where directories cannot be made", () => {
    // Node's recursive mkdir never returns for this one (mkdir under /proc fails with ENOENT).
    const proc = ConfigFile.prepareHome("/proc/nope/.antler")
    assert.deepInclude(proc, { reason: "cannot_create", path: "/proc/nope" })
    assert.match(proc!.message, /^cannot create \/proc\/nope: ENOENT/)
    const probe = ConfigFile.prepareHome("/proc")
    assert.deepInclude(probe, { reason: "not_writable", path: "/proc" })
    const file = tempFile("", "not-a-dir")
    assert.deepInclude(ConfigFile.prepareHome(Path.join(file, "home")), {
      reason: "not_a_directory",
      path: file,
      message: `${file} is not a directory`
    })
  })
})
