/**
 * How a Sluice step, running in an executor process, tells the harness that its job started
 * (issue 7): one line per report on a persistent loopback TCP connection,
 * `<n> <key> <monotonic ns>\n`, answered `<n> ok\n` once the harness's handler resolved (anything
 * else is a refusal, and the step fails and is retried). Every report reaches the ledger,
 * duplicates included (which task rows would hide).
 *
 * The step stamps its start with the machine's monotonic clock (`process.hrtime`, one clock for
 * every process on the machine), so the start the harness records is when the handler began, not
 * when the harness got round to reading the line: the peers' workers run inside the harness and
 * are timed as they call its handler, and a busy harness's delay in reading a report is no part
 * of Sluice's latency.
 *
 * A line is the cheapest reliable way from another process: a `fetch` POST per report cost
 * ~300 µs of CPU between client and server (undici and node:http, 5,000 calls on this machine)
 * against ~30 µs here, CPU the harness and the executor took from the system under test; the
 * lines of one burst share a write (see writeCoalesced).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { epochNow } from '../latency.js';

/** Where the executor's steps find the harness (`host:port`). */
export const REPORT_ADDRESS_VARIABLE = 'SLUICE_BENCH_REPORT_ADDRESS';

/** The harness's end: answers each report once `onReport` settles. */
export interface ReportServer {
  /** `host:port`, for {@link REPORT_ADDRESS_VARIABLE}. */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * Told of one report: its key and when its step started (epoch ms on the clock of `epochNow`),
 * or `undefined` when the line carried no stamp. Returns `undefined` when there is no handler yet.
 */
export type ReportHandler = (
  key: string,
  startedAt: number | undefined,
) => Promise<void> | undefined;

/**
 * Listens on a loopback port. `onReport` gets each report's key and start; `undefined` (no
 * handler yet) is answered as a refusal, like a rejection, and so is a line whose key or stamp
 * does not decode.
 */
export async function startReportServer(onReport: ReportHandler): Promise<ReportServer> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    readLines(socket, (line) => {
      const [n, encodedKey, stamp, ...rest] = line.split(' ');
      const answer = (word: string) => {
        if (!socket.destroyed) writeCoalesced(socket, `${n} ${word}\n`);
      };
      const key = encodedKey === undefined ? undefined : decodedKey(encodedKey);
      const startedAt = stamp === undefined ? undefined : startOfStamp(stamp);
      const handled =
        key === undefined || startedAt === null || rest.length > 0
          ? undefined
          : onReport(key, startedAt);
      if (handled === undefined) answer('refused');
      else
        handled.then(
          () => answer('ok'),
          () => answer('failed'),
        );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const bound = server.address();
  if (bound === null || typeof bound === 'string') throw new Error('report server: no port');
  return {
    address: `127.0.0.1:${bound.port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

interface Waiting {
  resolve(): void;
  reject(error: Error): void;
}

/** The step's end: one connection, opened at the first report and again after a loss. */
export class ReportClient {
  #socket: Socket | undefined;
  #next = 0;
  readonly #waiting = new Map<number, Waiting>();

  constructor(private readonly address: string) {}

  report(key: string, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(new Error('report aborted'));
    const startedAt = process.hrtime.bigint();
    const socket = this.#connection();
    const n = ++this.#next;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => settle(new Error('report aborted'));
      const settle = (error?: Error) => {
        this.#waiting.delete(n);
        signal.removeEventListener('abort', onAbort);
        if (error) reject(error);
        else resolve();
      };
      this.#waiting.set(n, { resolve: () => settle(), reject: settle });
      signal.addEventListener('abort', onAbort, { once: true });
      writeCoalesced(socket, `${n} ${encodeURIComponent(key)} ${startedAt}\n`);
    });
  }

  #connection(): Socket {
    if (this.#socket) return this.#socket;
    const separator = this.address.lastIndexOf(':');
    const socket = connect(
      Number(this.address.slice(separator + 1)),
      this.address.slice(0, separator),
    );
    socket.setNoDelay(true);
    readLines(socket, (line) => {
      const space = line.indexOf(' ');
      const waiting = this.#waiting.get(Number(line.slice(0, space)));
      const word = line.slice(space + 1);
      if (word === 'ok') waiting?.resolve();
      else waiting?.reject(new Error(`the harness answered ${word}`));
    });
    const lost = (error?: Error) => {
      if (this.#socket !== socket) return;
      this.#socket = undefined;
      for (const waiting of [...this.#waiting.values()])
        waiting.reject(error ?? new Error('the harness closed the report connection'));
    };
    socket.on('error', lost);
    socket.on('close', () => lost());
    this.#socket = socket;
    return socket;
  }
}

/** This process's client (an executor runs for one harness). */
let client: ReportClient | undefined;

/**
 * Reports that the job `key` started, to the harness at {@link REPORT_ADDRESS_VARIABLE}; resolves
 * once the harness's handler has.
 */
export function reportStart(key: string, signal: AbortSignal): Promise<void> {
  const address = process.env[REPORT_ADDRESS_VARIABLE];
  if (!address) return Promise.reject(new Error(`${REPORT_ADDRESS_VARIABLE} is not set`));
  client ??= new ReportClient(address);
  return client.report(key, signal);
}

/**
 * The start a report's stamp (the sender's `process.hrtime.bigint()`) names, as epoch ms on the
 * clock of `epochNow`: now less the stamp's age on the monotonic clock the sender and the harness
 * share. `null` for a stamp that is not a count of nanoseconds or lies in the future (refused).
 */
function startOfStamp(stamp: string): number | null {
  if (!/^\d+$/.test(stamp)) return null;
  const ageNs = process.hrtime.bigint() - BigInt(stamp);
  if (ageNs < 0n) return null;
  return epochNow() - Number(ageNs) / 1e6;
}

/** A report's key as sent (percent-encoded), or `undefined` for a malformed one (refused). */
function decodedKey(encoded: string): string | undefined {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return undefined;
  }
}

/**
 * Writes `line` together with the others written before the current ticks and microtasks run
 * out: a group of steps starting at once sends its reports in one write, and the harness answers
 * a read's reports in one. A write per line cost the executor a loopback write per step (5 % of
 * its CPU in a drain's profile) and woke the other end as often.
 */
function writeCoalesced(socket: Socket, line: string): void {
  if (socket.writableCorked === 0) {
    socket.cork();
    process.nextTick(() => socket.uncork());
  }
  socket.write(line);
}

/** Calls `onLine` for each `\n`-terminated line the socket receives. */
function readLines(socket: Socket, onLine: (line: string) => void): void {
  let buffered = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      onLine(line);
    }
  });
}
