/**
 * Escaping for the harness's own markup (pure). The harness hands the model text inside XML-like blocks
 * (`<memory>`, `<current_uploads>`, `<durable_context_data>`, `<system_reminder>`, the system prompt's
 * sections…); their tag names are protocol and stay. Text from elsewhere placed inside a block — the user's,
 * the model's, a web page's, a file's — goes through `escapeText` (or `escapeAttribute` in an attribute), so it
 * can neither close the block it is in nor open one that speaks as the harness:
 *
 * - `&`, `<` and `>` become `&amp;`, `&lt;` and `&gt;`;
 * - so do the characters that are `<` or `>` under Unicode compatibility (`＜` `﹤` `＞` `﹥`);
 * - another angle-bracket look-alike (`‹`, `〈`, `⟨`, `˂`, `ᐸ`, `❮`…) that opens a closing-tag shape
 *   (`‹/memory›`, also with blanks or invisible characters before the `/`) becomes `&lt;`.
 *
 * `block(tag, text)` is the whole pattern: the opening tag, the escaped text and the closing tag, each on its own
 * line.
 */

const ENTITIES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  "\uFF1C": "&lt;",
  "\uFE64": "&lt;",
  "\uFF1E": "&gt;",
  "\uFE65": "&gt;",
  "\"": "&quot;",
  "'": "&#39;"
}

// Angle-bracket look-alikes that do not fold to `<` but read like one, before a `/` (blanks and invisible
// format characters allowed in between). A new regex per use: a module-level global one keeps its lastIndex.
const lookalikeClosers = () =>
  /[\u2039\u3008\u2329\u27E8\u27EA\u02C2\u1438\u276E\u29FC\u2991\u276C\u2770](?=[\s\p{Cf}]*\/)/gu

const entity = (c: string): string => ENTITIES[c] ?? c

/** Text made safe to place inside a harness block: it cannot close or open a tag. */
export const escapeText = (text: string): string =>
  text.replace(/[&<>\uFF1C\uFE64\uFF1E\uFE65]/g, entity).replace(lookalikeClosers(), "&lt;")

/** Text made safe to place in a quoted attribute value of a harness tag (quotes escaped too). */
export const escapeAttribute = (text: string): string =>
  text.replace(/[&<>\uFF1C\uFE64\uFF1E\uFE65"]/g, entity).replace(lookalikeClosers(), "&lt;")

/** The closing tag of a block. */
export const closingTag = (tag: string): string => `</${tag}>`

/**
 * A harness block: `<tag>` (with `attributes` as written, when given), the escaped text, and the closing tag,
 * each on its own line. Whatever `text` holds, the result has exactly one closing tag, at its end.
 */
export const block = (tag: string, text: string, attributes?: string): string =>
  `<${tag}${attributes === undefined || attributes === "" ? "" : ` ${attributes}`}>\n${escapeText(text)}\n${
    closingTag(tag)
  }`
