/**
 * The failure path seen from outside the process: one layer that sends Effect's metrics and spans
 * to OpenTelemetry (`Telemetry`), and a Prometheus endpoint for them (`Prometheus`).
 */
export * as Prometheus from "./Prometheus.js"
export * as Telemetry from "./Telemetry.js"
