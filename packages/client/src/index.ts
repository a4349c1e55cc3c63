/** `@resilient-ai/client` */
export {}
