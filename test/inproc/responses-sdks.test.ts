/**
 * The Responses clients' table (test/helpers/responses-clients.ts), passed through: the
 * simulator serves /v1/responses itself, and receives the clients' bodies as they sent them.
 */
import { describeClients } from '../helpers/responses-clients.js';

describeClients(true);
