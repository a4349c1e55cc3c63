/** `@resilient-ai/testing` */
export {}
