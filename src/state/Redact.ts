/**
 * Making untrusted text safe to show or keep. A redactor replaces configured secrets, the credentials of
 * URLs (`http://user:pass@host`) and `Bearer` / `Basic` tokens with a marker; `controls` makes control
 * characters visible so that nothing a model or a server sends can drive a terminal (clipboard writes,
 * titles, screen clears, links).
 *
 * Pure: a redactor is built from an explicit set of secrets, by whoever knows them (the model adapter its own
 * key, the CLI every configured one). There is no registry.
 */
import * as Redacted from "effect/Redacted"
import * as Json from "./Json.js"

/** What a secret or a credential is replaced with. */
export const MARKER = "[redacted]"

/**
 * Secrets shorter than this are not searched for: replacing every `x` of a text would destroy it and hide
 * nothing. Real API keys are far longer.
 */
export const MIN_SECRET_LENGTH = 8

/**
 * The shortest beginning of a secret a stream that ends hides (`TextStream.end`, `Redactor.last`): a text cut off
 * inside a secret shows at most this many characters less one of it, fewer than any secret searched for has.
 */
export const MIN_HIDDEN_PREFIX = 4

/** The longest word a stream holds back while it may still become a URL with credentials. */
const MAX_HOLD = 4096

/** The beginnings of `Bearer` and `Basic`: a word ending in one may be followed by a token. */
const SCHEME_STARTS = ["bearer", "basic"].flatMap((word) => Array.from(word, (_, i) => word.slice(0, i + 1)))

/** A streaming redactor for one piece of text that arrives in deltas (a message's tokens). */
export interface TextStream {
  /** Adds a delta; returns the redacted text that is safe to show now (a suffix may be held back). */
  readonly push: (delta: string) => string
  /**
   * Ends the text: returns what was held back, redacted (`Redactor.last`: a trailing beginning of a secret of
   * `MIN_HIDDEN_PREFIX` characters or more hidden too).
   */
  readonly end: () => string
  /** What `end` would return now, without ending (a tail shown while the text may still grow). */
  readonly peek: () => string
  /** A stream of its own that holds what this one holds now (what both are given next is their own). */
  readonly fork: () => TextStream
}

/** A redactor over a fixed set of secrets. */
export interface Redactor {
  /** The secrets searched for (the usable ones, longest first). */
  readonly secrets: ReadonlyArray<string>
  /** The text with secrets, URL credentials and bearer tokens replaced by `MARKER`. */
  readonly text: (text: string) => string
  /**
   * `text` as the end of a stream (`TextStream.end`): a trailing beginning of a secret (a text cut off inside one)
   * of `MIN_HIDDEN_PREFIX` characters or more is replaced too.
   */
  readonly last: (text: string) => string
  /** Whether `text` holds anything `text` would replace. */
  readonly test: (text: string) => boolean
  /** Every string inside a JSON-like value redacted; the same value (by reference) when nothing changed. */
  readonly value: <A>(value: A) => A
  /** A redactor for text arriving in deltas: what it lets through never holds a secret split across deltas. */
  readonly stream: () => TextStream
}

type SecretInput = string | Redacted.Redacted<string> | null | undefined

// Global regular expressions are made per use (these functions): a module-level one keeps its lastIndex.

/** `://userinfo@`: the userinfo (user, or user:password) of a URL, whatever its scheme. */
const urlCredentials = () => /:\/\/[^\s/?#@]+@/g
/**
 * `Bearer <token>` / `Basic <token>`, as an Authorization header carries them. A token ends where another
 * `Bearer `/`Basic ` starts (tokens glued together): swallowing that scheme word would leave its own token
 * shown.
 */
const authTokens = () => /(Bearer|Basic)(\s+)(?:(?!(?:Bearer|Basic)\s)[A-Za-z0-9._~+/=-]){8,}/gi

// (the non-global ones are made once: a regular expression literal is a new object each time it is evaluated,
// and a stream evaluates these on every delta)
const WHITESPACE = /\s/
const SCHEME_WORD = /bearer|basic/i
const SCHEME_AT_END = /(Bearer|Basic)\s+$/i

/** Whether `text` ends with the first `k` characters of `secret` (without making that prefix). */
const endsWithPrefix = (text: string, secret: string, k: number): boolean => {
  const from = text.length - k
  for (let i = 0; i < k; i++) if (text.charCodeAt(from + i) !== secret.charCodeAt(i)) return false
  return true
}

/** The user name and password of a URL, when it has any (so that an echo of either alone is caught too). */
export const urlSecrets = (url: string | undefined): ReadonlyArray<string> => {
  if (url === undefined) return []
  try {
    const parsed = new URL(url)
    const out: Array<string> = []
    for (const part of [parsed.username, parsed.password]) {
      if (part === "") continue
      out.push(part)
      try {
        const decoded = decodeURIComponent(part)
        if (decoded !== part) out.push(decoded)
      } catch {
        // keep the encoded form only
      }
    }
    return out
  } catch {
    return []
  }
}

// a key naming a secret, in snake, kebab or camel case (`api_key`, `access-token`, `clientSecret`, `password`)
const SECRET_WORD = "(?:(?:api|access|private|secret)[-_]?key|token|secret|password|passwd|credentials?)"
const SECRET_SNAKE = new RegExp(`(?:^|[-_])${SECRET_WORD}$`)
const SECRET_CAMEL = /[a-z0-9](?:Key|Token|Secret|Password|Passwd|Credentials?)$/

const isSecretKey = (key: string) => SECRET_SNAKE.test(key.toLowerCase()) || SECRET_CAMEL.test(key)

/**
 * The text values held under secret-named keys (`api_key`, `access_token`, `client_secret`...), at any depth of a
 * JSON value (a model's `model_kwargs` or `extra_body`, which a provider may take its key in).
 */
export const namedSecrets = (value: unknown, depth = 0): ReadonlyArray<string> => {
  if (depth > 32 || typeof value !== "object" || value === null) return []
  if (Array.isArray(value)) return value.flatMap((item) => namedSecrets(item, depth + 1))
  return Object.entries(value).flatMap(([key, item]) =>
    typeof item === "string" ? (isSecretKey(key) ? [item] : []) : namedSecrets(item, depth + 1)
  )
}

/**
 * The forms a secret is said back in besides itself: URL-encoded (a server echoing a request's URL) and escaped as
 * JSON text holds it (a result's structured content); those equal to the value are left out.
 */
export const echoForms = (value: string): ReadonlyArray<string> =>
  [encodeURIComponent(value), JSON.stringify(value).slice(1, -1)].filter((form) => form !== value)

/**
 * The forms a request secret is said back in encoded (`make`'s `encoded`): its UTF-8 bytes in hex (lower and upper
 * case) and in base64, standard and URL-safe, whole (with and without padding) and, for an echo inside a longer
 * base64 text, the characters its bytes alone make at each of the three byte alignments (a neighbour's bits change
 * the first and last ones, which are left out). None for a secret shorter than `MIN_SECRET_LENGTH` (not searched for
 * at all); a longer one's forms are at least ten characters (60 bits), which random text does not make by chance.
 */
export const encodedForms = (value: string): ReadonlyArray<string> => {
  if (value.length < MIN_SECRET_LENGTH) return []
  const bytes = Buffer.from(value, "utf8")
  const hex = bytes.toString("hex")
  const whole = bytes.toString("base64")
  const urlSafe = (text: string) => text.replace(/\+/g, "-").replace(/\//g, "_")
  const forms = [hex, hex.toUpperCase(), whole, whole.replace(/=+$/, ""), urlSafe(whole)]
  forms.push(urlSafe(whole).replace(/=+$/, ""))
  for (const offset of [0, 1, 2]) {
    const text = Buffer.concat([Buffer.alloc(offset), bytes]).toString("base64")
    const core = text.slice(Math.ceil((8 * offset) / 6), Math.floor((8 * (offset + bytes.length)) / 6))
    forms.push(core, urlSafe(core))
  }
  return [...new Set(forms)].filter((form) => form !== value && form.length >= MIN_SECRET_LENGTH)
}

/** How a redactor searches for its secrets. */
export interface Options {
  /**
   * Also the secrets' encoded forms (`encodedForms`: hex, base64): for a run's request secrets, which a server or a
   * tool may say back encoded; off for the process's own (no cost on a run without request secrets).
   */
  readonly encoded?: boolean | undefined
}

/** The URL without its credentials: `http://user:pass@host/v1` → `http://[redacted]@host/v1`. */
export const url = (text: string): string => text.replace(urlCredentials(), `://${MARKER}@`)

/** Builds a redactor for these secrets (redacted values are read; short, empty and missing ones are skipped). */
export const make = (secrets: Iterable<SecretInput> = [], options: Options = {}): Redactor => {
  const set = new Set<string>()
  for (const secret of secrets) {
    if (secret === undefined || secret === null) continue
    const value = Redacted.isRedacted(secret) ? Redacted.value(secret) : secret
    if (value.length < MIN_SECRET_LENGTH) continue
    set.add(value)
    for (const form of echoForms(value)) set.add(form)
    if (options.encoded === true) for (const form of encodedForms(value)) set.add(form)
  }
  const list = [...set].sort((a, b) => b.length - a.length)
  // Each text is searched for alone (`indexOf`), never in one pattern of them all: JavaScript refuses a pattern holding
  // an alternative of 32,768 characters or more (a 16 KiB secret's hex), quoting it whole in its error, and compiles
  // and runs one of thousands of alternatives for seconds, where a search of each takes milliseconds.
  const longest = list.length === 0 ? 0 : list[0]!.length

  const mayHold = (text: string) =>
    text.includes("://") || SCHEME_WORD.test(text) || list.some((secret) => text.includes(secret))

  const text = (input: string): string => {
    if (!mayHold(input)) return input
    let out = input
    for (const secret of list) if (out.includes(secret)) out = out.split(secret).join(MARKER)
    if (out.includes("://")) out = url(out)
    return out.replace(authTokens(), `$1$2${MARKER}`)
  }

  const test = (input: string) => text(input) !== input

  /** `done` (redacted already) with a trailing beginning of a secret hidden (see `MIN_HIDDEN_PREFIX`). */
  const hideCutSecret = (done: string): string => {
    let longestCut = 0
    for (const secret of list) {
      for (let k = Math.min(secret.length - 1, done.length); k >= MIN_HIDDEN_PREFIX && k > longestCut; k--) {
        if (endsWithPrefix(done, secret, k)) {
          longestCut = k
          break
        }
      }
    }
    return longestCut === 0 ? done : done.slice(0, done.length - longestCut) + MARKER
  }

  const last = (input: string) => hideCutSecret(text(input))

  const value = <A>(input: A): A => Json.mapStrings(input, text)

  /** Where `pending` may be cut: nothing after the cut can still grow into (or be part of) something to hide. */
  const safeCut = (pending: string): number => {
    let cut = pending.length
    // The last word may still grow into a URL with credentials (it has a `:`) or an auth scheme.
    let start = pending.length
    while (start > 0 && !WHITESPACE.test(pending[start - 1]!)) start--
    const word = pending.slice(start)
    const tail = word.slice(-6).toLowerCase()
    if (word.includes(":") || SCHEME_STARTS.some((start) => tail.endsWith(start))) {
      // (never below 0: a cut past the start released all but the end, a long secret's beginning with it)
      cut = word.length > MAX_HOLD ? Math.max(0, pending.length - Math.max(256, longest)) : start
    }
    // "Bearer " waits for its token, and the token for its end.
    const scheme = SCHEME_AT_END.exec(pending.slice(0, start))
    if (scheme !== null) cut = Math.min(cut, scheme.index)
    // Any ending that starts a secret waits for the rest.
    for (const secret of list) {
      for (let k = Math.min(secret.length - 1, pending.length); k > 0; k--) {
        if (pending.length - k >= cut) break
        if (endsWithPrefix(pending, secret, k)) {
          cut = pending.length - k
          break
        }
      }
    }
    // No complete match may straddle the cut (there is none when nothing in `pending` may hold one); a cut moved
    // back may split a match found whole before, so until none does.
    if (!mayHold(pending)) return cut
    for (let moved = true; moved;) {
      moved = false
      for (const secret of list) {
        for (let at = pending.indexOf(secret); at >= 0 && at < cut; at = pending.indexOf(secret, at + secret.length)) {
          if (at + secret.length > cut) {
            cut = at
            moved = true
          }
        }
      }
      for (const pattern of [urlCredentials(), authTokens()]) {
        for (const match of pending.matchAll(pattern)) {
          if (match.index < cut && match.index + match[0].length > cut) {
            cut = match.index
            moved = true
          }
        }
      }
    }
    return cut
  }

  const stream = (held = ""): TextStream => {
    let pending = held
    return {
      push: (delta) => {
        pending += delta
        const cut = safeCut(pending)
        if (cut === 0) return ""
        const out = pending.slice(0, cut)
        pending = pending.slice(cut)
        return text(out)
      },
      end: () => {
        const out = pending
        pending = ""
        return last(out)
      },
      peek: () => last(pending),
      fork: () => stream(pending)
    }
  }

  return { secrets: list, text, last, test, value, stream: () => stream() }
}

/** A redactor without secrets: URL credentials and bearer tokens only. */
export const none: Redactor = make()

/**
 * `base` hiding `secrets` too (a run's request secrets, on top of the process's, in their encoded forms as well: see
 * `Options.encoded`): read through `base` each time, so what `base` learns meanwhile is hidden as well. `base` itself
 * when none of `secrets` is long enough to search for.
 */
export const also = (base: Redactor, secrets: Iterable<SecretInput>): Redactor => {
  const extra = make(secrets, { encoded: true })
  if (extra.secrets.length === 0) return base
  return {
    get secrets() {
      return [...base.secrets, ...extra.secrets]
    },
    text: (text) => extra.text(base.text(text)),
    last: (text) => extra.last(base.last(text)),
    test: (text) => base.test(text) || extra.test(text),
    value: (value) => extra.value(base.value(value)),
    stream: () => {
      const chained = (first: TextStream, second: TextStream): TextStream => ({
        push: (delta) => second.push(first.push(delta)),
        end: () => second.push(first.end()) + second.end(),
        peek: () => chained(first.fork(), second.fork()).end(),
        fork: () => chained(first.fork(), second.fork())
      })
      return chained(base.stream(), extra.stream())
    }
  }
}

/** A redactor that learns secrets while it is in use (`learn`): what it redacts from then on hides them too. */
export interface Growing extends Redactor {
  readonly learn: (secrets: Iterable<SecretInput>) => void
}

/**
 * `base`, growing: secrets configured while the process runs (an MCP server an admin adds to a running gateway)
 * are hidden by everything that was handed the redactor at the start. A text stream already begun keeps the
 * secrets it began with.
 */
export const growing = (base: Redactor): Growing => {
  let current = base
  return {
    get secrets() {
      return current.secrets
    },
    text: (text) => current.text(text),
    last: (text) => current.last(text),
    test: (text) => current.test(text),
    value: (value) => current.value(value),
    stream: () => current.stream(),
    learn: (secrets) => {
      const known = new Set(current.secrets)
      const fresh = [...secrets].filter((secret) => {
        const value = Redacted.isRedacted(secret) ? Redacted.value(secret) : secret
        return value !== undefined && value !== null && !known.has(value)
      })
      if (fresh.length > 0) current = make([...current.secrets, ...fresh])
    }
  }
}

/**
 * `redactor` as a growing one: itself when it is one already, so that what anyone teaches it (the gateway, the
 * MCP servers started with it, an edit of the configuration) is hidden from everything it was handed to (the
 * process's logs among them).
 */
export const growingOf = (redactor: Redactor): Growing =>
  "learn" in redactor && typeof (redactor as Growing).learn === "function" ? redactor as Growing : growing(redactor)

// ---------------------------------------------------------------------------------------------------------
// Control characters

// C0 except tab and newline, DEL, C1 (8-bit CSI, OSC...), and the bidirectional overrides that reorder text.
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/

const visible = (char: string): string => {
  const code = char.charCodeAt(0)
  if (code === 0x0d) return ""
  if (code < 0x20) return String.fromCharCode(0x2400 + code)
  if (code === 0x7f) return "\u2421"
  return `\\u${code.toString(16).padStart(4, "0")}`
}

/**
 * The text with every control character made visible (ESC as `␛`, BEL as `␇`, C1 and bidirectional
 * controls as `\u009b`-style escapes) and carriage returns dropped; tabs and newlines stay. Character by
 * character, so `controls(a + b) === controls(a) + controls(b)`.
 */
export const controls = (text: string): string =>
  CONTROL.test(text) ? text.replace(new RegExp(CONTROL, "g"), visible) : text

/**
 * A JSON text made safe for a terminal: `JSON.stringify` escapes C0 controls but leaves DEL, C1 and
 * bidirectional controls raw; they become `\u` escapes (the JSON means the same).
 */
export const jsonControls = (json: string): string =>
  json.replace(/[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (char) =>
    `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`)
