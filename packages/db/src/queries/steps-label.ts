/** What a task runs now, for people: the name of its step, or of the steps a fan-out started. */

/** `fetchPage` for one step, `fetchPage ×5` for several of one kind, else the names joined. */
export function stepsLabel(steps: readonly string[]): string {
  const names = [...new Set(steps)];
  if (names.length === 1 && steps.length > 1) return `${names[0]} ×${steps.length}`;
  return names.join(', ');
}
