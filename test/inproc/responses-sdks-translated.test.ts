/**
 * The Responses clients' table (test/helpers/responses-clients.ts), translated: the simulator
 * has no /v1/responses (an Ollama before 0.13.3), the proxy learns so from the first request,
 * sends that request again as chat completions, and from then on sends every request so. The
 * clients' expectations are the passthrough's; the simulator receives chat bodies.
 */
import { describeClients } from '../helpers/responses-clients.js';

describeClients(false);
