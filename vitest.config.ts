import { defineConfig } from "vitest/config"
import { suiteConfig } from "./vitest.suite.ts"

/** The suite on the Effect 3 line; `lines/effect4/vitest.config.ts` runs it on Effect 4. */
export default defineConfig(suiteConfig("effect3"))
