/**
 * ob_proxy_requests_total by route: chat completions' series keep their labels, another API's
 * answers carry `route` (ROUTES), so a dashboard tells the APIs apart.
 */
import { expect, it } from 'vitest';
import { Metrics } from '../../daemon/metrics/metrics.js';

it('counts each route apart, chat without a route label and the Responses API with route="responses"', async () => {
  const m = new Metrics({ keyLabel: true, keys: () => undefined });
  m.answered('gpu', 'k1', 200, 0.01);
  m.answered('gpu', 'k1', 200, 0.01, 1);
  m.answered('gpu', 'k1', 200, 0.01, 1);
  m.answered('gpu', 'k1', 401, 0.01, 1);
  const text = await m.scrape();
  expect(text.split('\n').filter((l) => l.startsWith('ob_proxy_requests_total{'))).toEqual([
    'ob_proxy_requests_total{instance="gpu",key="k1",code="200"} 1',
    'ob_proxy_requests_total{instance="gpu",key="k1",code="200",route="responses"} 2',
    'ob_proxy_requests_total{instance="gpu",key="k1",code="401",route="responses"} 1',
  ]);
});
