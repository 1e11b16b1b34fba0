/** A ZIP archive of the given files (name → text or bytes), stored or deflated, made with JSZip. */
export const zipOf = async (
  files: Readonly<Record<string, string | Uint8Array>>,
  options: { readonly compress?: boolean } = {}
): Promise<Uint8Array> => {
  const { default: JSZip } = await import("jszip")
  const zip = new JSZip()
  for (const [name, content] of Object.entries(files)) zip.file(name, content)
  return zip.generateAsync({
    type: "uint8array",
    platform: "UNIX",
    compression: options.compress === true ? "DEFLATE" : "STORE"
  })
}
