/** The folders of the shipped code that are read. */
export declare const DIRS: string[];

/** The files that may name the whole context: where it is declared and built. */
export declare const ASSEMBLY: string[];

/** The 1-based lines of `text` where the identifier `DaemonContext` appears in code. */
export declare function linesNamingContext(text: string): number[];

/** Each file of `files` outside `assembly` that names the whole context, with its lines. */
export declare function findWholeContext(
  files: string[],
  read: (file: string) => string,
  assembly?: string[],
): { file: string; lines: number[] }[];

/** The checkout's files that name the whole context, paths relative to it. */
export declare function projectWholeContext(root?: string): { file: string; lines: number[] }[];
