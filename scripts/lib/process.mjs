/** Running external commands: quietly, with inherited output, or as the foreground child. */
import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { constants as osConstants } from 'node:os';
import path from 'node:path';
import { PrepareError } from './log.mjs';

/**
 * Runs a command to completion.
 * @param {string} command
 * @param {string[]} args
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, quiet?: boolean }} [options]
 *   `quiet` captures stdout and stderr (interleaved) instead of showing them.
 * @returns {Promise<{ code: number, output: string }>} `code` is 128 + signal number when killed
 */
export function run(command, args, options = {}) {
  const { quiet = false, ...spawnOptions } = options;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      ...spawnOptions,
      stdio: quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    });
    let output = '';
    child.stdout?.on('data', (chunk) => (output += chunk));
    child.stderr?.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code: exitCode(code, signal), output }));
  });
}

/** The exit status a shell would report: the code, or 128 + the number of the killing signal. */
export function exitCode(code, signal) {
  if (code !== null) return code;
  return 128 + (osConstants.signals[signal] ?? 0);
}

/**
 * Finds an executable by name on PATH, then in the extra directories given.
 * @returns {string | undefined} its absolute path
 */
export function findExecutable(name, extraDirs = []) {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...extraDirs];
  for (const dir of dirs) {
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // Not here; keep looking.
    }
  }
  return undefined;
}

const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** How long a stopped child's group has after SIGTERM before it is killed. */
const KILL_AFTER_MS = 20_000;

/**
 * Runs the command that does the real work (test runner, services), passing on termination signals.
 *
 * The child gets its own process group so that we alone decide what it receives: a single Ctrl-C
 * reaches this script twice (from the terminal, and forwarded by `npm run`), and the child must see
 * it once, or a "second Ctrl-C means force" handler would skip the clean shutdown. Each signal is
 * sent to the child's whole group, as a terminal would, at most once per second.
 *
 * When `stopSignal` aborts, the group gets SIGTERM, and SIGKILL if it is still there
 * {@link KILL_AFTER_MS} later.
 * @param {string} command
 * @param {string[]} args
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, stopSignal?: AbortSignal }} options
 * @returns {Promise<number>} the child's exit status
 */
export function runForwardingSignals(command, args, options) {
  const { stopSignal, ...spawnOptions } = options;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...spawnOptions, stdio: 'inherit', detached: true });
    const lastSent = new Map();
    const forward = (signal) => {
      const now = Date.now();
      if (now - (lastSent.get(signal) ?? 0) < 1000) return;
      lastSent.set(signal, now);
      try {
        process.kill(-child.pid, signal);
      } catch {
        // The group is already gone; the exit handler below finishes up.
      }
    };
    let killTimer;
    const stop = () => {
      forward('SIGTERM');
      killTimer = setTimeout(() => {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }, KILL_AFTER_MS);
    };
    const detach = () => {
      FORWARDED_SIGNALS.forEach((s) => process.off(s, forward));
      stopSignal?.removeEventListener('abort', stop);
      clearTimeout(killTimer);
    };
    FORWARDED_SIGNALS.forEach((s) => process.on(s, forward));
    if (stopSignal?.aborted) stop();
    else stopSignal?.addEventListener('abort', stop, { once: true });
    child.on('error', (error) => {
      detach();
      reject(error.code === 'ENOENT' ? new PrepareError(`command not found: ${command}`) : error);
    });
    child.on('exit', (code, signal) => {
      detach();
      resolve(exitCode(code, signal));
    });
  });
}
