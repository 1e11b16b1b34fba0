/**
 * The web page of the gateway: plain HTML, CSS and JavaScript files (no build step) served at `/`, talking to the
 * same API as any other client. The files live in `src/programs/gateway/web/` (the package ships `src/`); the
 * compiled module finds them there too.
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as PackageRoot from "../PackageRoot.js"

/** The page's files: name → content type. */
const FILES: Readonly<Record<string, string>> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "style.css": "text/css; charset=utf-8"
}

/**
 * The directory holding the page's files: in the package's `src/programs/gateway/web/`, whether this code runs
 * from `src/`, from `dist/` or bundled into `dist/cli/`.
 */
export const directory = (): string => Path.join(PackageRoot.root(), "src", "programs", "gateway", "web")

const serve = (dir: string, name: string) =>
  Effect.suspend(() => {
    try {
      const body = Fs.readFileSync(Path.join(dir, name))
      return Effect.succeed(HttpServerResponse.uint8Array(new Uint8Array(body), {
        contentType: FILES[name]!,
        headers: {
          "cache-control": "no-cache",
          "x-content-type-options": "nosniff",
          // the page runs only its own script, talks only to this server, and cannot be framed; it frames only
          // the artifacts it fetched (blob URLs, in a sandboxed frame)
          "content-security-policy":
            "default-src 'self'; img-src 'self' data: blob:; frame-src blob:; frame-ancestors 'none'",
          "referrer-policy": "no-referrer"
        }
      }))
    } catch {
      const missing = `The web page is not installed (${name} is missing).`
      return Effect.succeed(HttpServerResponse.text(missing, { status: 404 }))
    }
  })

/** The routes of the page. */
export const router = (dir: string = directory()) =>
  HttpRouter.empty.pipe(
    HttpRouter.get("/", serve(dir, "index.html")),
    HttpRouter.get("/index.html", serve(dir, "index.html")),
    HttpRouter.get("/app.js", serve(dir, "app.js")),
    HttpRouter.get("/style.css", serve(dir, "style.css"))
  )
