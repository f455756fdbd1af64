import { MAX_LAYOUT_BYTES } from '../../wire/event-layouts.js';
import type { ResponsesLayout } from './layouts.js';

/**
 * The layouts of a model server's Responses events, shared by its streams: each stream's
 * events but its deltas come once (response.created, …, response.completed), so a layout
 * learned within one stream would never be used. Kept to `maxBytes` of runs, oldest dropped.
 */
export class ResponsesLayouts {
  private readonly layouts: ResponsesLayout[] = [];
  private bytes = 0;
  /** Where the event `match` matched last ends. */
  end = -1;

  constructor(private readonly maxBytes = 4 * MAX_LAYOUT_BYTES) {}

  get size(): number {
    return this.layouts.length;
  }

  /** The layout of the event at `s` (its end in `end`), or null. */
  match(buf: Buffer, s: number, max: number): ResponsesLayout | null {
    const layouts = this.layouts;
    for (let k = 0; k < layouts.length; k++) {
      const layout = layouts[k] as ResponsesLayout;
      const e = layout.end(buf, s, max);
      if (e !== -1) {
        this.end = e;
        return layout;
      }
    }
    return null;
  }

  add(layout: ResponsesLayout): void {
    if (this.layouts.some((l) => l.sameAs(layout))) return;
    this.layouts.push(layout);
    this.bytes += layout.literalBytes;
    while (this.bytes > this.maxBytes && this.layouts.length > 1) {
      this.bytes -= (this.layouts.shift() as ResponsesLayout).literalBytes;
    }
  }
}

/** One ResponsesLayouts per model server (instance), made on first use. */
export class ResponsesLayoutsByServer {
  private readonly byKey = new Map<string, ResponsesLayouts>();

  for(key: string): ResponsesLayouts {
    let layouts = this.byKey.get(key);
    if (layouts === undefined) {
      // Instances come and go over a daemon's life; cleared past a bound, as chat's layouts are.
      if (this.byKey.size >= 10_000) this.byKey.clear();
      layouts = new ResponsesLayouts();
      this.byKey.set(key, layouts);
    }
    return layouts;
  }
}
