/**
 * The start-report channel between a Sluice step and the harness: each report is answered once
 * the handler settles, in any order; a refusal, a failure, an abort and a lost connection reject
 * the report (so the step fails and is retried), and the next report connects again. The harness
 * learns when the step began, not when it read the line.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { epochNow } from '../latency.js';
import { ReportClient, startReportServer } from './start-reports.js';

const live = () => new AbortController().signal;

describe('start reports', () => {
  it('answers each report when its handler resolves, whatever the order', async () => {
    const seen: string[] = [];
    const releases = new Map<string, () => void>();
    const server = await startReportServer((key) => {
      seen.push(key);
      return new Promise<void>((resolve) => releases.set(key, resolve));
    });
    try {
      const client = new ReportClient(server.address);
      const done: string[] = [];
      const reports = ['job 1', 'job/2', 'job%3'].map((key) =>
        client.report(key, live()).then(() => done.push(key)),
      );
      while (releases.size < 3) await new Promise((resolve) => setTimeout(resolve, 5));
      assert.deepEqual(seen, ['job 1', 'job/2', 'job%3'], 'keys arrive as sent');
      releases.get('job%3')?.();
      releases.get('job 1')?.();
      releases.get('job/2')?.();
      await Promise.all(reports);
      assert.deepEqual(done.sort(), ['job 1', 'job%3', 'job/2']);
    } finally {
      await server.close();
    }
  });

  it('rejects a report the harness refuses or whose handler fails', async () => {
    let handle: ((key: string) => Promise<void>) | undefined;
    const server = await startReportServer((key) => handle?.(key));
    try {
      const client = new ReportClient(server.address);
      await assert.rejects(client.report('early', live()), /answered refused/);
      handle = () => Promise.reject(new Error('ledger full'));
      await assert.rejects(client.report('failing', live()), /answered failed/);
      handle = () => Promise.resolve();
      await client.report('fine', live());

      // A line whose key does not decode is refused, and the server carries on.
      const raw = connect(Number(server.address.split(':')[1]), '127.0.0.1');
      raw.setEncoding('utf8');
      const answer = new Promise<string>((resolve) => raw.once('data', resolve));
      raw.write('7 %E0%A4%A\n');
      assert.equal(await answer, '7 refused\n');
      raw.destroy();
      await client.report('still fine', live());
    } finally {
      await server.close();
    }
  });

  it("gives the handler the step's start, stamped by the step, not the line's arrival", async () => {
    const starts: { key: string; startedAt: number | undefined; receivedAt: number }[] = [];
    const server = await startReportServer((key, startedAt) => {
      starts.push({ key, startedAt, receivedAt: epochNow() });
      return Promise.resolve();
    });
    const raw = connect(Number(server.address.split(':')[1]), '127.0.0.1');
    try {
      const before = epochNow();
      await new ReportClient(server.address).report('by the client', live());
      const [fromClient] = starts;
      assert.ok(fromClient?.startedAt !== undefined, 'the client stamps its reports');
      assert.ok(
        fromClient.startedAt >= before - 1 && fromClient.startedAt <= fromClient.receivedAt,
      );

      // A step that began 250 ms before its line arrives is timed from its own start.
      raw.setEncoding('utf8');
      const answers: string[] = [];
      raw.on('data', (chunk: string) => answers.push(...chunk.split('\n').filter(Boolean)));
      const quarterSecondAgo = process.hrtime.bigint() - 250_000_000n;
      raw.write(`1 late ${quarterSecondAgo}\n`);
      // No stamp (the format before stamps): the arrival is the start, as for the peers.
      raw.write('2 unstamped\n');
      // A stamp that is not a count of nanoseconds, or lies ahead of the clock, is refused.
      raw.write(`3 bad-stamp 12ms\n4 ahead ${process.hrtime.bigint() + 60_000_000_000n}\n`);
      raw.write(`5 extra ${quarterSecondAgo} field\n`);
      const deadline = Date.now() + 10_000;
      while (answers.length < 5 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      assert.deepEqual(answers.sort(), ['1 ok', '2 ok', '3 refused', '4 refused', '5 refused']);
      const late = starts.find((s) => s.key === 'late');
      assert.ok(late?.startedAt !== undefined);
      const age = late.receivedAt - late.startedAt;
      assert.ok(age >= 250 && age < 250 + 10_000, `started ${age} ms before it was read`);
      assert.equal(starts.find((s) => s.key === 'unstamped')?.startedAt, undefined);
      assert.deepEqual(
        starts.map((s) => s.key),
        ['by the client', 'late', 'unstamped'],
      );
    } finally {
      raw.destroy();
      await server.close();
    }
  });

  it('rejects an aborted report, and every report of a lost connection; then connects again', async () => {
    // Answers the first report (so the connection is up), never another.
    let answered = 0;
    const first = await startReportServer(() =>
      answered++ === 0 ? Promise.resolve() : new Promise<void>(() => undefined),
    );
    const client = new ReportClient(first.address);
    await client.report('connected', live());
    const aborting = new AbortController();
    const aborted = client.report('aborted', aborting.signal);
    aborting.abort();
    await assert.rejects(aborted, /aborted/);
    const pending = client.report('pending', live());
    await first.close();
    await assert.rejects(pending, /closed the report connection|ECONNRESET/);

    // A new server on another port cannot be reached by this client (its address is fixed); a
    // client of it connects afresh after its own loss.
    const second = await startReportServer(() => Promise.resolve());
    try {
      const again = new ReportClient(second.address);
      await again.report('one', live());
      await assert.rejects(client.report('to the closed server', live()), /ECONNREFUSED/);
      await again.report('two', live());
    } finally {
      await second.close();
    }
  });
});
