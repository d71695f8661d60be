/**
 * The API keys and task types this gateway read last, so that a `CreateTask` of a caller it has
 * seen can be checked and written without reading them again first. Nothing here is trusted on
 * its own: the create's insert confirms what it was checked with (`rememberedReadsGuard` in
 * @sluice/db) and writes nothing when a key was revoked or a type registered since; the gateway
 * then forgets both and takes the path that reads them. Every answer but a created task comes
 * from that path too, so an error never rests on a remembered read.
 */
import {
  hashApiKey,
  type KeyOwner,
  type RegisteredTaskType,
  type RememberedReads,
} from '@sluice/db';

/**
 * Keys and types remembered at most. Past it the oldest is forgotten (its next create reads it
 * again): the bound keeps a caller who cycles through many keys from growing the gateway's memory.
 */
export const MAX_REMEMBERED = 10_000;

/** A caller and type remembered for one create. */
export interface RememberedCreate {
  readonly tenantId: string;
  readonly taskType: RegisteredTaskType;
  /** What the create's insert confirms. */
  readonly reads: RememberedReads;
}

/** The owners of keys and the latest task types, as last read. */
export class RememberedReadsCache {
  /** Key hash → owner; insertion order is age (a read again moves to the end). */
  private readonly owners = new Map<string, KeyOwner>();
  private readonly types = new Map<string, RegisteredTaskType>();

  constructor(private readonly max = MAX_REMEMBERED) {}

  /** What a create with `key` of type `typeName` can be checked with, when both are remembered. */
  forCreate(key: string, typeName: string): RememberedCreate | undefined {
    const taskType = this.types.get(typeName);
    if (!taskType) return undefined;
    const keyHash = hashApiKey(key);
    const owner = this.owners.get(keyHash);
    if (!owner) return undefined;
    return {
      tenantId: owner.tenantId,
      taskType,
      reads: {
        keyHashes: [keyHash],
        types: [
          {
            name: taskType.name,
            version: taskType.version,
            registeredStamp: taskType.registeredStamp,
          },
        ],
      },
    };
  }

  /** Remembers the owner of `key`, as a read that started after its call found it. */
  learnKey(key: string, owner: KeyOwner): void {
    remember(this.owners, hashApiKey(key), owner, this.max);
  }

  /** Remembers a type's latest version, as a read that started after its call found it. */
  learnType(taskType: RegisteredTaskType): void {
    remember(this.types, taskType.name, taskType, this.max);
  }

  /** Forgets what a refused create was checked with: its next create reads both again. */
  forget(create: RememberedCreate): void {
    for (const hash of create.reads.keyHashes) this.owners.delete(hash);
    this.types.delete(create.taskType.name);
  }
}

function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
}
