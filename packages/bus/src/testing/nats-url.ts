/** The server the tests of this run share: NATS_URL (set by `npm test`), else the local default. */
export function natsUrl(): string {
  return process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
}
