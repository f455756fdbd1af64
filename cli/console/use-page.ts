/**
 * One page of a long list (keys, revocations), as the console shows it: the daemon is asked for
 * the rows that fit (`limit`) after a cursor (`after`, the `next` of the page before), never for
 * the whole list, so an open console costs the daemon a page whatever the store holds. The
 * cursors of the pages walked are kept, so PgUp goes back without asking for anything else.
 * A change of `scope` (another instance, another height) starts again at the first page.
 */
import { useCallback, useEffect, useRef, useState } from 'react';

export interface Page<T> {
  rows: T[];
  next: string | null;
}

export type PageFetch<T> = (after: string | undefined, limit: number) => Promise<Page<T>>;

export interface PageView<T> {
  rows: T[];
  /** Rows before this page (the position of its first row, from 0). */
  offset: number;
  /** A page follows this one. */
  more: boolean;
  /** False until the first answer for this scope. */
  loaded: boolean;
  nextPage(): void;
  previousPage(): void;
  firstPage(): void;
  /** Asks for the shown page again (an event about one of its rows, a poll). */
  reload(): void;
}

interface State<T> {
  scope: string;
  /** The cursors of the pages walked: the last is the shown page's (undefined: the first). */
  cursors: (string | undefined)[];
  /** Rows before each of those pages: a page may come short (the daemon cuts a long filtered scan). */
  offsets: number[];
  rows: T[];
  next: string | null;
  loaded: boolean;
  /** How many cursors deep the shown rows are (they stay until the next page answers). */
  at: number;
}

function fresh<T>(scope: string): State<T> {
  return { scope, cursors: [undefined], offsets: [0], rows: [], next: null, loaded: false, at: 1 };
}

/** `active` false: nothing is asked (the pane is not shown). */
export function usePage<T>(fetch: PageFetch<T>, scope: string, limit: number, active: boolean): PageView<T> {
  const [state, setState] = useState<State<T>>(() => fresh(scope));
  const fetchRef = useRef(fetch);
  fetchRef.current = fetch;
  // Bumped to ask for the shown page again; answers for an older request are dropped.
  const [generation, setGeneration] = useState(0);
  const asked = useRef(0);

  const current = state.scope === scope ? state : fresh<T>(scope);
  const cursor = current.cursors[current.cursors.length - 1];
  const depth = current.cursors.length;

  useEffect(() => {
    if (!active) return;
    const ticket = ++asked.current;
    fetchRef.current(cursor, limit).then(
      (page) => {
        if (ticket !== asked.current) return;
        setState((s) => {
          const base = s.scope === scope ? s : fresh<T>(scope);
          // An unchanged answer keeps the same state, so a poll that finds nothing new draws nothing.
          if (
            base.loaded &&
            base.at === depth &&
            base.next === page.next &&
            JSON.stringify(base.rows) === JSON.stringify(page.rows)
          )
            return base;
          return { ...base, rows: page.rows, next: page.next, loaded: true, at: depth };
        });
      },
      // A failed read is the event stream's to report (the daemon gone): the page stays as it was.
      () => {},
    );
  }, [active, scope, limit, cursor, depth, generation]);

  const nextPage = useCallback(() => {
    setState((s) =>
      s.scope !== scope || s.next === null || s.at !== s.cursors.length
        ? s
        : { ...s, cursors: [...s.cursors, s.next], offsets: [...s.offsets, s.offsets[s.at - 1]! + s.rows.length] },
    );
  }, [scope]);
  const previousPage = useCallback(() => {
    setState((s) =>
      s.scope !== scope || s.cursors.length < 2
        ? s
        : { ...s, cursors: s.cursors.slice(0, -1), offsets: s.offsets.slice(0, -1) },
    );
  }, [scope]);
  const firstPage = useCallback(() => {
    setState((s) => (s.scope !== scope || s.cursors.length < 2 ? s : { ...s, cursors: [undefined], offsets: [0] }));
  }, [scope]);
  const reload = useCallback(() => setGeneration((g) => g + 1), []);

  return {
    rows: current.rows,
    offset: current.offsets[current.at - 1] ?? 0,
    more: current.next !== null,
    loaded: current.loaded,
    nextPage,
    previousPage,
    firstPage,
    reload,
  };
}
