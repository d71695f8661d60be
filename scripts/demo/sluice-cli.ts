/**
 * The `sluice` command line as the demo uses it: the real binary (`packages/cli/bin/sluice.mjs`)
 * run as a child process, configured through its environment (`SLUICE_ADDRESS`, `SLUICE_API_KEY`)
 * exactly as a person would run it, with the command and what it printed shown in the transcript.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { paint } from '../lib/terminal.js';
import { TIME_COLUMN, elapsed } from './progress.js';
import type { Say } from './scenario.js';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The binary, relative to the repository root (as the transcript shows it). */
export const SLUICE_BIN = 'packages/cli/bin/sluice.mjs';

/** Longest one command may take before it is killed. */
const COMMAND_TIMEOUT_MS = 30_000;

/** Where the CLI connects, and as whom. */
export interface CliConnection {
  /** `host:port` of the gateway. */
  readonly address: string;
  readonly apiKey: string;
}

/** A finished run of the CLI. */
export interface CliRun {
  readonly args: readonly string[];
  /** The exit code; `null` when a signal ended it. */
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** When it started (a `performance.now()` value) and how long it ran. */
  readonly startedAt: number;
  readonly ms: number;
}

/**
 * Runs `sluice <args>` to its end, with only PATH and the connection in its environment (no
 * colour: its output goes into the demo's transcript). Killed when `signal` aborts or after
 * 30 s; rejects only when it cannot be started.
 */
export function runSluice(
  connection: CliConnection,
  args: readonly string[],
  signal: AbortSignal,
): Promise<CliRun> {
  const startedAt = performance.now();
  const child = spawn(process.execPath, [SLUICE_BIN, ...args], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env['PATH'] ?? '',
      SLUICE_ADDRESS: connection.address,
      SLUICE_API_KEY: connection.apiKey,
      NO_COLOR: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    signal,
    timeout: COMMAND_TIMEOUT_MS,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise<CliRun>((resolve, reject) => {
    child.once('error', (error) => {
      // An abort kills the child and reports an AbortError; its `close` still follows.
      if (error.name !== 'AbortError') reject(error);
    });
    child.once('close', (code) =>
      resolve({ args, code, stdout, stderr, startedAt, ms: performance.now() - startedAt }),
    );
  });
}

/**
 * Prints a finished run the way a terminal session reads, in the time column of the event lines
 * (the time it ended, since `since`): `$ sluice <args>`, then what it printed, indented, then its
 * exit code and how long it ran. The arguments are shown shell-quoted, as one would type them.
 */
export function showRun(say: Say, run: CliRun, since: number): void {
  const command = ['sluice', ...run.args.map(shellQuote)].join(' ');
  say(
    `${paint('dim', elapsed(since, run.startedAt + run.ms).padEnd(TIME_COLUMN))}  ${paint('magenta', `$ ${command}`)}`,
  );
  const indent = ' '.repeat(TIME_COLUMN + 4);
  const lines = [...run.stdout.split('\n'), ...run.stderr.split('\n')].filter((l) => l !== '');
  for (const line of lines) say(`${indent}${line}`.trimEnd());
  const exit = run.code === null ? 'killed' : `exit ${run.code}`;
  const ran = `(${exit} after ${(run.ms / 1000).toFixed(2)}s)`;
  say(paint(run.code === 0 ? 'dim' : 'red', `${indent}${ran}`));
}

/** `text` as one word of a POSIX shell command line: as it is when safe, else single-quoted. */
export function shellQuote(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}
