import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8")

describe("the storm figures of docs/storms.md", () => {
  it("come from the committed report of `resilient-ai storm --seed 1`", () => {
    const guide = read("docs/storms.md")
    const { command, scenarios } = JSON.parse(read("docs/storm/figures.json"))
    assert.strictEqual(command, "resilient-ai storm --seed 1")
    const ours = (scenario: string, name = "ours-managed") => scenarios[scenario].figures[name]
    const percent = (share: number, digits = 1) => `${(100 * share).toFixed(digits)}%`
    assert.include(
      guide,
      `| S1 correlated 10% failure: attempts per logical call | ${
        ours("S1").attemptsPerCall.toFixed(3)
      } (with a fixed 10% budget ${ours("S1", "ours-fixed-ratio").attemptsPerCall.toFixed(3)}) |`
    )
    assert.include(
      guide,
      `failed calls recovered | ${(100 * ours("S1b").recoveredShare).toFixed(1)}% (with a fixed 10% budget ${
        (100 * ours("S1b", "ours-fixed-ratio").recoveredShare).toFixed(1)
      }%) |`
    )
    assert.include(guide, `| ${ours("S2").recoverySeconds} s |`)
    assert.include(guide, `| ${ours("S2").wasted} | naive ${ours("S2", "naive").wasted} |`)
    const outage = ours("S2")
    assert.include(
      guide,
      `| provider-degraded ${percent(outage.degradedShare)} of it, self-inflicted ${
        outage.selfInflictedProbesInOutage === 0 ? "never" : "sometimes"
      }; the ramp starts at the probe's verdict (${outage.providerBackAt.toFixed(0)} s), not at the first call ` +
        `through (${outage.firstSuccessAfter} s) | no probe: the calls alone say self-inflicted during ${
          percent(outage.callsAloneSelfInflictedShare)
        } of it |`
    )
    assert.strictEqual(outage.rampStartSecond, Math.floor(outage.providerBackAt))
    const stampede = ours("S7")
    assert.include(
      guide,
      `| self-inflicted ${percent(stampede.selfInflictedShare)} of it (fixed-capacity preset ${
        percent(ours("S7", "ours-fixed-capacity").selfInflictedShare)
      }), provider-degraded ${stampede.providerDegraded === 0 ? "never" : "sometimes"} |`
    )
    assert.include(guide, `| ${(100 * ours("S3").peakShare).toFixed(1)}% of the burst |`)
    assert.include(
      guide,
      `| ${ours("S4").peakLoad.toFixed(2)}× (without the ramp ${
        ours("S4", "ours-managed-no-ramp").peakLoad.toFixed(2)
      }×) |`
    )
    assert.include(
      guide,
      `| ${(100 * ours("S4").lowestGoodputAfterFull).toFixed(1)}%, limit ${
        ours("S4").limitAfterFull
      } (limit fixed at 64: ${
        (100 * ours("S4", "ours-managed-fixed-limit").lowestGoodputAfterFull).toFixed(1)
      }%, relapsed) |`
    )
    assert.include(guide, `| ${Math.round(ours("S5", "ours-fixed-capacity").p99)} ms (service time 200 ms) |`)
    const paced = ours("S6", "ours-paced")
    const today = ours("S6")
    const bottleneck = ours("S6", "bottleneck-rps")
    assert.include(
      guide,
      `| paced with lanes: ${percent(paced.rateLimitedShare, 2)} 429s, ${percent(paced.goodputShare)}, ${
        Math.round(paced.interactiveWaitP99)
      } ms (without lanes ${
        percent(ours("S6", "ours-paced-no-lanes").interactiveSuccessShare)
      } of interactive calls succeed) | today's policy (no pacing) ${percent(today.rateLimitedShare, 2)}, ${
        percent(today.goodputShare)
      }, ${percent(today.interactiveSuccessShare)} of interactive calls succeed; Bottleneck-style requests per second ${
        percent(bottleneck.rateLimitedShare, 2)
      }, ${percent(bottleneck.goodputShare)} |`
    )
    const goals = Object.entries(scenarios as Record<string, { goals: Array<{ met: boolean; text: string }> }>)
    for (const [name, scenario] of goals) {
      assert.isNotEmpty(scenario.goals, `${name} states its goals`)
      for (const goal of scenario.goals) assert.isTrue(goal.met, goal.text)
    }
  })
})
