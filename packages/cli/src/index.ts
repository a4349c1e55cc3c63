/** `@resilient-ai/cli` */
export {}
