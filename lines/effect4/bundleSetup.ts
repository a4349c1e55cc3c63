// vitest's global setup on the Effect 4 line: what the tests run as processes of their own, bundled
// for Effect 4 (test/bundleSetup.ts; build/bundles-effect4).
import { bundle } from "../../test/bundleSetup.ts"

export default function setup(): Promise<void> {
  return bundle("effect4")
}
