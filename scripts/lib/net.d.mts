/** Types of net.mjs, for the TypeScript tests that use it. */

export function freePort(): Promise<number>;

export function probeTcp(target: {
  host: string;
  port: number;
  timeoutMs?: number;
  expectGreeting?: boolean;
}): Promise<string>;

export function canConnect(host: string, port: number, timeoutMs?: number): Promise<boolean>;

export function readNatsInfo(
  host: string,
  port: number,
  timeoutMs?: number,
): Promise<Record<string, unknown>>;

export function waitFor<T>(
  check: () => Promise<T | undefined | false>,
  options: { what: string; timeoutMs?: number; intervalMs?: number },
): Promise<T>;
