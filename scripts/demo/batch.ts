/**
 * The batch of `research-brief` tasks the demo submits: every priority, sources on the fake web
 * site, and the cases worth seeing once — a request repeated with the same idempotency key, a task
 * cancelled right after creation, and a source page that does not exist.
 */
import type { Priority, TaskStatus } from '@sluice/api';

/** One task of the demo and what should become of it. */
export interface DemoTask {
  /** A few words shown in the summary. */
  readonly label: string;
  readonly priority: Priority;
  readonly topic: string;
  /** Path on the fake web site the `fetchSource` step fetches. */
  readonly sourcePath: string;
  /** Submitted twice with this key: the second answer must be the same task, not a new one. */
  readonly idempotencyKey?: string;
  /** Cancelled as soon as it is created. */
  readonly cancel?: boolean;
  /** The final status this task must reach for the demo to pass. */
  readonly expect: TaskStatus;
  /** For a task expected to fail: the step it must fail at (a failure elsewhere is a fault). */
  readonly failsAt?: string;
}

/**
 * The demo batch, in the order it is submitted: least urgent first, so that the urgent tasks,
 * submitted last, visibly overtake the queued ones. `runId` keeps idempotency keys apart between
 * runs on the same database.
 */
export function demoBatch(runId: string): DemoTask[] {
  return [
    {
      label: 'cancelled at once',
      priority: 'PRIORITY_P3',
      topic: 'a report nobody needs any more',
      sourcePath: '/',
      cancel: true,
      expect: 'TASK_STATUS_CANCELLED',
    },
    {
      label: 'nightly batch',
      priority: 'PRIORITY_P3',
      topic: 'an index of everything on the site',
      sourcePath: '/',
      expect: 'TASK_STATUS_SUCCEEDED',
    },
    {
      label: 'missing source',
      priority: 'PRIORITY_P2',
      topic: 'a page that was never published',
      sourcePath: '/articles/does-not-exist',
      expect: 'TASK_STATUS_FAILED_TERMINAL',
      failsAt: 'fetchSource',
    },
    {
      label: 'reading list',
      priority: 'PRIORITY_P2',
      topic: 'fair sharing between priorities',
      sourcePath: '/articles/priorities',
      expect: 'TASK_STATUS_SUCCEEDED',
    },
    {
      label: 'dedup (sent twice)',
      priority: 'PRIORITY_P1',
      topic: 'weekly digest of queueing notes',
      sourcePath: '/notes.txt',
      idempotencyKey: `digest-${runId}`,
      expect: 'TASK_STATUS_SUCCEEDED',
    },
    {
      label: 'team briefing',
      priority: 'PRIORITY_P1',
      topic: 'admission control for LLM calls',
      sourcePath: '/articles/backpressure',
      expect: 'TASK_STATUS_SUCCEEDED',
    },
    {
      label: 'incident review',
      priority: 'PRIORITY_P0',
      topic: 'why the checkout queue backed up this morning',
      sourcePath: '/articles/backpressure',
      expect: 'TASK_STATUS_SUCCEEDED',
    },
    {
      label: 'customer answer',
      priority: 'PRIORITY_P0',
      topic: 'how urgent requests overtake batch work',
      sourcePath: '/articles/priorities',
      expect: 'TASK_STATUS_SUCCEEDED',
    },
  ];
}
