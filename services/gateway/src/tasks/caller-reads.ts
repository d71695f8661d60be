/**
 * What every call of the task service reads before it acts: the caller's API key (the tenant comes
 * from it, never from the request) and, for a create, the task types it names. Both are read per
 * call, grouped with the calls that arrive during the read before (group-reader.ts): one statement
 * for many calls under load, and each read started after its call arrived, so a key revoked before
 * the call is refused. What the reads found is remembered for creates that are written without
 * reading again, on condition that it still holds (remembered-reads.ts, `createOnRememberedReads`).
 */
import type { Metadata } from '@grpc/grpc-js';
import type { CreateTaskRequest } from '@sluice/api';
import {
  findKeyOwners,
  findLatestTaskTypes,
  GroupReader,
  type Database,
  type KeyOwner,
  type RegisteredTaskType,
} from '@sluice/db';
import { readBearerKey, unauthenticated } from '../grpc/index.js';
import { MAX_BATCH_TASKS } from './create-batch.js';
import { lookUpTypes } from './create-request.js';
import { RememberedReadsCache } from './remembered-reads.js';

export class CallerReads {
  private readonly keyOwners: GroupReader<KeyOwner>;
  private readonly latestTypes: GroupReader<RegisteredTaskType>;
  /** What the reads found last, for creates written without reading again. */
  readonly remembered = new RememberedReadsCache();

  constructor(db: Database) {
    this.keyOwners = new GroupReader((keys) => findKeyOwners(db, keys));
    this.latestTypes = new GroupReader((names) => findLatestTaskTypes(db, names));
  }

  /**
   * The owner of the call's API key.
   * @throws `UNAUTHENTICATED` when the call has no key or an unknown or revoked one.
   */
  async authenticate(metadata: Metadata): Promise<KeyOwner> {
    const key = readBearerKey(metadata);
    if (key === undefined) throw unauthenticated();
    const owner = await this.keyOwners.read(key);
    if (!owner) throw unauthenticated('the API key is not valid');
    this.remembered.learnKey(key, owner);
    return owner;
  }

  /**
   * Starts reading the requests' task types while the caller's key is checked (two round trips at
   * once, not one after the other); their answers are looked at only once the caller is
   * authenticated. Nothing is read for a call without a key, or a batch over the limit.
   */
  typesOf(
    metadata: Metadata,
    requests: readonly CreateTaskRequest[],
  ): Map<string, Promise<RegisteredTaskType | undefined>> {
    return readBearerKey(metadata) === undefined || requests.length > MAX_BATCH_TASKS
      ? new Map<string, Promise<RegisteredTaskType | undefined>>()
      : lookUpTypes((name) => this.latestTypes.read(name), requests);
  }
}
