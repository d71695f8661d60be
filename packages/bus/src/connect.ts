/**
 * Connecting to NATS the way every Sluice service does, and closing within a bound.
 */
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { SluiceError } from '@sluice/core';

/** The oldest nats-server Sluice runs on: JetStream work queues, KV CAS and the 2.9 consumer API. */
export const MIN_SERVER_VERSION = '2.9.0';

/** How long {@link closeNats} waits for a drain before closing hard. */
export const DEFAULT_CLOSE_TIMEOUT_MS = 5_000;

/** Options of {@link connectNats}. */
export interface ConnectNatsOptions {
  /**
   * Server URL(s): one URL, several separated by commas (`NATS_URL` style), or an array. All
   * members of a cluster should be listed.
   */
  readonly url: string | readonly string[];
  /** Connection name shown by the server's monitoring, e.g. `scheduler-<pid>`. */
  readonly name: string;
  readonly user?: string;
  readonly pass?: string;
  readonly token?: string;
}

/**
 * Connects to NATS and checks the server version.
 *
 * The connection keeps reconnecting forever (`maxReconnectAttempts: -1`), and the first connect
 * waits for a server that is still starting instead of failing at once with ECONNREFUSED
 * (`waitOnFirstConnect`), so this promise settles only once a server answered.
 *
 * @throws SluiceError `failed_precondition` when the server is older than
 *   {@link MIN_SERVER_VERSION} or has JetStream disabled (the connection is closed first).
 */
export async function connectNats(options: ConnectNatsOptions): Promise<NatsConnection> {
  const servers = (typeof options.url === 'string' ? options.url.split(',') : [...options.url])
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  const nc = await connect({
    servers,
    name: options.name,
    waitOnFirstConnect: true,
    maxReconnectAttempts: -1,
    // Every request (each JetStream publish and ack) would otherwise build an Error up front to
    // keep where it started: about 1 % of a busy service's CPU (issue 7 profile). A timeout still
    // says what timed out.
    noAsyncTraces: true,
    ...(options.user === undefined ? {} : { user: options.user }),
    ...(options.pass === undefined ? {} : { pass: options.pass }),
    ...(options.token === undefined ? {} : { token: options.token }),
  });
  const problem = serverProblem(nc.info?.version, nc.info?.jetstream);
  if (problem !== undefined) {
    await nc.close();
    throw new SluiceError('failed_precondition', problem);
  }
  return nc;
}

/**
 * Why a server cannot host Sluice; `undefined` when it can.
 *
 * @param version the server's reported version, e.g. `2.9.10`
 * @param jetstream whether the server announced JetStream
 */
export function serverProblem(
  version: string | undefined,
  jetstream: boolean | undefined,
): string | undefined {
  const have = version === undefined ? undefined : parseVersion(version);
  if (have === undefined) return `nats-server reported an unreadable version "${version}"`;
  if (compareVersions(have, parseVersion(MIN_SERVER_VERSION) ?? [0, 0, 0]) < 0) {
    return `nats-server ${version} is too old: Sluice needs ${MIN_SERVER_VERSION} or newer`;
  }
  if (jetstream !== true)
    return `nats-server ${version} has JetStream disabled (start it with -js)`;
  return undefined;
}

type Version = readonly [number, number, number];

/** `2.9.10` or `v2.10.0-RC.1` → `[2, 9, 10]`; a pre-release counts as its release. */
function parseVersion(text: string): Version | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(text.trim());
  if (m === null) return undefined;
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

function compareVersions(a: Version, b: Version): number {
  for (let i = 0; i < 3; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * Drains a connection (subscriptions finish their buffered messages, pending publishes flush) and
 * closes it; if the drain takes longer than `timeoutMs`, closes it at once. Safe to call on a
 * connection that is already closed or draining.
 */
export async function closeNats(
  nc: NatsConnection,
  timeoutMs: number = DEFAULT_CLOSE_TIMEOUT_MS,
): Promise<void> {
  if (nc.isClosed()) return;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const drained = (nc.isDraining() ? nc.closed() : nc.drain()).then(
    () => 'drained' as const,
    // A drain that fails (e.g. the connection dropped meanwhile) still has to end in close().
    () => 'failed' as const,
  );
  try {
    const outcome = await Promise.race([drained, timedOut]);
    if (outcome !== 'drained' && !nc.isClosed()) await nc.close();
  } finally {
    clearTimeout(timer);
  }
}
