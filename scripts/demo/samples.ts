/**
 * One task of each of the sample task types the executors ship besides `research-brief`, and how
 * the demo reads what each produced:
 *
 * - `research-report`: an LLM outline waits for a person's approval — which the demo gives with
 *   the `sluice` CLI, with a comment — then three pages are fetched in parallel (a fan-out on
 *   `tool:http`) and an LLM summary joins them.
 * - `document-ingestion`: three documents (CSV and text served by the fake web site, JSON inline)
 *   parsed in parallel on `file`, their rows written to Postgres on `db`, totals in the join.
 * - `agent-loop`: the LLM picks which allowed page to read next until it has read them all.
 *
 * The fake LLM echoes the first words of its prompt, and the samples are built around that (see
 * their modules in services/executor/src/builtin-tasks), so every run reads the same pages in the
 * same order and writes the same rows.
 */
import type { Priority } from '@sluice/api';
import type { Fields } from './json-fields.js';

/** The sample task types the demo runs. */
export type SampleType = 'research-report' | 'document-ingestion' | 'agent-loop';

/** Facts about a task that its output does not hold, read by the demo itself. */
export interface SampleFacts {
  /** The task's rows in `sluice_samples.ingested_rows`, counted in Postgres. */
  readonly storedRows: number;
}

/** What a sample's output says, and how it differs from the plan. */
export interface Explained {
  /** Labelled lines for people: `['sources', '[1] Backpressure HTTP 200 · …']`. */
  readonly lines: ReadonlyArray<readonly [label: string, text: string]>;
  /** What is not as planned (empty when all is). */
  readonly problems: readonly string[];
}

/** One sample task of the demo. */
export interface SampleTask {
  /** A few words shown with the task. */
  readonly label: string;
  readonly type: SampleType;
  readonly priority: Priority;
  readonly input: Record<string, unknown>;
  /** When the task asks for approval, the demo approves it through the CLI with this comment. */
  readonly approval?: { readonly comment: string };
  /** Reads the output of the succeeded task. */
  readonly explain: (output: Fields, facts: SampleFacts) => Explained;
}

/** Pages the fake web site serves besides its default ones: a CSV file to ingest. */
export const SAMPLE_PAGES: Readonly<Record<string, string>> = {
  '/data/cities.csv': [
    'city,country,population',
    'Oslo,Norway,709000',
    '"Lima","Peru","10,000,000"',
    'Nairobi,Kenya,4397073',
    '',
  ].join('\n'),
};

/** The sample tasks, in the order they are submitted; `urlOf` gives a fake web site's URL. */
export function sampleTasks(urlOf: (path: string) => string): SampleTask[] {
  return [researchReport(urlOf), documentIngestion(urlOf), agentLoop(urlOf)];
}

function researchReport(urlOf: (path: string) => string): SampleTask {
  const sources = ['/articles/backpressure', '/articles/priorities', '/notes.txt'].map(urlOf);
  const comment = 'Lead with load shedding, keep it to one page';
  return {
    label: 'report with a person in the loop',
    type: 'research-report',
    priority: 'PRIORITY_P1',
    input: {
      topic: 'keeping an overloaded service responsive',
      sources,
      // Should the demo stop before answering, nothing waits for a day in the shared database.
      approvalTimeoutMs: 5 * 60_000,
      onApprovalTimeout: 'cancel',
    },
    approval: { comment },
    explain(output) {
      const problems: string[] = [];
      const read = output.list('sources');
      const statuses = read.map((s) => `${pathOf(s.text('url'))} ${s.number('status')}`);
      const expected = sources.map((url) => `${pathOf(url)} 200`);
      if (statuses.join() !== expected.join()) {
        problems.push(`expected the sources ${expected.join(', ')}, got ${statuses.join(', ')}`);
      }
      const reviewerComment = output.text('reviewerComment');
      if (reviewerComment !== comment) {
        problems.push(
          `the reviewer's comment did not reach the report: ${String(reviewerComment)}`,
        );
      }
      if (!output.text('report')) problems.push('the output has no report');
      return {
        lines: [
          ['outline', output.text('outline') ?? '-'],
          ['approval', `approved with the CLI: "${reviewerComment ?? ''}"`],
          ['fetched', read.map((s, n) => `[${n + 1}] ${pageText(s)}`).join(' · ')],
          ['report', output.text('report') ?? '-'],
        ],
        problems,
      };
    },
  };
}

/** A document to ingest, with the number of rows it must give. */
interface PlannedDocument {
  readonly document: Record<string, string>;
  readonly rows: number;
}

function documentIngestion(urlOf: (path: string) => string): SampleTask {
  const planned: PlannedDocument[] = [
    { document: { name: 'cities.csv', format: 'csv', url: urlOf('/data/cities.csv') }, rows: 3 },
    {
      document: {
        name: 'orders.json',
        format: 'json',
        content: JSON.stringify([
          { id: 1, item: 'priority lane', paid: true },
          { id: 2, item: 'extra executor', paid: false },
        ]),
      },
      rows: 2,
    },
    { document: { name: 'notes.txt', format: 'text', url: urlOf('/notes.txt') }, rows: 1 },
  ];
  const plannedTotal = planned.reduce((sum, p) => sum + p.rows, 0);
  return {
    label: 'CSV, JSON and text into Postgres',
    type: 'document-ingestion',
    priority: 'PRIORITY_P2',
    input: { documents: planned.map((p) => p.document) },
    explain(output, facts) {
      const problems: string[] = [];
      const documents = output.list('documents');
      const got = documents.map((d) => `${d.text('name')} ${d.number('rows')}`);
      const expected = planned.map((p) => `${p.document['name']} ${p.rows}`);
      if (got.join() !== expected.join()) {
        problems.push(`expected the rows ${expected.join(', ')}, got ${got.join(', ')}`);
      }
      if (facts.storedRows !== plannedTotal) {
        problems.push(`Postgres holds ${facts.storedRows} rows of the task, not ${plannedTotal}`);
      }
      const table = output.text('table') ?? '?';
      return {
        lines: [
          [
            'parsed',
            documents.map((d) => `${d.text('name')} ${rowsText(d.number('rows'))}`).join(' · '),
          ],
          ['stored', `${rowsText(output.number('totalRows'))} in ${table}, says the join`],
          [
            'read back',
            `${rowsText(facts.storedRows)} of this task in ${table}, counted by the demo`,
          ],
        ],
        problems,
      };
    },
  };
}

function agentLoop(urlOf: (path: string) => string): SampleTask {
  const urls = ['/articles/priorities', '/articles/backpressure', '/notes.txt'].map(urlOf);
  return {
    label: 'LLM picks the pages to read',
    type: 'agent-loop',
    priority: 'PRIORITY_P1',
    input: { goal: 'Which work should an overloaded queue shed first?', urls, maxTurns: 5 },
    explain(output) {
      const problems: string[] = [];
      const history = output.list('history');
      const read = history.map((h) => pathOf(h.text('url')));
      if (read.join() !== urls.map(pathOf).join()) {
        problems.push(`expected to read ${urls.map(pathOf).join(', ')}, read ${read.join(', ')}`);
      }
      const stoppedBy = output.text('stoppedBy');
      if (stoppedBy !== 'llm') problems.push(`expected the LLM to stop, stopped by ${stoppedBy}`);
      return {
        lines: [
          ['read', history.map((h, n) => `${n + 1}. ${pageText(h)}`).join(' · ')],
          ['answer', output.text('answer') ?? '-'],
          [
            'stopped',
            `by ${STOPPED_BY[stoppedBy ?? ''] ?? stoppedBy} after ${output.number('turns')} turns`,
          ],
        ],
        problems,
      };
    },
  };
}

/** Who ended an agent loop, for people. */
const STOPPED_BY: Readonly<Record<string, string>> = {
  llm: 'the LLM',
  max_turns: 'the turn limit',
};

/** `1 row`, `3 rows`. */
function rowsText(rows: number | undefined): string {
  return `${rows ?? '?'} row${rows === 1 ? '' : 's'}`;
}

/** A fetched page for people: its title (else its path) and HTTP status. */
function pageText(page: Fields): string {
  return `${page.text('title') ?? pathOf(page.text('url'))} HTTP ${page.number('status')}`;
}

/** The path of a URL on the fake web site (its port changes from run to run). */
function pathOf(url: string | undefined): string {
  if (url === undefined) return '?';
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}
