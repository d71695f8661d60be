import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { toTimestamp, type DeadLetter } from '@sluice/api';
import {
  eventDataDetails,
  formatDuration,
  formatPercent,
  formatProgress,
  formatQueue,
  formatRelative,
  formatTaskError,
  formatTimestamp,
  renderActionResult,
  renderDeadLetterTable,
  renderServiceError,
  renderTask,
  renderTaskTable,
  renderWatchEnd,
  renderWatchLine,
  snapshotDetails,
  statusWord,
} from './format.js';
import { CREATED, TASK_ID, eventWith, taskWith } from './test-fixtures.js';

const NOW = new Date(CREATED.getTime() + 60_000);
const at = (msAfterCreation: number) => toTimestamp(new Date(CREATED.getTime() + msAfterCreation));

/** The value of a `label  value` line of `renderTask`, or undefined when the line is absent. */
function fieldOf(text: string, label: string): string | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${label} `));
  return line?.slice(10);
}

describe('formatDuration', () => {
  const cases: [number, string][] = [
    [0, '0ms'],
    [850, '850ms'],
    [4_250, '4.2s'],
    [9_999, '9.9s'],
    [10_000, '10s'],
    [59_999, '59s'],
    [185_000, '3m 05s'],
    [7_800_000, '2h 10m'],
    [273_600_000, '3d 4h'],
    [-4_000, '4.0s'],
  ];
  for (const [ms, text] of cases)
    it(`${ms} ms → ${text}`, () => assert.equal(formatDuration(ms), text));
});

describe('small formats', () => {
  it('percent rounds and clamps', () => {
    assert.equal(formatPercent(0.425), '43%');
    assert.equal(formatPercent(1.7), '100%');
    assert.equal(formatPercent(-1), '0%');
    assert.equal(formatPercent(Number.NaN), '0%');
  });
  it('progress shows nothing until something was reported, and quotes the message', () => {
    assert.equal(formatProgress(0, ''), '');
    assert.equal(formatProgress(0.5, ''), '50%');
    assert.equal(formatProgress(0, 'starting'), '0% "starting"');
    assert.equal(formatProgress(0.25, 'line\nbreak "x"'), '25% "line break \\"x\\""');
  });
  it('timestamps are UTC without milliseconds; relative times say in / ago', () => {
    assert.equal(formatTimestamp(at(123)), '2026-01-02T03:04:05Z');
    assert.equal(formatTimestamp(null), '-');
    assert.equal(formatRelative(at(60_000 + 185_000), NOW), 'in 3m 05s');
    assert.equal(formatRelative(at(30_000), NOW), '30s ago');
  });
  it('states are lowercase words; an unknown number says so', () => {
    assert.equal(statusWord('TASK_STATUS_WAITING_APPROVAL'), 'waiting_approval');
    assert.equal(statusWord(42), 'status 42');
  });
  it('says an error is retried automatically only while the task waits to retry', () => {
    const error = {
      error_class: 'ERROR_CLASS_EXTERNAL_5XX',
      message: '502',
      retryable: true,
    } as const;
    assert.equal(
      formatTaskError(error, 'TASK_STATUS_FAILED_RETRYABLE'),
      'external_5xx: 502 (retried automatically)',
    );
    assert.equal(formatTaskError(error, 'TASK_STATUS_FAILED_TERMINAL'), 'external_5xx: 502');
  });
  it('the queue standing of a queued task', () => {
    assert.equal(formatQueue(taskWith()), '3 ahead in the queue · estimated wait ~12s');
    assert.equal(
      formatQueue(taskWith({ queue_position: 0, estimated_wait: null })),
      'next in line · no wait estimate yet',
    );
  });
});

describe('renderTask', () => {
  it('shows a queued task with its queue position, wait, cancel command and trace', () => {
    const text = renderTask(taskWith(), NOW);
    assert.equal(fieldOf(text, 'task'), TASK_ID);
    assert.equal(fieldOf(text, 'state'), 'queued');
    assert.equal(fieldOf(text, 'priority'), 'P1');
    assert.equal(fieldOf(text, 'queue'), '3 ahead in the queue · estimated wait ~12s');
    assert.equal(fieldOf(text, 'cancel'), `possible: sluice cancel ${TASK_ID}`);
    assert.equal(fieldOf(text, 'trace'), '4bf92f3577b34da6a3ce929d0e0e4736');
    assert.equal(fieldOf(text, 'progress'), undefined, 'no progress line before any report');
    assert.equal(fieldOf(text, 'retry'), undefined);
    assert.equal(fieldOf(text, 'waiting'), undefined, 'nothing holds it back but its turn');
  });

  it('says why a task waits beyond its turn', () => {
    const why =
      'the circuit breaker of tool:search is open: the step waits until it lets calls through again';
    assert.equal(fieldOf(renderTask(taskWith({ waiting_for: why }), NOW), 'waiting'), why);
    assert.deepEqual(snapshotDetails(taskWith({ waiting_for: why }), NOW), [
      '3 ahead in the queue · estimated wait ~12s',
      `waiting: ${why}`,
    ]);
  });

  it('shows a running task with its step, progress and pending cancel, without queue', () => {
    const text = renderTask(
      taskWith({
        status: 'TASK_STATUS_RUNNING',
        current_step: 'fetch',
        progress: 0.42,
        progress_message: 'page 4 of 10',
        attempt: 2,
        cancel_requested: true,
        can_cancel: false,
        estimated_wait: null,
      }),
      NOW,
    );
    assert.equal(fieldOf(text, 'state'), 'running, cancel requested');
    assert.equal(fieldOf(text, 'step'), 'fetch');
    assert.equal(fieldOf(text, 'progress'), '42% "page 4 of 10"');
    assert.equal(fieldOf(text, 'attempt'), '2');
    assert.equal(fieldOf(text, 'queue'), undefined);
    assert.equal(fieldOf(text, 'cancel'), 'not possible');
  });

  it('shows the pending approval with its deadline, timeout action and the commands to answer', () => {
    const text = renderTask(
      taskWith({
        status: 'TASK_STATUS_WAITING_APPROVAL',
        approval: {
          prompt: 'Publish the outline?\n1. Queues\n2. Backpressure',
          step: 'review',
          deadline: at(60_000 + 300_000),
          on_timeout: 'APPROVAL_TIMEOUT_ACTION_PAUSE',
        },
      }),
      NOW,
    );
    assert.match(
      text,
      /^approval {2}Publish the outline\?\n {10}1\. Queues\n {10}2\. Backpressure\nasked by {2}step review$/m,
    );
    assert.equal(
      fieldOf(text, 'deadline'),
      '2026-01-02T03:10:05Z (in 5m 00s); then the task is paused',
    );
    assert.match(text, new RegExp(`sluice approve ${TASK_ID} \\[--comment <text>\\]`));
    assert.match(text, new RegExp(`sluice reject ${TASK_ID} \\[--comment <text>\\]`));
  });

  it('shows the error of a failed task and how to retry it', () => {
    const text = renderTask(
      taskWith({
        status: 'TASK_STATUS_FAILED_TERMINAL',
        can_cancel: false,
        error: {
          error_class: 'ERROR_CLASS_TOOL_TIMEOUT',
          message: 'the fetch timed out',
          retryable: false,
        },
      }),
      NOW,
    );
    assert.equal(fieldOf(text, 'error'), 'tool_timeout: the fetch timed out');
    assert.match(fieldOf(text, 'retry') ?? '', new RegExp(`^sluice retry ${TASK_ID}`));
  });

  it('shows how to resume a paused task', () => {
    const text = renderTask(taskWith({ status: 'TASK_STATUS_PAUSED' }), NOW);
    assert.equal(fieldOf(text, 'resume'), `sluice resume ${TASK_ID}`);
  });

  it('shows the duration and the pretty-printed output of a succeeded task', () => {
    const text = renderTask(
      taskWith({
        status: 'TASK_STATUS_SUCCEEDED',
        current_step: '',
        start_time: at(1_000),
        finish_time: at(4_500),
        output: '{"summary":"ok","pages":2}',
        can_cancel: false,
      }),
      NOW,
    );
    assert.equal(fieldOf(text, 'finished'), '2026-01-02T03:04:09Z (4.5s after creation)');
    assert.equal(fieldOf(text, 'step'), undefined);
    assert.ok(
      text.endsWith(
        'output    {\n            "summary": "ok",\n            "pages": 2\n          }',
      ),
      text,
    );
  });
});

describe('watch lines', () => {
  it('reads what people want to know from event data, and nothing else', () => {
    const cases: [unknown, string[]][] = [
      [{ priority: 1, type: 'cli-steps' }, []],
      [{ seq: 2, attempt: 1 }, []],
      [{ seq: 2, attempt: 3 }, ['attempt 3']],
      [{ seq: 2, progress: 0.5, message: 'half' }, ['50% "half"']],
      [{ seq: 2, progress: 0, message: '' }, ['0%']],
      [{ next: ['publish'] }, ['next publish']],
      [{ next: ['a', 'b', 'c'] }, ['next 3 in parallel: a, b, c']],
      [{ branch: 2, join: 'report' }, ['branch 2', 'join report']],
      [
        { prompt: 'ok?', deadline: '2026-01-02T03:04:05.678Z', on_timeout: 'pause' },
        ['asks "ok?"', 'deadline 2026-01-02T03:04:05Z'],
      ],
      [{ seq: 1, error: 'fetch failed:\n  [\n    404\n  ]' }, ['error fetch failed: [ 404 ]']],
      [{ prompt: 'Publish?\n1. intro' }, ['asks "Publish? 1. intro"']],
      [{ error_class: 'tool_timeout', message: 'slow' }, ['error tool_timeout: slow']],
      [{ comment: 'sorry', reason: 'rejected' }, ['reason "rejected"', 'comment "sorry"']],
    ];
    for (const [data, details] of cases) {
      assert.deepEqual(eventDataDetails(JSON.stringify(data)), details, JSON.stringify(data));
    }
    assert.deepEqual(eventDataDetails(''), []);
    assert.deepEqual(eventDataDetails('not json'), ['not json']);
    assert.deepEqual(eventDataDetails('[1]'), []);
  });

  it('adds what a snapshot knows and the event did not say', () => {
    assert.deepEqual(snapshotDetails(taskWith(), NOW), [
      '3 ahead in the queue · estimated wait ~12s',
    ]);
    const running = taskWith({
      status: 'TASK_STATUS_RUNNING',
      progress: 0.3,
      pause_requested: true,
    });
    assert.deepEqual(snapshotDetails(running, NOW), ['30%', 'pause requested']);
    assert.deepEqual(snapshotDetails(running, NOW, ['30% "x"']), ['pause requested']);
    const waiting = taskWith({
      status: 'TASK_STATUS_WAITING_APPROVAL',
      approval: {
        prompt: 'go?',
        step: 'review',
        deadline: at(120_000),
        on_timeout: 'APPROVAL_TIMEOUT_ACTION_CANCEL',
      },
    });
    assert.deepEqual(snapshotDetails(waiting, NOW), ['approval "go?", deadline in 1m 00s']);
    assert.deepEqual(snapshotDetails(waiting, NOW, ['asks "go?"']), []);
    const failed = taskWith({
      status: 'TASK_STATUS_FAILED_TERMINAL',
      error: { error_class: 'ERROR_CLASS_UNKNOWN', message: 'x', retryable: true },
    });
    assert.deepEqual(snapshotDetails(failed, NOW), ['error unknown: x']);
    assert.deepEqual(snapshotDetails(failed, NOW, ['error unknown: x']), []);
  });

  it('lays a line out in columns: time, seq, state, event, step, details', () => {
    const event = eventWith({
      seq: '3',
      type: 'start',
      to_status: 'TASK_STATUS_RUNNING',
      step: 'outline',
    });
    assert.equal(
      renderWatchLine({
        time: event.create_time,
        seq: event.seq,
        state: event.to_status,
        what: event.type,
        step: event.step,
        details: ['42% "drafting"'],
      }),
      '03:04:05Z  #3    running           start            outline  42% "drafting"',
    );
    assert.equal(
      renderWatchLine({
        time: NOW,
        state: 'TASK_STATUS_QUEUED',
        what: 'waiting',
        step: '',
        details: [],
      }),
      '03:05:05Z        queued            waiting          -',
    );
  });

  it('keeps multi-line messages on one line', () => {
    const line = renderWatchLine({
      time: NOW,
      seq: '4',
      state: 'TASK_STATUS_FAILED_TERMINAL',
      what: 'fail_terminal',
      step: 'check',
      details: ['error schema_validation: [\n  {\n    "path": ["x"]\n  }\n]'],
    });
    assert.equal(line.split('\n').length, 1);
    assert.match(line, /error schema_validation: \[ \{ "path": \["x"\] \} \]$/);
    const end = renderWatchEnd(
      taskWith({
        status: 'TASK_STATUS_FAILED_TERMINAL',
        error: { error_class: 'ERROR_CLASS_UNKNOWN', message: 'a\n  b', retryable: false },
      }),
    );
    assert.match(end, /: unknown: a b; retry it: /);
  });

  it('ends with the outcome and the next command', () => {
    const finished = { create_time: at(0), finish_time: at(12_300) };
    assert.equal(
      renderWatchEnd(taskWith({ status: 'TASK_STATUS_SUCCEEDED', ...finished })),
      `task ${TASK_ID} succeeded after 12s; its output: sluice get ${TASK_ID}`,
    );
    assert.equal(
      renderWatchEnd(
        taskWith({
          status: 'TASK_STATUS_FAILED_TERMINAL',
          ...finished,
          error: { error_class: 'ERROR_CLASS_EXTERNAL_5XX', message: '502', retryable: false },
        }),
      ),
      `task ${TASK_ID} failed after 12s: external_5xx: 502; retry it: sluice retry ${TASK_ID}`,
    );
    assert.equal(
      renderWatchEnd(taskWith({ status: 'TASK_STATUS_CANCELLED', ...finished })),
      `task ${TASK_ID} was cancelled after 12s; retry it: sluice retry ${TASK_ID}`,
    );
  });
});

describe('renderTaskTable', () => {
  it('says so when there are none', () => assert.equal(renderTaskTable([]), 'no tasks'));

  it('aligns one task per row under a header', () => {
    const lines = renderTaskTable([
      taskWith(),
      taskWith({
        task_id: 'b'.repeat(36),
        type: 'doc-ingest',
        status: 'TASK_STATUS_RUNNING',
        progress: 0.5,
        current_step: '',
        priority: 'PRIORITY_P3',
      }),
    ]).split('\n');
    assert.equal(lines.length, 3);
    assert.match(lines[0] ?? '', /^TASK\s+TYPE\s+PRI\s+STATE\s+STEP\s+PROGRESS\s+CREATED$/);
    assert.match(
      lines[1] ?? '',
      new RegExp(
        `^${TASK_ID}  research-brief  P1 +queued +outline +wait ~12s +2026-01-02T03:04:05Z$`,
      ),
    );
    assert.match(lines[2] ?? '', /^b{36} {2}doc-ingest +P3 +running +- +50% +2026/);
    const column = (line: string | undefined) => line?.indexOf('2026') ?? -1;
    assert.equal(column(lines[1]), column(lines[2]), 'columns line up');
  });
});

describe('renderDeadLetterTable', () => {
  /** A letter whose error says `message`. */
  const letterWith = (id: string, message: string): DeadLetter => ({
    dead_letter_id: id,
    task_id: TASK_ID,
    tenant_id: 'acme',
    step: 'fetch',
    step_seq: 2,
    reason: 'DEAD_LETTER_REASON_ATTEMPTS_EXHAUSTED',
    error: { error_class: 'ERROR_CLASS_EXTERNAL_5XX', message, retryable: false },
    attempts: 3,
    create_time: toTimestamp(CREATED),
    redrive_time: null,
    task_status: 'TASK_STATUS_FAILED_TERMINAL',
    recent_events: [],
  });

  /**
   * Terminal cells up to `text` in `line`: CJK ideographs and emoji take two, as terminals draw
   * them, a combining accent none.
   */
  const cellsBefore = (line: string, text: string) =>
    [...line.slice(0, line.indexOf(text))].reduce((cells, char) => {
      if (/\p{Mn}/u.test(char)) return cells;
      return cells + (/[\u3000-\u9fff\u{1f300}-\u{1faff}]/u.test(char) ? 2 : 1);
    }, 0);

  it('lines up the columns after an error in wide characters', () => {
    const lines = renderDeadLetterTable([
      letterWith('a'.repeat(36), 'ページの取得に失敗しました 🔥'),
      letterWith('b'.repeat(36), 'fetch failed: connection reset by peer'),
      letterWith('c'.repeat(36), 'e\u0301chec'), // é as e and a combining accent: one cell
    ]).split('\n');
    const created = lines.slice(1).map((line) => cellsBefore(line, '2026-01-02T03:04:05Z'));
    assert.deepEqual(created, [created[0], created[0], created[0]], lines.join('\n'));
    assert.equal(cellsBefore(lines[0] ?? '', 'CREATED'), created[0]);
  });
});

describe('renderActionResult', () => {
  it('tells a done request from a requested one', () => {
    assert.equal(
      renderActionResult('cancel', taskWith({ status: 'TASK_STATUS_CANCELLED' })),
      `cancelled task ${TASK_ID}`,
    );
    assert.match(
      renderActionResult(
        'cancel',
        taskWith({ status: 'TASK_STATUS_RUNNING', cancel_requested: true }),
      ),
      /^cancel requested: .* \(now running, cancel requested\)$/,
    );
    assert.equal(
      renderActionResult('pause', taskWith({ status: 'TASK_STATUS_PAUSED' })),
      `paused task ${TASK_ID}; resume it: sluice resume ${TASK_ID}`,
    );
    assert.match(
      renderActionResult(
        'pause',
        taskWith({ status: 'TASK_STATUS_RUNNING', pause_requested: true }),
      ),
      /^pause requested: /,
    );
    assert.equal(
      renderActionResult('retry', taskWith({ attempt: 2 })),
      `retrying task ${TASK_ID}: attempt 2 (now queued)`,
    );
    assert.equal(
      renderActionResult('reject', taskWith({ status: 'TASK_STATUS_CANCELLED' })),
      `rejected task ${TASK_ID} (now cancelled)`,
    );
  });
});

describe('renderServiceError', () => {
  it('names the gRPC status and keeps the server message', () => {
    assert.equal(
      renderServiceError(9, 'task is succeeded '),
      'error: FAILED_PRECONDITION: task is succeeded',
    );
    assert.equal(
      renderServiceError(3, 'input.topic: required'),
      'error: INVALID_ARGUMENT: input.topic: required',
    );
    assert.equal(renderServiceError(99, 'x'), 'error: STATUS_99: x');
  });
});
