/**
 * A real PostgreSQL for tests. `ANTLER_TEST_DATABASE_URL` (a server a CI script started) is used when set;
 * otherwise a throwaway cluster is made with Debian's binaries (`/usr/lib/postgresql/<version>/bin`): initdb
 * in a temp dir (as the `postgres` user when running as root, which initdb requires), started on a free
 * loopback port, stopped and removed afterwards. Each suite gets a database of its own.
 *
 * When neither exists, `start` says why, and the suites skip with that message (install PostgreSQL:
 * `apt-get install -y postgresql`, as `.ci/run` does).
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll } from "@effect/vitest"
import { freePort } from "./ports.js"

/** A running server. */
export interface Postgres {
  /** A fresh, empty database; its URL. */
  readonly createDatabase: () => Promise<string>
  readonly stop: () => Promise<void>
}

/** The directory of Debian's PostgreSQL binaries (the newest version), if installed. */
export const binaries = (): string | undefined => {
  const root = "/usr/lib/postgresql"
  if (!Fs.existsSync(root)) return undefined
  const versions = Fs.readdirSync(root).filter((v) => Fs.existsSync(Path.join(root, v, "bin", "initdb")))
  versions.sort((a, b) => Number(b) - Number(a))
  return versions.length > 0 ? Path.join(root, versions[0]!, "bin") : undefined
}

const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0

/** Runs a PostgreSQL binary (as `postgres` when we are root); throws with its output on failure. */
const runAs = (command: string, args: ReadonlyArray<string>) => {
  const result = isRoot()
    ? ChildProcess.spawnSync("runuser", ["-u", "postgres", "--", command, ...args], { encoding: "utf8" })
    : ChildProcess.spawnSync(command, args, { encoding: "utf8" })
  if (result.status !== 0) {
    throw new Error(`${Path.basename(command)} failed (${result.status}): ${result.stderr || result.stdout}`)
  }
}

let counter = 0
const databaseName = () => `antler_test_${process.pid}_${Date.now().toString(36)}_${++counter}`

/**
 * A server to test against, or the reason there is none. With `ANTLER_REQUIRE_POSTGRES=1` (set by `.ci/run`)
 * having none is an error, so CI never skips the suites silently.
 */
export const start = async (): Promise<Postgres | { readonly skip: string }> => {
  const found = await find()
  if ("skip" in found && process.env.ANTLER_REQUIRE_POSTGRES === "1") {
    throw new Error(`PostgreSQL is required here (ANTLER_REQUIRE_POSTGRES=1): ${found.skip}`)
  }
  return found
}

/** PostgreSQL for a test file (stopped after it), or why it is skipped (a warning naming the file). */
export const forFile = async (file: string): Promise<Postgres | { readonly skip: string }> => {
  const pg = await start()
  if ("skip" in pg) console.warn(`[${file}] PostgreSQL skipped: ${pg.skip}`)
  afterAll(() => ("stop" in pg ? pg.stop() : undefined))
  return pg
}

const find = async (): Promise<Postgres | { readonly skip: string }> => {
  const bin = binaries()
  const given = process.env.ANTLER_TEST_DATABASE_URL
  if (given !== undefined && given !== "") {
    return {
      createDatabase: async () => {
        const name = databaseName()
        psql(given, `CREATE DATABASE ${name}`)
        const url = new URL(given)
        url.pathname = `/${name}`
        return url.toString()
      },
      stop: async () => {}
    }
  }
  if (bin === undefined) {
    return {
      skip: "no PostgreSQL binaries (/usr/lib/postgresql/*/bin) and no ANTLER_TEST_DATABASE_URL: " +
        "install them with `apt-get install -y postgresql` (.ci/run does)"
    }
  }
  if (isRoot() && ChildProcess.spawnSync("id", ["postgres"]).status !== 0) {
    return { skip: "running as root and there is no `postgres` user to run initdb as" }
  }
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-pg-"))
  Fs.chmodSync(dir, 0o777)
  if (isRoot()) ChildProcess.spawnSync("chown", ["postgres:postgres", dir])
  const data = Path.join(dir, "data")
  const port = await freePort()
  runAs(Path.join(bin, "initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"])
  runAs(Path.join(bin, "pg_ctl"), [
    "-D",
    data,
    "-o",
    `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off -c max_connections=200`,
    "-l",
    Path.join(dir, "log"),
    "-w",
    "start"
  ])
  const admin = `postgres://postgres@127.0.0.1:${port}/postgres`
  return {
    createDatabase: async () => {
      const name = databaseName()
      psql(admin, `CREATE DATABASE ${name}`)
      return `postgres://postgres@127.0.0.1:${port}/${name}`
    },
    stop: async () => {
      try {
        runAs(Path.join(bin, "pg_ctl"), ["-D", data, "-m", "immediate", "-w", "stop"])
      } finally {
        Fs.rmSync(dir, { recursive: true, force: true })
      }
    }
  }
}

/** Runs one SQL statement with `psql` against `url`; its unaligned output, trimmed. Throws with psql's error. */
export const psql = (url: string, statement: string): string => {
  const bin = binaries() ?? "/usr/bin"
  const result = ChildProcess.spawnSync(Path.join(bin, "psql"), [url, "-v", "ON_ERROR_STOP=1", "-At", "-c", statement], {
    encoding: "utf8"
  })
  if (result.status !== 0) throw new Error(`psql failed: ${result.stderr}`)
  return result.stdout.trim()
}
