/** Types of nats.mjs, for the TypeScript tests that use it. */

/** A NATS server with JetStream that a script uses. */
export interface EnsuredNats {
  readonly name: 'nats';
  readonly url: string;
  /** Whether this process started it (and `stop` ends it). */
  readonly private: boolean;
  stop(): Promise<void>;
}

export function ensureNats(options?: { needBinary?: boolean }): Promise<EnsuredNats>;

export function startPrivateNats(): Promise<EnsuredNats>;
