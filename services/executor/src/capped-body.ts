/**
 * Reading an HTTP answer's body with a size limit: what a step calls may answer with a huge or
 * endless body, and reading it whole (`text()`, `json()`) would hold the step until its timeout or
 * exhaust the executor's memory, which every running step shares.
 */

/** A body read up to a limit. */
export interface CappedBody {
  /** The body as UTF-8 text, up to the limit (a character cut at the limit becomes U+FFFD). */
  readonly text: string;
  /** True when the body was longer than the limit: the rest was not downloaded. */
  readonly truncated: boolean;
}

/** Reads at most `maxBytes` of `response`'s body, then cancels the download. */
export async function readCappedBody(response: Response, maxBytes: number): Promise<CappedBody> {
  if (!response.body) return { text: '', truncated: false };
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  const text = () => Buffer.concat(chunks).toString('utf8');
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { text: text(), truncated: false };
    const room = maxBytes - size;
    if (value.length > room) {
      chunks.push(value.subarray(0, room));
      await reader.cancel();
      return { text: text(), truncated: true };
    }
    chunks.push(value);
    size += value.length;
  }
}
