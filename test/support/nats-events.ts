/**
 * Reads a task's event notices back from the events stream, as a NATS subscriber that starts
 * after the fact would: a consumer with one filter subject (nats-server 2.9 allows one; the v3
 * client's ordered consumers need 2.10), replaying from the start.
 */
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, nanos } from '@nats-io/transport-node';
import { createBusCatalog, decodeMessageOf, nextOrNull, type TaskEventNotice } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';

/** Which task's events, and how many to wait for (at most 30 s). */
export interface ReplayTaskEventsOptions {
  readonly prefix: string;
  readonly tenantId: string;
  readonly taskId: string;
  readonly count: number;
}

/** The task's event notices in stream order; fewer than `count` when the deadline passed. */
export async function replayTaskEvents(
  options: ReplayTaskEventsOptions,
): Promise<TaskEventNotice[]> {
  const nc = await connect({ servers: natsUrl() });
  try {
    const catalog = createBusCatalog(options.prefix);
    const { name } = await (
      await jetstreamManager(nc)
    ).consumers.add(catalog.streams.events, {
      filter_subject: catalog.subjects.events(options.tenantId, options.taskId),
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.All,
      inactive_threshold: nanos(60_000),
    });
    const consumer = await jetstream(nc).consumers.get(catalog.streams.events, name);
    const notices: TaskEventNotice[] = [];
    const deadline = Date.now() + 30_000;
    while (notices.length < options.count && Date.now() < deadline) {
      const message = await nextOrNull(consumer, 2_000);
      if (message) notices.push(decodeMessageOf('task.event', message.subject, message.data));
    }
    return notices;
  } finally {
    await nc.close();
  }
}
