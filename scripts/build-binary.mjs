/* global process, console */
/**
 * `npm run build:binary`: one file, dist-bin/ob-proxy, that runs every command on a machine with
 * no Node (docs/operations.md "Single binary").
 *
 * 1. esbuild bundles bin/ob-proxy.ts from source into ES module chunks: ESM because
 *    bin/ob-proxy.ts and yoga-layout (Ink's layout engine, its WebAssembly inlined as base64) use
 *    top-level await, which CommonJS cannot hold; chunks because each command imports only what
 *    it needs (`--help` never parses Fastify or React), as it does from source.
 * 2. Node's single executable application: the chunks become assets of a blob whose CommonJS
 *    main, scripts/sea-main.cjs, loads them through module hooks. The blob is injected with
 *    postject into a copy of the Node binary running this script (the `node` devDependency),
 *    stripped of its debug symbols when `strip` is there.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { build } from 'esbuild';

const root = resolve(import.meta.dirname, '..');
const outDir = join(root, 'dist-bin');
const output = join(outDir, 'ob-proxy');
// Node's documented fuse: postject flips it so the binary knows it carries a blob.
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

if (Number(process.versions.node.split('.')[0]) < 24) {
  console.error(
    `build:binary needs Node 24 (the node devDependency), not ${process.version}: run it as \`npm run build:binary\`.`,
  );
  process.exit(1);
}

// macOS and Windows need the executable's signature removed and made again around the
// injection (and postject a Mach-O segment name): not done here, because not tested here.
if (process.platform !== 'linux') {
  console.error(
    `build:binary makes a Linux executable, on Linux; this is ${process.platform}. See docs/operations.md, "Single binary".`,
  );
  process.exit(1);
}

const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

/**
 * bin/ob-proxy.ts reads its version from package.json beside dist/, which the binary does not
 * have: the bundle gets the version as a literal instead. If that line changes, the build
 * stops here rather than make a binary that fails at start.
 */
const VERSION_READ = "JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))";
const versionLiteral = {
  name: 'version-literal',
  setup(b) {
    b.onLoad({ filter: /[\\/]bin[\\/]ob-proxy\.ts$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      if (!source.includes(VERSION_READ)) {
        return {
          errors: [
            {
              text: `bin/ob-proxy.ts no longer reads its version as ${VERSION_READ}; update versionLiteral in scripts/build-binary.mjs`,
            },
          ],
        };
      }
      return { contents: source.replace(VERSION_READ, JSON.stringify({ version })), loader: 'ts' };
    });
  },
};

/**
 * With DEV=true Ink reads its own package.json and looks for React DevTools, neither of which the
 * binary holds: it would print a warning with a stack over the console. DevTools are for Ink's
 * developers; in the binary DEV means nothing (test/package/binary.test.ts runs the console so),
 * and the import of react-devtools-core (not installed) goes with the dead branch.
 */
const inkWithoutDev = {
  name: 'ink-without-dev',
  setup(b) {
    b.onLoad({ filter: /[\\/]ink[\\/]build[\\/](ink|reconciler)\.js$/ }, (args) => ({
      contents: readFileSync(args.path, 'utf8').replaceAll("process.env['DEV'] === 'true'", 'false'),
      loader: 'js',
    }));
  },
};

/** Runs a build step quietly; its output is shown only when it fails. */
function run(cmd, args, what) {
  try {
    execFileSync(cmd, args, { stdio: 'pipe' });
  } catch (err) {
    throw new Error(`${what} failed: ${err.stderr?.toString() || err.message}`, { cause: err });
  }
}

const work = mkdtempSync(join(tmpdir(), 'ob-proxy-binary-'));
try {
  const bundleDir = join(work, 'bundle');
  const result = await build({
    absWorkingDir: root,
    entryPoints: { 'ob-proxy': 'bin/ob-proxy.ts' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    outdir: bundleDir,
    chunkNames: 'chunks/[name]-[hash]',
    // pg loads its optional native binding only when asked for `pg.native`, which ob-proxy never is.
    external: ['pg-native'],
    plugins: [versionLiteral, inkWithoutDev],
    // Bundled CommonJS packages call require() for Node's own modules, and a few name __dirname.
    banner: {
      js: [
        "import { createRequire as __obCreateRequire } from 'node:module';",
        "import { fileURLToPath as __obFileURLToPath } from 'node:url';",
        'const require = __obCreateRequire(import.meta.url);',
        'const __filename = __obFileURLToPath(import.meta.url);',
        "const __dirname = __obFileURLToPath(new URL('.', import.meta.url));",
      ].join(' '),
    },
    legalComments: 'none',
    logLevel: 'warning',
    metafile: true,
  });
  const chunks = Object.keys(result.metafile.outputs).map((p) =>
    relative(bundleDir, resolve(root, p)).split('\\').join('/'),
  );

  const assets = Object.fromEntries(chunks.map((c) => [c, join(bundleDir, c)]));
  writeFileSync(join(work, 'chunks.json'), JSON.stringify(chunks));
  assets['chunks.json'] = join(work, 'chunks.json');
  const seaConfig = join(work, 'sea-config.json');
  const blob = join(work, 'sea.blob');
  writeFileSync(
    seaConfig,
    JSON.stringify({
      main: join(root, 'scripts', 'sea-main.cjs'),
      output: blob,
      disableExperimentalSEAWarning: true,
      assets,
    }),
  );
  run(process.execPath, ['--experimental-sea-config', seaConfig], 'node --experimental-sea-config');

  mkdirSync(outDir, { recursive: true });
  rmSync(output, { force: true });
  // Node's debug symbols are 18 MB of the 126 that nobody running the binary reads.
  try {
    execFileSync('strip', ['-o', output, process.execPath], { stdio: 'ignore' });
  } catch {
    copyFileSync(process.execPath, output);
  }
  chmodSync(output, 0o755);
  try {
    // postject prints warnings about ELF notes it leaves alone; shown only if it fails.
    run(
      process.execPath,
      [
        join(root, 'node_modules', 'postject', 'dist', 'cli.js'),
        output,
        'NODE_SEA_BLOB',
        blob,
        '--sentinel-fuse',
        FUSE,
      ],
      'postject',
    );
    // A binary that cannot start is no build: run it once, as a user would first.
    const printed = execFileSync(output, ['--version'], { encoding: 'utf8', env: { PATH: '' } }).trim();
    if (printed !== version) throw new Error(`dist-bin/ob-proxy --version printed "${printed}", not ${version}`);
  } catch (err) {
    rmSync(output, { force: true });
    throw err;
  }
  const bytes = statSync(output).size;
  console.log(`dist-bin/ob-proxy ${version}: ${(bytes / 1e6).toFixed(1)} MB, ${chunks.length} chunks`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
