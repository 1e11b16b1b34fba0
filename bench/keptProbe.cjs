/**
 * A preload for bench:gateway's `--kept` pass (loaded into every node process of a server's tree through
 * NODE_OPTIONS): on SIGUSR2 the process collects its garbage in full and appends the heap it still uses (MB) to
 * `$KEPT_PROBE_DIR/<pid>.heap`. A `<pid>.ready` file says the process has the handler (SIGUSR2 ends a process
 * without one). What a server keeps per active run, apart from the garbage its collector has not yet reclaimed.
 */
"use strict"
const fs = require("node:fs")
const path = require("node:path")
const dir = process.env.KEPT_PROBE_DIR
if (dir !== undefined && dir !== "") {
  require("node:v8").setFlagsFromString("--expose-gc")
  const gc = require("node:vm").runInNewContext("gc")
  process.on("SIGUSR2", () => {
    gc()
    fs.appendFileSync(path.join(dir, `${process.pid}.heap`), `${process.memoryUsage().heapUsed / 2 ** 20}\n`)
  })
  fs.writeFileSync(path.join(dir, `${process.pid}.ready`), "")
}
