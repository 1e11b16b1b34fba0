/**
 * Debian's Chromium for the browser tests, driven by playwright-core (`apt-get install -y chromium`). Where none
 * is installed a file's browser tests are skipped, saying why, unless Chromium is required
 * (`ANTLER_REQUIRE_CHROMIUM=1`): then the file fails.
 */
import * as Fs from "node:fs"
import type { BrowserContext } from "playwright-core"
import { chromium } from "playwright-core"

/** The Chromium binary, or undefined when none is installed. */
export const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => Fs.existsSync(p))

/** The flags of a test's Chromium: no sandbox of its own (containers), no GPU, nothing fetched on its own. */
export const FLAGS: ReadonlyArray<string> = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** A headless Chromium with its profile in `profileDir`, started with `FLAGS` and then `extraArgs`. */
export const launchPersistent = (profileDir: string, extraArgs: ReadonlyArray<string> = []): Promise<BrowserContext> =>
  chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM!,
    headless: true,
    args: [...FLAGS, ...extraArgs]
  })

/** Without Chromium: fails when it is required, else warns `skipped` (the file's browser tests are skipped). */
export const requireOrWarn = (skipped: string): void => {
  if (CHROMIUM === undefined && process.env.ANTLER_REQUIRE_CHROMIUM === "1") {
    throw new Error("Chromium is required here (ANTLER_REQUIRE_CHROMIUM=1): no /usr/bin/chromium")
  }
  if (CHROMIUM === undefined) console.warn(skipped)
}
