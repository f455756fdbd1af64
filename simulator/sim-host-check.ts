/**
 * Ollama's allowedHostsMiddleware (Ollama's server/routes.go): when Ollama listens on a loopback
 * address, a request whose Host is not a loopback/private/unspecified/local-interface IP,
 * `localhost`, the machine's hostname, or `*.localhost|*.local|*.internal` gets 403, empty body.
 */
import { BlockList, isIP } from 'node:net';
import { hostname, networkInterfaces } from 'node:os';

const LOCAL_TLDS = ['.localhost', '.local', '.internal'];

function allowedIps(): BlockList {
  const list = new BlockList();
  list.addSubnet('127.0.0.0', 8, 'ipv4'); // loopback
  list.addSubnet('10.0.0.0', 8, 'ipv4'); // private
  list.addSubnet('172.16.0.0', 12, 'ipv4');
  list.addSubnet('192.168.0.0', 16, 'ipv4');
  list.addAddress('0.0.0.0', 'ipv4'); // unspecified
  list.addAddress('::1', 'ipv6');
  list.addSubnet('fc00::', 7, 'ipv6');
  list.addAddress('::', 'ipv6');
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) {
      try {
        list.addAddress(a.address.split('%')[0] ?? a.address, a.family === 'IPv6' ? 'ipv6' : 'ipv4');
      } catch {
        // an address Node cannot parse cannot match either
      }
    }
  }
  return list;
}

/** The hostname part of a Host header: "[::1]:80" → "::1", "a.b:80" → "a.b", "::1" → "::1". */
function hostPart(host: string): string {
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end < 0 ? host : host.slice(1, end);
  }
  const colon = host.indexOf(':');
  if (colon < 0 || host.indexOf(':', colon + 1) >= 0) return host; // no port, or a bare IPv6
  return host.slice(0, colon);
}

/** Builds the predicate `Host header → allowed?`, with the machine's addresses read once. */
export function makeHostCheck(): (hostHeader: string | undefined) => boolean {
  const ips = allowedIps();
  const machine = hostname().toLowerCase();
  const cache = new Map<string, boolean>();

  const decide = (header: string): boolean => {
    const host = hostPart(header).toLowerCase();
    const family = isIP(host);
    if (family !== 0) {
      try {
        if (ips.check(host.split('%')[0] ?? host, family === 6 ? 'ipv6' : 'ipv4')) return true;
      } catch {
        // fall through to the name rules, as Go does when ParseAddr fails
      }
    }
    if (host === '' || host === 'localhost' || host === machine) return true;
    return LOCAL_TLDS.some((tld) => host.endsWith(tld));
  };

  return (hostHeader) => {
    if (hostHeader === undefined || hostHeader === '') return true;
    let ok = cache.get(hostHeader);
    if (ok === undefined) {
      ok = decide(hostHeader);
      if (cache.size < 256) cache.set(hostHeader, ok);
    }
    return ok;
  };
}

/** Ollama applies the check only when its listener is bound to a loopback address. */
export function isLoopbackAddress(address: string): boolean {
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}
