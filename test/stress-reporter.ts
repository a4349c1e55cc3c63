/**
 * The vitest reporter `test/stress.ts` adds beside the default one: it writes what failed — each
 * failed test, each file that failed outside its tests, each unhandled error — one line apiece with
 * the first line of its message, as a JSON array to the file `RESILIENT_AI_STRESS_FAILURES` names.
 * vitest's own JSON report gives only stacks, and a timeout's stack does not say it timed out.
 */
import { writeFileSync } from "node:fs"
import * as Path from "node:path"
import type { Reporter, SerializedError, TestModule } from "vitest/node"

const firstLine = (error: SerializedError | undefined): string =>
  (error?.message ?? "").split("\n").find((line) => line.trim() !== "") ?? ""

export default class StressReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<SerializedError>): void {
    const file = process.env["RESILIENT_AI_STRESS_FAILURES"]
    if (file === undefined) return
    const failed = modules.flatMap((module) => {
      const where = Path.relative(process.cwd(), module.moduleId)
      return [
        ...module.errors().map((error) => `${where}: ${firstLine(error)}`),
        ...Array.from(
          module.children.allTests("failed"),
          (test) => `${where} > ${test.fullName}: ${firstLine(test.result().errors?.[0])}`
        )
      ]
    })
    writeFileSync(
      file,
      JSON.stringify([...failed, ...unhandled.map((error) => `unhandled error: ${firstLine(error)}`)])
    )
  }
}
