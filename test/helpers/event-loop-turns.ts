/**
 * Turns of the event loop from now until `stop()`: one immediate, queued again at each turn. A
 * long answer that yields between its pieces lets it run; one that holds the loop does not.
 */
export function turnsDuring(): { stop(): number } {
  let turns = 0;
  let ended = false;
  const tick = (): void => {
    if (ended) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  return {
    stop: () => {
      ended = true;
      return turns;
    },
  };
}
