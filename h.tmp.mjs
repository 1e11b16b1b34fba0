import fs from "node:fs"
const pre = ["effect/Effect","effect/Schema","effect/Stream","effect/Layer","effect/Schedule","effect/Duration","effect/Context","effect/Option","effect/Either","effect/Array"]
const order = JSON.parse(process.argv[2] ?? "null")
gc();gc(); let a=process.memoryUsage().heapUsed; console.log("base", (a/1048576).toFixed(2))
for (const m of pre) await import(m)
gc();gc(); let b=process.memoryUsage().heapUsed; console.log("effect", ((b-a)/1048576).toFixed(2)); a=b
const out=[]
for (const dir of ["state","services","layers","middleware","programs"]) for (const f of fs.readdirSync("dist-bench/src/"+dir).filter(f=>f.endsWith(".js"))) {
  await import("./dist-bench/src/"+dir+"/"+f); gc();gc(); const b=process.memoryUsage().heapUsed; out.push([dir+"/"+f, (b-a)/1048576]); a=b }
out.sort((x,y)=>y[1]-x[1]); for (const [m,d] of out.slice(0,25)) console.log(m.padEnd(45), d.toFixed(2))
console.log("total", (a/1048576).toFixed(2))
