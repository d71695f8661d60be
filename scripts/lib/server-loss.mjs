/**
 * What can be known about a server that died during a test run: whether its process exited or
 * hangs, the end of its log and what the kernel said about it (an OOM kill, a segfault).
 *
 * The machine's nats-server has died in the middle of CI runs three times with nothing recorded
 * on why; the next time, the run prints the evidence before it goes on. (A Go panic goes to the
 * server's stderr, which a server started in the background does not keep: session 53 found
 * one that the suite's stacks could cause, see docs/decisions.md.)
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isRunning, listenerOf, logFileOf } from './listener.mjs';

const LOG_LINES = 20;
const KERNEL_LINES = 10;

/**
 * Notes which process serves `server` now, to explain its loss later.
 * @param {{ name: string, port?: number }} server
 * @returns {{ name: string, listener?: import('./listener.mjs').Listener }} the server and its process
 */
export function noteServer(server) {
  return { name: server.name, listener: server.port ? listenerOf(server.port) : undefined };
}

/**
 * Lines saying what became of a noted server's process.
 * @param {ReturnType<typeof noteServer>} noted
 * @param {{ readKernelLog?: () => string | undefined }} [options] the kernel log's source (tests)
 * @returns {string[]}
 */
export function explainLoss(noted, { readKernelLog = dmesg } = {}) {
  const { listener } = noted;
  if (listener === undefined) {
    return [
      `${noted.name}: which process served it was not known (not found in /proc at the start)`,
    ];
  }
  const command = listener.argv.join(' ');
  const lines = [
    isRunning(listener)
      ? `${noted.name}: its process still runs but does not answer (pid ${listener.pid}: ${command})`
      : `${noted.name}: its process has exited (pid ${listener.pid}: ${command})`,
  ];
  const logFile = logFileOf(listener.argv);
  if (logFile !== undefined) lines.push(...logTail(logFile));
  const program = path.basename(listener.argv[0] ?? '');
  const kernelLog = readKernelLog();
  if (kernelLog === undefined) {
    lines.push(`the kernel's log could not be read (dmesg)`);
    return lines;
  }
  const kernel = kernelLog
    .split('\n')
    .filter((line) => aboutProcess(line, listener.pid, program))
    .slice(-KERNEL_LINES);
  lines.push(
    kernel.length > 0
      ? `the kernel's log about it:\n${kernel.join('\n')}`
      : `the kernel's log says nothing about pid ${listener.pid} or an out-of-memory kill`,
  );
  return lines;
}

function logTail(file) {
  try {
    const tail = readFileSync(file, 'utf8').trimEnd().split('\n').slice(-LOG_LINES);
    return [`the last ${tail.length} lines of ${file}:\n${tail.join('\n')}`];
  } catch (error) {
    return [`its log ${file} could not be read (${error.code ?? error.message})`];
  }
}

/** Whether a kernel log line is about the process, or an OOM kill (which names its victim). */
function aboutProcess(line, pid, program) {
  if (/out of memory|oom[-_ ]kill/i.test(line)) return true;
  if (new RegExp(`(?:pid[ =:]*|process |\\[)${pid}\\b`, 'i').test(line)) return true;
  return program !== '' && line.includes(`${program}[`); // "nats-server[3041]: segfault at …"
}

function dmesg() {
  const result = spawnSync('dmesg', ['--ctime'], { encoding: 'utf8', timeout: 5_000 });
  return result.status === 0 ? result.stdout : undefined;
}
