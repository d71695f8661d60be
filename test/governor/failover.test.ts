/**
 * The governor's leadership against the machine's real NATS and Postgres: two replicas as separate
 * processes, the leader killed without a chance to clean up, the standby taking over once the lease
 * expires; a clean stop handing the lease over; a bad configuration refused at start; and, in
 * process, the fencing of decision writes by the Postgres leader epoch.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after, describe, it, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { closeNats, connectNats, createBusCatalog, type BusCatalog } from '@sluice/bus';
import { natsUrl, uniquePrefix } from '@sluice/bus/testing';
import { migrateDatabase } from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { createLogger } from '@sluice/telemetry';
import { startGovernor, GOVERNOR_LEASE_KEY } from '../../services/governor/src/app.js';
import { loadGovernorConfig } from '../../services/governor/src/config.js';
import {
  DECISIONS_KEY,
  decodeDecision,
  encodeDecision,
  normalDecision,
  type GovernorDecision,
} from '@sluice/bus';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = fileURLToPath(new URL('../../services/governor/src/main.ts', import.meta.url));
const LEASE_TTL_MS = 1_500;
const INTERVAL_MS = 200;
/** How long a standby may take to lead once the leader is gone (a TTL and a retry, with margin). */
const TAKEOVER_DEADLINE_MS = 10_000;
/** Starting a process through tsx, migrating and connecting. */
const START_DEADLINE_MS = 20_000;
const POLL_MS = 25;

/** One JSON log line of a governor process. */
interface LogLine {
  readonly msg?: string;
  readonly epoch?: number;
  readonly holder?: string;
  readonly [field: string]: unknown;
}

/** Every child this file started, killed in `after` whatever happened. */
const children = new Set<ChildProcess>();
after(() => {
  for (const child of children) child.kill('SIGKILL');
});

/** A governor running as `node --import tsx services/governor/src/main.ts`. */
class GovernorProcess {
  readonly lines: LogLine[] = [];
  stderr = '';
  readonly child: ChildProcess;
  /** Settles when the process has exited and its output is read to the end. */
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly name: string,
    env: Record<string, string>,
  ) {
    this.child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(this.child);
    const { stdout, stderr } = this.child;
    if (stdout === null || stderr === null) throw new Error('child without pipes');
    createInterface({ input: stdout }).on('line', (line) => {
      try {
        this.lines.push(JSON.parse(line) as LogLine);
      } catch {
        this.lines.push({ msg: `(not JSON) ${line}` });
      }
    });
    stderr.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.closed = new Promise((resolve) => {
      this.child.once('close', (code, signal) => {
        children.delete(this.child);
        resolve({ code, signal });
      });
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  logged(msg: string): LogLine[] {
    return this.lines.filter((line) => line.msg === msg);
  }

  /** For failure messages: what the process said. */
  describe(): string {
    const out = this.lines.map((line) => JSON.stringify(line)).join('\n');
    return `--- ${this.name} stdout ---\n${out}\n--- ${this.name} stderr ---\n${this.stderr}`;
  }

  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }
}

/** Polls `probe` until it returns a value other than `undefined`, or fails after `timeoutMs`. */
async function waitFor<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  context: () => string = () => '',
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${context()}`);
    }
    await delay(POLL_MS);
  }
}

/** The decision stored in KV now, if any. */
async function storedDecision(kv: KV): Promise<GovernorDecision | undefined> {
  const entry = await kv.get(DECISIONS_KEY);
  return entry?.operation === 'PUT' ? decodeDecision(entry.value) : undefined;
}

/** Everything one test owns: a migrated database, a name prefix, a NATS connection. */
class Fixture implements AsyncDisposable {
  readonly processes: GovernorProcess[] = [];
  private readonly subscriptions: Subscription[] = [];

  private constructor(
    readonly db: TestDatabase,
    readonly prefix: string,
    readonly catalog: BusCatalog,
    readonly nc: NatsConnection,
  ) {}

  static async create(): Promise<Fixture> {
    const template = await migratedTemplate(migrateDatabase);
    const db = await createTestDatabase({ template });
    try {
      const prefix = uniquePrefix('governor');
      const nc = await connectNats({ url: natsUrl(), name: 'governor-failover-test' });
      return new Fixture(db, prefix, createBusCatalog(prefix), nc);
    } catch (error) {
      await db.drop();
      throw error;
    }
  }

  env(overrides: Record<string, string> = {}): Record<string, string> {
    return {
      NATS_URL: natsUrl(),
      DATABASE_URL: this.db.url,
      SLUICE_PREFIX: this.prefix,
      SLUICE_LEASE_TTL_MS: String(LEASE_TTL_MS),
      SLUICE_GOVERNOR_INTERVAL_MS: String(INTERVAL_MS),
      SLUICE_LOG_LEVEL: 'info',
      SLUICE_METRICS_PORT: '0',
      ...overrides,
    };
  }

  spawn(name: string, overrides: Record<string, string> = {}): GovernorProcess {
    const governor = new GovernorProcess(name, this.env(overrides));
    this.processes.push(governor);
    return governor;
  }

  describe(): string {
    return this.processes.map((p) => p.describe()).join('\n');
  }

  /** Opens a bucket the governors created (binding does not create it). */
  bucket(name: string): Promise<KV> {
    return new Kvm(this.nc).open(name);
  }

  /** Decoded decisions announced on the governor subject from now on. */
  announcements(): GovernorDecision[] {
    const received: GovernorDecision[] = [];
    this.subscriptions.push(
      this.nc.subscribe(this.catalog.subjects.governorDecisions, {
        callback: (err, msg) => {
          if (err === null) received.push(decodeDecision(msg.data));
        },
      }),
    );
    return received;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const p of this.processes) if (p.running) p.kill('SIGKILL');
    await Promise.all(this.processes.map((p) => p.closed));
    for (const subscription of this.subscriptions) subscription.unsubscribe();
    try {
      const jsm = await jetstreamManager(this.nc);
      const { buckets, streams } = this.catalog;
      const names = [`KV_${buckets.leases}`, `KV_${buckets.governor}`, ...Object.values(streams)];
      for (const name of names) {
        try {
          await jsm.streams.delete(name);
        } catch (error) {
          if (!(error instanceof JetStreamApiError)) throw error; // not found: never created
        }
      }
    } finally {
      await closeNats(this.nc);
      await this.db.drop();
    }
  }
}

describe('governor failover', () => {
  it('kills the leading governor and sees another replica take the lease', async (t: TestContext) => {
    await using fx = await Fixture.create();
    const announced = fx.announcements();
    const a = fx.spawn('a');
    const b = fx.spawn('b');
    const both = [a, b];
    const context = () => fx.describe();
    const noneDied = () => {
      const dead = both.find((p) => !p.running);
      if (dead) throw new Error(`governor ${dead.name} exited early\n${context()}`);
    };

    await waitFor(
      'both governors to start and one to lead',
      () => {
        noneDied();
        const started = both.every((p) => p.logged('governor started').length === 1);
        return started && both.some((p) => p.logged('governor lease acquired').length > 0)
          ? true
          : undefined;
      },
      START_DEADLINE_MS,
      context,
    );
    const leaders = both.filter((p) => p.logged('governor lease acquired').length > 0);
    assert.equal(leaders.length, 1, `exactly one governor leads\n${context()}`);
    const leader = leaders[0] as GovernorProcess;
    const standby = leader === a ? b : a;
    const [firstTenure] = leader.logged('governor lease acquired');
    assert.ok(firstTenure, 'the leader logged its tenure');
    const firstEpoch = firstTenure.epoch;
    assert.ok(typeof firstEpoch === 'number' && firstEpoch >= 1, 'the tenure has an epoch');
    assert.equal(typeof firstTenure.holder, 'string');

    const decisions = await fx.bucket(fx.catalog.buckets.governor);
    const firstDoc = await waitFor(
      "the leader's decision in KV",
      async () => {
        const doc = await storedDecision(decisions);
        return doc?.epoch === firstEpoch ? doc : undefined;
      },
      TAKEOVER_DEADLINE_MS,
      context,
    );
    assert.equal(firstDoc.holder, firstTenure.holder);
    assert.equal(firstDoc.level, 'normal');
    assert.deepEqual(firstDoc.holds, []);
    assert.deepEqual(firstDoc.reject, []);
    await waitFor(
      "the leader's decision announced on the subject",
      () => (announced.some((d) => d.epoch === firstEpoch) ? true : undefined),
      TAKEOVER_DEADLINE_MS,
      context,
    );
    assert.equal(standby.logged('governor lease acquired').length, 0, 'the standby stands by');

    // A crash: no clean stop, so the lease key stays until the bucket's TTL removes it.
    const killedAt = performance.now();
    leader.kill('SIGKILL');
    const killed = await leader.closed;
    assert.equal(killed.signal, 'SIGKILL');

    const secondTenure = await waitFor(
      'the standby to take the lease',
      () => {
        if (!standby.running) throw new Error(`the standby exited\n${context()}`);
        return standby.logged('governor lease acquired')[0];
      },
      TAKEOVER_DEADLINE_MS,
      context,
    );
    t.diagnostic(`standby took over ${Math.round(performance.now() - killedAt)} ms after the kill`);
    const secondEpoch = secondTenure.epoch;
    assert.ok(
      typeof secondEpoch === 'number' && secondEpoch > firstEpoch,
      `the new epoch ${secondEpoch} is greater than ${firstEpoch}`,
    );
    assert.notEqual(secondTenure.holder, firstTenure.holder);

    const secondDoc = await waitFor(
      "the new leader's decision in KV",
      async () => {
        const doc = await storedDecision(decisions);
        return doc?.epoch === secondEpoch ? doc : undefined;
      },
      TAKEOVER_DEADLINE_MS,
      context,
    );
    assert.equal(secondDoc.holder, secondTenure.holder);
    assert.equal(secondDoc.level, 'normal');

    // A clean stop hands the lease over: the key is deleted rather than left to expire.
    standby.kill('SIGTERM');
    const { code } = await waitFor(
      'the survivor to exit after SIGTERM',
      () => (standby.running ? undefined : standby.closed),
      START_DEADLINE_MS,
      context,
    );
    assert.equal(code, 0, `the survivor exits 0\n${context()}`);
    const leases = await fx.bucket(fx.catalog.buckets.leases);
    const lease = await leases.get(GOVERNOR_LEASE_KEY);
    assert.ok(lease === null || lease.operation !== 'PUT', 'a clean stop released the lease');
  });

  for (const [variable, value] of [
    ['SLUICE_LEASE_TTL_MS', 'abc'],
    ['SLUICE_LEASE_TTL_MS', '500'],
    ['SLUICE_GOVERNOR_INTERVAL_MS', '-1'],
  ] as const) {
    it(`refuses to start with ${variable}=${value}: exit code 2, one line naming it`, async () => {
      await using fx = await Fixture.create();
      const governor = fx.spawn('bad-config', { [variable]: value });
      const { code } = await waitFor(
        'the process to exit',
        () => (governor.running ? undefined : governor.closed),
        START_DEADLINE_MS,
        () => fx.describe(),
      );
      assert.equal(code, 2, fx.describe());
      const lines = governor.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, `one stderr line, got:\n${governor.stderr}`);
      assert.match(lines[0] ?? '', new RegExp(`\\b${variable}\\b`));
      assert.equal(governor.logged('governor started').length, 0);
    });
  }
});

describe('governor fencing (in process)', () => {
  /** A governor in this process, its log lines kept for assertions. */
  async function startInProcess(fx: Fixture) {
    const lines: LogLine[] = [];
    const log = createLogger({
      service: 'governor',
      level: 'debug',
      destination: { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) },
    });
    const governor = await startGovernor(loadGovernorConfig(fx.env()), log);
    const context = () => lines.map((line) => JSON.stringify(line)).join('\n');
    return { governor, lines, context };
  }

  it('stops acting when a greater epoch is found in the decisions', async () => {
    await using fx = await Fixture.create();
    const { governor, lines, context } = await startInProcess(fx);
    try {
      const epoch = await waitFor(
        'the governor to lead',
        () => governor.epoch(),
        START_DEADLINE_MS,
      );
      const decisions = await fx.bucket(fx.catalog.buckets.governor);
      await waitFor(
        'its decision in KV',
        async () => ((await storedDecision(decisions))?.epoch === epoch ? true : undefined),
        TAKEOVER_DEADLINE_MS,
        context,
      );

      // A newer leader (as after a partition) wrote its decision; ours must not replace it.
      const newer = normalDecision(epoch + 100, 'governor-newer');
      await decisions.put(DECISIONS_KEY, encodeDecision(newer));
      await waitFor(
        'the governor to see it is deposed',
        () => (governor.isLeader() ? undefined : true),
        TAKEOVER_DEADLINE_MS,
        context,
      );
      assert.equal(governor.epoch(), undefined);
      const deposed = lines.find((line) => line.msg?.startsWith('governor deposed'));
      assert.ok(deposed, `logged the deposal\n${context()}`);
      assert.equal(deposed.newer_epoch, epoch + 100);
      assert.deepEqual(await storedDecision(decisions), newer, 'the newer decision stands');
    } finally {
      await governor.stop();
    }
  });

  it('withdraws the gauges only a leader reports once its lease is taken', async () => {
    await using fx = await Fixture.create();
    const { governor, context } = await startInProcess(fx);
    const scrape = async () =>
      (await fetch(`http://127.0.0.1:${governor.metricsPort}/metrics`)).text();
    const signals = /^sluice_governor_signal\{/m;
    let hold: NodeJS.Timeout | undefined;
    try {
      await waitFor('the governor to lead', () => governor.epoch(), START_DEADLINE_MS);
      await waitFor(
        'the leader to report its signals',
        async () => (signals.test(await scrape()) ? true : undefined),
        TAKEOVER_DEADLINE_MS,
        context,
      );
      // Another holder takes the lease and keeps it while the standby's metrics are read.
      const leases = await fx.bucket(fx.catalog.buckets.leases);
      const takeLease = () =>
        leases.put(
          GOVERNOR_LEASE_KEY,
          JSON.stringify({ holder: 'someone-else', acquired_at: new Date().toISOString() }),
        );
      await takeLease();
      hold = setInterval(() => void takeLease().catch(() => undefined), LEASE_TTL_MS / 5);
      await waitFor(
        'the governor to lose the lease',
        () => (governor.isLeader() ? undefined : true),
        TAKEOVER_DEADLINE_MS,
        context,
      );
      // A standby exporting its last readings would show them (a reject level, a backlog) beside
      // the new leader's on every dashboard that takes the max over the replicas.
      let scraped = '';
      const text = await waitFor(
        'the standby to withdraw the signals',
        async () => {
          scraped = await scrape();
          return signals.test(scraped) ? undefined : scraped;
        },
        2_000,
        () => `${scraped}\n${context()}`,
      );
      assert.match(text, /^sluice_governor_level 0$/m);
      assert.doesNotMatch(
        text,
        /^sluice_(queue_depth_by_priority|resource_limit|breaker_state)\{/m,
      );
    } finally {
      clearInterval(hold);
      await governor.stop();
    }
  });

  it('stops at once when its lease is taken, and leads again with a new epoch', async () => {
    await using fx = await Fixture.create();
    const { governor, lines, context } = await startInProcess(fx);
    try {
      const epoch = await waitFor(
        'the governor to lead',
        () => governor.epoch(),
        START_DEADLINE_MS,
      );
      // Overwrite the lease as if another holder had it: the next renewal's compare-and-set fails.
      const leases = await fx.bucket(fx.catalog.buckets.leases);
      await leases.put(
        GOVERNOR_LEASE_KEY,
        JSON.stringify({ holder: 'someone-else', acquired_at: new Date().toISOString() }),
      );
      await waitFor(
        'the governor to lose the lease',
        () => (governor.isLeader() ? undefined : true),
        TAKEOVER_DEADLINE_MS,
        context,
      );
      const lost = lines.find((line) => line.msg === 'governor lease lost');
      assert.equal(lost?.reason, 'superseded', context());

      // Nobody renews the foreign entry, so it expires and the governor takes the lease again.
      const next = await waitFor(
        'the governor to lead again',
        () => governor.epoch(),
        TAKEOVER_DEADLINE_MS,
        context,
      );
      assert.ok(next > epoch, `new epoch ${next} > ${epoch}`);
      const decisions = await fx.bucket(fx.catalog.buckets.governor);
      await waitFor(
        'the new tenure to write its decision',
        async () => ((await storedDecision(decisions))?.epoch === next ? true : undefined),
        TAKEOVER_DEADLINE_MS,
        context,
      );
    } finally {
      await governor.stop();
    }
  });
});
