/** Types of server-loss.mjs, for the TypeScript tests that use it. */
import type { Listener } from './listener.mjs';

/** A server and the process that served it when the run started. */
export interface NotedServer {
  readonly name: string;
  readonly listener?: Listener;
}

export function noteServer(server: { readonly name: string; readonly port?: number }): NotedServer;

export function explainLoss(
  noted: NotedServer,
  options?: { readKernelLog?: () => string | undefined },
): string[];
