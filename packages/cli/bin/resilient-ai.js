#!/usr/bin/env node
// The `resilient-ai` command. It runs the build in ../dist (written by `tsc -b` at the repository
// root), since Node 20 cannot run the TypeScript sources itself.
import { existsSync } from "node:fs"

const main = new URL("../dist/main.js", import.meta.url)
if (!existsSync(main)) {
  console.error("resilient-ai: the command is not built (packages/cli/dist/main.js is missing); run `npx tsc -b`")
  process.exit(1)
}
await import(main.href)
