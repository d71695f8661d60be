/**
 * Which process listens on a local TCP port, read from Linux's /proc (elsewhere: unknown).
 *
 * Why: when the machine's NATS or Postgres dies in the middle of a test run, the run can only say
 * why if it noted beforehand which process served the port (its pid, its command line and so its
 * log file), and can then look at what that process left behind.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** `st` of a socket in LISTEN state in /proc/net/tcp. */
const TCP_LISTEN = '0A';

/**
 * @typedef {object} Listener
 * @property {number} pid
 * @property {string[]} argv its command line
 */

/**
 * The process listening on `port` (any local address), or undefined when none is found or /proc
 * cannot tell (another system, or a process of another user).
 * @param {number} port
 * @returns {Listener | undefined}
 */
export function listenerOf(port) {
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return undefined;
  let pids;
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let fds;
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // Gone meanwhile, or not ours to read.
    }
    for (const fd of fds) {
      let target;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode !== undefined && inodes.has(inode)) {
        return { pid: Number(pid), argv: commandLineOf(Number(pid)) ?? [] };
      }
    }
  }
  return undefined;
}

/** Whether the process `pid` still runs with the same command line. */
export function isRunning(listener) {
  const argv = commandLineOf(listener.pid);
  return argv !== undefined && argv.join('\0') === listener.argv.join('\0');
}

/**
 * The log file a server was told to write to on its command line (nats-server's `-l`/`--log`),
 * or undefined.
 * @param {readonly string[]} argv
 */
export function logFileOf(argv) {
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '-l' || arg === '--log' || arg === '-log') return argv[i + 1];
    const joined = /^--?log=(.+)$/.exec(arg ?? '');
    if (joined) return joined[1];
  }
  return undefined;
}

/** The inodes of sockets listening on `port`, from /proc/net/tcp and tcp6. */
function listeningInodes(port) {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    // "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode"
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      if (fields[3] === TCP_LISTEN && fields[1]?.endsWith(`:${hexPort}`)) inodes.add(fields[9]);
    }
  }
  return inodes;
}

/** The command line of `pid`, or undefined when it is gone. */
function commandLineOf(pid) {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (argv.at(-1) === '') argv.pop(); // Each argument ends with a NUL, the last one too.
    return argv;
  } catch {
    return undefined;
  }
}
