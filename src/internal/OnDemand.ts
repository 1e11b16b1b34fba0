/**
 * Libraries loaded when first used, not with the modules that use them: a program (or an agent whose tools
 * never grep, whose tool results are never XML) does not pay for them. Each keeps up to a megabyte and a half
 * of heap once loaded (measured after GC: fast-xml-parser 1.4 MiB, yaml 0.9 MiB, re2js 0.6 MiB). Node caches a
 * module after its first `require`, so later calls cost a cache lookup. Every one has a CommonJS build; the CLI
 * bundle leaves them out (scripts/bundle-cli.mjs) and loads them from node_modules, as the unbundled program
 * does.
 */
import type * as FastXmlParser from "fast-xml-parser"
import { createRequire } from "node:module"
import type * as Re2js from "re2js"
import type * as YamlLib from "yaml"

const requireCjs = createRequire(import.meta.url)

/** RE2 for JavaScript: regular expressions matched in linear time (grep, glob, tool_search). */
export const re2js = (): typeof Re2js => requireCjs("re2js") as typeof Re2js

/** fast-xml-parser: XML validation and parsing (the synopsis of an XML tool result). */
export const fastXmlParser = (): typeof FastXmlParser => requireCjs("fast-xml-parser") as typeof FastXmlParser

/** yaml: configuration files, SKILL.md front matter, YAML tool results. */
export const yaml = (): typeof YamlLib => requireCjs("yaml") as typeof YamlLib
