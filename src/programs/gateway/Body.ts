/**
 * The bodies the gateway reads. JSON comes only with `Content-Type: application/json` (a form or `text/plain`
 * is what a web page may send anywhere without asking, so it is refused), at most `MAX_JSON_BYTES` of it,
 * nested at most `MAX_JSON_DEPTH` deep; a request without a body needs no content type (the LangGraph SDK's
 * cancel). Uploads come as `multipart/form-data` with a boundary, ending with the form's closing boundary; the
 * sign-in route alone reads a form (`urlEncodedForm`), as DeerFlow's app sends it, behind the Origin check. Every
 * refusal is a `GatewayError` saying what was wrong: 400 (malformed), 413 (too large), 415 (wrong content type),
 * 422 (wrong shape).
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Multipart from "@effect/platform/Multipart"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as NodeMultipart from "@effect/platform-node/NodeMultipart"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import type * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import type { Readable } from "node:stream"
import { Transform } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as Json from "../../state/Json.js"
import { describeParseError, GatewayError } from "./api/Problem.js"

/** The largest JSON body read (uploads have their own limits, `uploads.*`). */
export const MAX_JSON_BYTES = 16 * 1024 * 1024

/**
 * How deeply arrays and objects may nest in a JSON body. What reads a body afterwards (Schema, the store,
 * `JSON.stringify`) is recursive; a message's deepest legitimate part (a tool call's arguments) is far
 * shallower.
 */
export const MAX_JSON_DEPTH = 100

/** A `Content-Type` header read: its media type and parameters, names in lower case. */
export interface ContentType {
  readonly mediaType: string
  readonly params: Readonly<Record<string, string>>
}

/** Reads a `Content-Type` header (`type/subtype; name=value; name="quoted value"`). */
export const parseContentType = (header: string): ContentType => {
  const semicolon = header.indexOf(";")
  const mediaType = (semicolon < 0 ? header : header.slice(0, semicolon)).trim().toLowerCase()
  const params: Record<string, string> = {}
  if (semicolon >= 0) {
    const pattern = /;\s*([^=;\s]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/g
    for (const match of header.slice(semicolon).matchAll(pattern)) {
      const raw = match[2]!.trim()
      const value = raw.startsWith("\"") ? raw.slice(1, -1).replace(/\\(.)/g, "$1") : raw
      params[match[1]!.toLowerCase()] ??= value
    }
  }
  return { mediaType, params }
}

const fail = (reason: GatewayError["reason"], message: string) => new GatewayError({ reason, message })

const contentTypeOf = (headers: Readonly<Record<string, string | undefined>>) => {
  const header = headers["content-type"]
  return header === undefined || header.trim() === "" ? undefined : parseContentType(header)
}

/** Why a request's body is not JSON the gateway reads (by its headers), if it is not. */
export const jsonHeadersProblem = (headers: Readonly<Record<string, string | undefined>>): GatewayError | undefined => {
  const type = contentTypeOf(headers)
  if (type === undefined) {
    // (a chunked body says nothing of its length: it is refused once read, when it is not empty)
    return Number(headers["content-length"] ?? 0) > 0
      ? fail("unsupported_media_type", "The body must be JSON sent with Content-Type: application/json; it had none.")
      : undefined
  }
  if (type.mediaType !== "application/json") {
    return fail(
      "unsupported_media_type",
      `The body must be JSON sent with Content-Type: application/json, not ${JSON.stringify(type.mediaType)}.`
    )
  }
  const length = Number(headers["content-length"] ?? 0)
  if (length > MAX_JSON_BYTES) return tooLarge()
  return undefined
}

const tooLarge = () =>
  fail("too_large", `The body is larger than ${MAX_JSON_BYTES / 1024 / 1024} MiB, the most the gateway reads as JSON.`)

/**
 * The body as text, at most `limit` bytes. Past the limit the rest is read and dropped, not the connection cut,
 * so that the client still gets the answer (a 413).
 */
const readText = (source: Http.IncomingMessage, limit: number) =>
  Effect.async<string, GatewayError>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const cleanup = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("close", onClose)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) {
        chunks.push(chunk)
        return
      }
      cleanup()
      chunks.length = 0
      source.resume()
      resume(Effect.fail(tooLarge()))
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
    }
    const onError = (error: Error) => {
      cleanup()
      resume(Effect.fail(fail("bad_request", `Cannot read the body: ${error.message}`)))
    }
    const onClose = () => {
      cleanup()
      resume(Effect.fail(fail("bad_request", "Cannot read the body: the connection closed before its end.")))
    }
    if (source.readableEnded) return resume(Effect.succeed(""))
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onError)
    source.on("close", onClose)
    return Effect.sync(cleanup)
  })

/** JSON text read: `{}` when empty; refused when nested deeper than `MAX_JSON_DEPTH` or not JSON. */
export const parseJson = (text: string): Either.Either<unknown, GatewayError> => {
  if (text.trim() === "") return Either.right({})
  if (Json.nestingDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
    return Either.left(fail(
      "bad_request",
      `The body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep, the most the gateway reads.`
    ))
  }
  try {
    // (without `__proto__` keys: a client could otherwise give a message's `additional_kwargs` server-owned
    // keys the server never sees as its own, and so never strips, such as the date reminder's mark)
    return Either.right(Json.parse(text))
  } catch (error) {
    return Either.left(fail("bad_request", `The body is not valid JSON: ${(error as Error).message}`))
  }
}

/**
 * Reads a JSON body (none means `{}`) and decodes it: a wrong content type is 415, too large 413, bad JSON or
 * too deep 400, a bad shape 422 naming the fields.
 */
export const json = <A, I>(schema: Schema.Schema<A, I>) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const refused = jsonHeadersProblem(request.headers)
    if (refused !== undefined) return yield* refused
    const text = yield* readText(NodeHttpServerRequest.toIncomingMessage(request), MAX_JSON_BYTES)
    const hasType = contentTypeOf(request.headers) !== undefined
    if (!hasType && text !== "") {
      return yield* fail("unsupported_media_type", "The body must be JSON sent with Content-Type: application/json.")
    }
    const raw = yield* parseJson(text)
    return yield* Either.match(Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "ignore" })(raw), {
      onLeft: (error) => Effect.fail(fail("unprocessable", describeParseError(error))),
      onRight: Effect.succeed
    })
  })

/** Why a request is not a multipart form the upload route reads (by its headers), if it is not. */
export const multipartProblem = (headers: Readonly<Record<string, string | undefined>>): GatewayError | undefined => {
  const type = contentTypeOf(headers)
  if (type === undefined || type.mediaType !== "multipart/form-data") {
    return fail(
      "unsupported_media_type",
      `Uploads are multipart/form-data forms with the files in "files", not ${
        type === undefined ? "a body without a content type" : JSON.stringify(type.mediaType)
      }.`
    )
  }
  const boundary = type.params["boundary"]
  if (boundary === undefined || !BOUNDARY.test(boundary)) {
    return fail(
      "bad_request",
      "The multipart form has no valid boundary (Content-Type: multipart/form-data; boundary=..., 1-70 letters, " +
        "digits or '()+_,-./:=? and spaces, not ending with a space)."
    )
  }
  return undefined
}

/** What a multipart boundary may be (RFC 2046: `bchars`, 1-70 of them, not ending with a space). */
const BOUNDARY = /^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$/

/**
 * Passes a form's body through, calling `unclosed` when it ends without the form's closing boundary
 * (`CRLF--boundary--`, or `--boundary--` first thing): the only end the multipart parser knows, which waits
 * forever for the rest of a form cut short.
 */
const watchClosing = (boundary: string, unclosed: () => void) => {
  const delimiter = Buffer.from(`\r\n--${boundary}--`)
  let seen = false
  // (the parser reads the body as if after a line break, so that a boundary may come first)
  let tail = Buffer.from("\r\n")
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (!seen) {
        const window = Buffer.concat([tail, chunk])
        seen = window.includes(delimiter)
        tail = window.subarray(Math.max(0, window.length - delimiter.length + 1))
      }
      callback(null, chunk)
    },
    flush(callback) {
      if (!seen) unclosed()
      callback()
    }
  })
}

/** A file of an upload's form: its field, its name as the client gave it, and the temporary file holding it. */
export interface FormFile {
  readonly key: string
  readonly name: string
  readonly path: string
}

/**
 * The files of a form, in the form's order, each written to a temporary file of its own (the platform's
 * `Multipart.toPersisted` names them by the client's file name, so that a second `data.txt` overwrote the first
 * one's bytes); the temporary directory goes with the scope.
 */
const persistFiles = (source: Readable, headers: Http.IncomingHttpHeaders) =>
  Effect.gen(function*() {
    const internal = (cause: unknown) => new Multipart.MultipartError({ reason: "InternalError", cause })
    const dir = yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => Fs.promises.mkdtemp(Path.join(Os.tmpdir(), "antler-upload-")), catch: internal }),
      (dir) => Effect.promise(() => Fs.promises.rm(dir, { recursive: true, force: true }))
    )
    const files: Array<FormFile> = []
    yield* Stream.runForEach(NodeMultipart.stream(source, headers), (part) => {
      if (part._tag === "Field" || part.name === "") return Effect.void
      const path = Path.join(dir, String(files.length))
      files.push({ key: part.key, name: part.name, path })
      return Effect.tryPromise({
        try: (signal) => pipeline(NodeMultipart.fileToReadable(part), Fs.createWriteStream(path), { signal }),
        catch: internal
      })
    })
    return files as ReadonlyArray<FormFile>
  })

/**
 * An upload's form: its files, saved as temporary files (bounded by `Multipart.withLimits`). Refused when its
 * headers are not a form's (`multipartProblem`), and when its body ends before the form's closing boundary (400).
 */
export const multipart = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  // (the multipart parser throws, outside the effect, on a form without a boundary it reads)
  const refused = multipartProblem(request.headers)
  if (refused !== undefined) return yield* refused
  const boundary = contentTypeOf(request.headers)!.params["boundary"]!
  // the parser is given the boundary as read here, in the one spelling it reads (it reads some others not at all:
  // `boundary=x;` or `;;boundary=x` made it throw), so that it splits the form where the watch looks for its end
  const headers = { ...request.headers, "content-type": `multipart/form-data; boundary="${boundary}"` }
  const cut = yield* Deferred.make<never, GatewayError>()
  const source = NodeHttpServerRequest.toIncomingMessage(request).pipe(watchClosing(boundary, () =>
    Deferred.unsafeDone(
      cut,
      Exit.fail(fail(
        "bad_request",
        "The multipart form ends before its closing boundary (--boundary--): the body was cut short."
      ))
    )
  ))
  return yield* Effect.raceFirst(persistFiles(source, headers), Deferred.await(cut))
})

/** The largest form body read (the sign-in form: an email, a password and a flag). */
export const MAX_FORM_BYTES = 16 * 1024

/**
 * Reads an `application/x-www-form-urlencoded` body (each field's first value) and decodes it: any other content
 * type is 415, more than `MAX_FORM_BYTES` 413, a bad shape 422 naming the fields. Only the sign-in route reads
 * one (DeerFlow's app sends its login form so, as OAuth2's password grant is sent): every other route takes JSON
 * only.
 */
export const urlEncodedForm = <A, I>(schema: Schema.Schema<A, I>) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const type = contentTypeOf(request.headers)
    if (type === undefined || type.mediaType !== "application/x-www-form-urlencoded") {
      return yield* fail(
        "unsupported_media_type",
        "The body must be a form sent with Content-Type: application/x-www-form-urlencoded, not " +
          `${type === undefined ? "a body without a content type" : JSON.stringify(type.mediaType)}.`
      )
    }
    if (Number(request.headers["content-length"] ?? 0) > MAX_FORM_BYTES) return yield* formTooLarge()
    const text = yield* Effect.catchIf(
      readText(NodeHttpServerRequest.toIncomingMessage(request), MAX_FORM_BYTES),
      (error) => error.reason === "too_large",
      () => formTooLarge()
    )
    const fields: Record<string, string> = {}
    for (const [name, value] of new URLSearchParams(text)) if (!Object.hasOwn(fields, name)) fields[name] = value
    const decoded = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "ignore" })(fields)
    return yield* Either.match(decoded, {
      onLeft: (error) => Effect.fail(fail("unprocessable", describeParseError(error))),
      onRight: Effect.succeed
    })
  })

const formTooLarge = () => Effect.fail(fail("too_large", `The form is larger than ${MAX_FORM_BYTES} bytes.`))
