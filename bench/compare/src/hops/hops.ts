/**
 * The single hops a task's path is made of, timed on this machine with nothing else in them: a
 * gRPC call, a Postgres round trip, a Postgres commit, a NATS message, a JetStream publish with its
 * ack and a JetStream delivery. Each is timed idle (one at a time, a gap apart, as an idle stack
 * meets it: every hop wakes a sleeping process) and busy (back to back). paths.ts adds them up into
 * the floor of a path, such as Sluice's create → handler start.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { credentials, makeGenericClientConstructor, type Client } from '@grpc/grpc-js';
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  StorageType,
  type ConsumerMessages,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import postgres from 'postgres';
import { closeNats, connectNats } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import { createTestDatabase, type TestDatabase } from '@sluice/db/testing';
import { readProcess } from '../footprint-sampler.js';
import { epochNow, summarize, type LatencySummary } from '../latency.js';
import { machineNatsServer } from '../systems/footprint-processes.js';
import { ECHO_SERVICE } from './grpc-echo.js';

export const HOP_NAMES = [
  'grpc',
  'pg-read',
  'pg-commit',
  'nats',
  'jetstream-publish',
  'jetstream-delivery',
] as const;
export type HopName = (typeof HOP_NAMES)[number];

/** What each hop times. */
export const HOP_DESCRIPTIONS: Readonly<Record<HopName, string>> = {
  grpc: 'grpc-js unary call to another process, 200 bytes each way (round trip)',
  'pg-read': 'Postgres `select 1` (round trip)',
  'pg-commit': 'Postgres one-row insert that commits on its own (round trip, WAL flushed)',
  nats: 'core NATS publish → subscriber on another connection (one way)',
  'jetstream-publish': 'JetStream publish with ack, file stream (round trip)',
  'jetstream-delivery': 'JetStream publish → a waiting pull consumer has it (one way)',
};

/** Bytes of each payload (a small request, like a task's create). */
const PAYLOAD_BYTES = 200;
/** Passes run and dropped before each timing, so connections and statements are warm. */
const WARM_UP_PASSES = 5;

/**
 * Back-to-back passes whose CPU time is read, per timed pass: /proc counts CPU in clock ticks (10
 * ms), so a hop of a few tenths of a millisecond needs thousands of passes to be counted well.
 */
const CPU_PASSES_PER_TIMED_PASS = 10;

/** A hop that is set up: `pass` runs it once and resolves with its milliseconds. */
interface OpenHop {
  pass(): Promise<number>;
  /** The processes on the hop's far side (the gRPC server, the Postgres backend, nats-server). */
  readonly serverPids: readonly number[];
  close(): Promise<void>;
}

/** CPU time of one pass (busy), on each side. */
export interface HopCpu {
  /** This process: the client's side (both ends of a NATS message). */
  readonly clientMs: number;
  /** The far side's processes (see {@link OpenHop.serverPids}). */
  readonly serverMs: number;
}

export interface HopFigures {
  readonly name: HopName;
  /** One at a time, `idleGapMs` apart. */
  readonly idle: LatencySummary;
  /** Back to back. */
  readonly busy: LatencySummary;
  readonly cpu: HopCpu;
}

export interface MeasureHopsOptions {
  /** Timed passes of each hop, idle and again busy. */
  readonly count: number;
  /** Pause before each idle pass. */
  readonly idleGapMs: number;
  readonly hops?: readonly HopName[];
  /** Told when a hop starts (progress). */
  readonly onHop?: (name: HopName) => void;
  /**
   * Stops the timing (Ctrl-C): the hop open then is closed (its database dropped, its stream
   * deleted) and the measurement rejects with the signal's reason.
   */
  readonly signal?: AbortSignal;
}

export async function measureHops(options: MeasureHopsOptions): Promise<HopFigures[]> {
  const figures: HopFigures[] = [];
  const { signal } = options;
  /** A pass, unless the measurement was stopped. */
  const passOf = (hop: OpenHop) => {
    signal?.throwIfAborted();
    return hop.pass();
  };
  for (const name of options.hops ?? HOP_NAMES) {
    signal?.throwIfAborted();
    options.onHop?.(name);
    const hop = await OPENERS[name]();
    try {
      for (let i = 0; i < WARM_UP_PASSES; i += 1) await passOf(hop);
      const idle: number[] = [];
      for (let i = 0; i < options.count; i += 1) {
        await sleep(options.idleGapMs, undefined, { signal });
        idle.push(await passOf(hop));
      }
      const busy: number[] = [];
      for (let i = 0; i < options.count; i += 1) busy.push(await passOf(hop));
      const cpu = await cpuPerPass(
        { ...hop, pass: () => passOf(hop) },
        options.count * CPU_PASSES_PER_TIMED_PASS,
      );
      figures.push({ name, idle: summaryOf(name, idle), busy: summaryOf(name, busy), cpu });
    } finally {
      await hop.close();
    }
  }
  return figures;
}

async function cpuPerPass(hop: OpenHop, passes: number): Promise<HopCpu> {
  const serverSeconds = () =>
    hop.serverPids.reduce((sum, pid) => sum + (readProcess(pid)?.cpuSeconds ?? 0), 0);
  const serverBefore = serverSeconds();
  const clientBefore = process.cpuUsage();
  for (let i = 0; i < passes; i += 1) await hop.pass();
  const client = process.cpuUsage(clientBefore);
  const serverAfter = serverSeconds();
  return {
    clientMs: (client.user + client.system) / 1_000 / passes,
    serverMs: ((serverAfter - serverBefore) * 1_000) / passes,
  };
}

function summaryOf(name: HopName, samples: number[]): LatencySummary {
  const summary = summarize(samples);
  if (!summary) throw new Error(`hop ${name}: no samples (count must be at least 1)`);
  return summary;
}

/** Times `work` from now to when it resolves. */
async function timed(work: () => Promise<unknown>): Promise<number> {
  const start = epochNow();
  await work();
  return epochNow() - start;
}

/**
 * What an opener has set up so far (a database, a connection, a stream …), undone in reverse: by
 * the hop's `close`, or at once when a later step of the opening fails, so that a failed open
 * leaves nothing behind.
 */
class SetUp {
  private readonly undo: Array<() => Promise<unknown>> = [];

  /** `step` undoes what was just set up. */
  add(step: () => Promise<unknown>): void {
    this.undo.push(step);
  }

  /** Undoes everything, every step even after one failed; rejects with the first failure. */
  async close(): Promise<void> {
    const failures: unknown[] = [];
    for (const step of this.undo.splice(0).reverse()) {
      await step().catch((error: unknown) => failures.push(error));
    }
    if (failures.length > 0) throw failures[0];
  }
}

/** Runs `open`; when it fails, undoes what it had set up before rethrowing. */
async function opening(open: (setUp: SetUp) => Promise<OpenHop>): Promise<OpenHop> {
  const setUp = new SetUp();
  try {
    return await open(setUp);
  } catch (error) {
    // The open's own error is the one to report; one from undoing would hide it.
    await setUp.close().catch(() => undefined);
    throw error;
  }
}

const OPENERS: Readonly<Record<HopName, () => Promise<OpenHop>>> = {
  grpc: openGrpcHop,
  'pg-read': () => openPostgresHop((sql) => sql`select 1`),
  'pg-commit': () =>
    openPostgresHop(
      (sql) => sql`insert into hops (payload) values (${PAYLOAD})`,
      (sql) =>
        sql`create table hops (id bigint generated always as identity primary key, payload text)`,
    ),
  nats: openNatsHop,
  'jetstream-publish': () => openJetStreamHop('publish'),
  'jetstream-delivery': () => openJetStreamHop('delivery'),
};

const PAYLOAD = 'x'.repeat(PAYLOAD_BYTES);

/** The echo method as the generic client exposes it. */
interface EchoMethod {
  echo(request: Buffer, callback: (error: Error | null) => void): void;
}

async function openGrpcHop(): Promise<OpenHop> {
  const serverFile = fileURLToPath(new URL('./grpc-echo-server.ts', import.meta.url));
  const server: ChildProcess = fork(serverFile, [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = once(server, 'exit');
  const [message] = (await Promise.race([
    once(server, 'message'),
    exited.then(([code]) => {
      throw new Error(`the gRPC echo server exited (${String(code)}) before it listened`);
    }),
  ])) as [{ port: number }];
  const EchoClient = makeGenericClientConstructor(ECHO_SERVICE, 'Echo');
  const client = new EchoClient(
    `127.0.0.1:${message.port}`,
    credentials.createInsecure(),
  ) as unknown as Client & EchoMethod;
  const request = Buffer.from(PAYLOAD);
  const echo = (): Promise<void> =>
    new Promise((resolve, reject) => {
      client.echo(request, (error) => (error ? reject(error) : resolve()));
    });
  return {
    pass: () => timed(echo),
    serverPids: server.pid === undefined ? [] : [server.pid],
    async close() {
      client.close();
      server.kill();
      await exited;
    },
  };
}

/** A Postgres hop on a fresh database: `setup` runs once (e.g. creates the table written to). */
export function openPostgresHop(
  statement: (sql: postgres.Sql) => Promise<unknown>,
  setup?: (sql: postgres.Sql) => Promise<unknown>,
): Promise<OpenHop> {
  return opening(async (setUp) => {
    const database: TestDatabase = await createTestDatabase();
    setUp.add(() => database.drop());
    const sql = postgres(database.url, { max: 1, onnotice: () => undefined });
    setUp.add(() => sql.end());
    await setup?.(sql);
    const [backend] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
    return {
      pass: () => timed(() => statement(sql)),
      serverPids: backend === undefined ? [] : [backend.pid],
      close: () => setUp.close(),
    };
  });
}

function openNatsHop(): Promise<OpenHop> {
  return opening(async (setUp) => {
    const token = randomBytes(4).toString('hex');
    const subject = `bench.hops.${token}`;
    const sender = await connectNats({ url: natsUrl(), name: `bench-hops-send-${token}` });
    setUp.add(() => closeNats(sender));
    const receiver = await connectNats({ url: natsUrl(), name: `bench-hops-receive-${token}` });
    setUp.add(() => closeNats(receiver));
    let arrived: (() => void) | undefined;
    receiver.subscribe(subject, { callback: () => arrived?.() });
    // The subscription reaches the server before the first publish.
    await receiver.flush();
    const payload = Buffer.from(PAYLOAD);
    const serverPids = await natsServerPids();
    return {
      pass: () =>
        timed(
          () =>
            new Promise<void>((resolve) => {
              arrived = resolve;
              sender.publish(subject, payload);
            }),
        ),
      serverPids,
      close: () => setUp.close(),
    };
  });
}

/** A JetStream hop on a stream of its own; delivery's durable pull consumer is `durable`. */
export function openJetStreamHop(kind: 'publish' | 'delivery', durable = 'hops'): Promise<OpenHop> {
  return opening(async (setUp) => {
    const token = randomBytes(4).toString('hex');
    const stream = `BENCH_HOPS_${token}`;
    const subject = `bench.hops.${token}`;
    const nc: NatsConnection = await connectNats({ url: natsUrl(), name: `bench-hops-${token}` });
    setUp.add(() => closeNats(nc));
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [subject], storage: StorageType.File });
    setUp.add(() => jsm.streams.delete(stream));
    const js = jetstream(nc);
    const payload = Buffer.from(PAYLOAD);
    const serverPids = await natsServerPids();
    if (kind === 'publish') {
      return {
        pass: () => timed(() => js.publish(subject, payload)),
        serverPids,
        close: () => setUp.close(),
      };
    }
    // Delivery: a durable pull consumer with a pull waiting, as an idle executor has one.
    await jsm.consumers.add(stream, { durable_name: durable, ack_policy: AckPolicy.None });
    const consumer = await js.consumers.get(stream, durable);
    const messages: ConsumerMessages = await consumer.consume({ max_messages: 1, expires: 5_000 });
    let arrived: (() => void) | undefined;
    const reading = (async () => {
      for await (const message of messages) {
        void message;
        arrived?.();
      }
    })();
    setUp.add(async () => {
      await messages.close();
      await reading;
    });
    return {
      pass: () =>
        timed(
          () =>
            new Promise<void>((resolve, reject) => {
              arrived = resolve;
              js.publish(subject, payload).catch(reject);
            }),
        ),
      serverPids,
      close: () => setUp.close(),
    };
  });
}

/** The machine's nats-server processes (the hop's far side; shared, so keep the machine quiet). */
async function natsServerPids(): Promise<number[]> {
  return (await machineNatsServer()).map((server) => server.pid);
}
