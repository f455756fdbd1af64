/** The folders of the shipped code whose imports are followed. */
export declare const DIRS: string[];

/** The modules a file's text imports, as written, type imports included. */
export declare function importsOf(text: string): string[];

/** Each import circle among `files`, as its files sorted; none when the imports form no loop. */
export declare function findCircles(
  files: string[],
  read: (file: string) => string,
  resolveImport: (spec: string, from: string) => string | undefined,
): string[][];

/** The checkout's circles over DIRS, paths relative to it. */
export declare function projectCircles(root?: string): string[][];
/** The TypeScript sources under `dir`, declarations left out, sorted. */
export declare function sources(dir: string): string[];
